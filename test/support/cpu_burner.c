// cpu_burner.c: a test-only Ruby extension standing in for C code that
// burns CPU for a known time, touching no Ruby object meanwhile.
//
// CpuBurner.without_gvl(seconds) spins on the thread's own CPU clock for
//   `seconds` of CPU time with the GVL released (what a well-behaved
//   extension does in rb_thread_call_without_gvl); returns the loop count.
// CpuBurner.holding_gvl(seconds) the same with the GVL held and no
//   interrupt check: one long C call that no safe point interrupts.
//
// The signal storm uses it instead of Zlib and Bignum#to_s: Ruby 3.1's zlib
// crashes, with no profiler loaded, when GC.compact runs on another thread
// while Zlib::Deflate.deflate is in its GVL-free part (reproduced 3 times
// in 3 under gdb, never without the compaction), and Bignum#to_s's length
// varies with the machine.
#include <time.h>

#include <ruby.h>
#include <ruby/thread.h>

typedef struct {
  double seconds;
  unsigned long loops;
} burn_request;

static double thread_cpu_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void *burn_loop(void *data) {
  burn_request *request = data;
  double deadline = thread_cpu_seconds() + request->seconds;
  volatile unsigned long loops = 0;
  while (thread_cpu_seconds() < deadline) loops++;
  request->loops = loops;
  return NULL;
}

static VALUE without_gvl(VALUE self, VALUE seconds) {
  burn_request request = {.seconds = NUM2DBL(seconds), .loops = 0};
  rb_thread_call_without_gvl(burn_loop, &request, RUBY_UBF_IO, NULL);
  return ULONG2NUM(request.loops);
}

static VALUE holding_gvl(VALUE self, VALUE seconds) {
  burn_request request = {.seconds = NUM2DBL(seconds), .loops = 0};
  burn_loop(&request); // the same loop, the GVL kept
  return ULONG2NUM(request.loops);
}

void Init_cpu_burner(void) {
  VALUE module = rb_define_module("CpuBurner");
  rb_define_module_function(module, "without_gvl", without_gvl, 1);
  rb_define_module_function(module, "holding_gvl", holding_gvl, 1);
}
