// gvl_free_burner.c: a test-only Ruby extension standing in for C code that
// burns CPU without the GVL and touches no Ruby object meanwhile (what a
// well-behaved extension does in rb_thread_call_without_gvl).
//
// GvlFreeBurner.burn(seconds) spins on the thread's own CPU clock for
//   `seconds` of CPU time with the GVL released; returns the loop count.
//
// The signal storm uses it instead of Zlib: Ruby 3.1's zlib crashes, with no
// profiler loaded, when GC.compact runs on another thread while
// Zlib::Deflate.deflate is in its GVL-free part (reproduced 3 times in 3
// under gdb, never without the compaction).
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

static void *burn_without_gvl(void *data) {
  burn_request *request = data;
  double deadline = thread_cpu_seconds() + request->seconds;
  volatile unsigned long loops = 0;
  while (thread_cpu_seconds() < deadline) loops++;
  request->loops = loops;
  return NULL;
}

static VALUE burn(VALUE self, VALUE seconds) {
  burn_request request = {.seconds = NUM2DBL(seconds), .loops = 0};
  rb_thread_call_without_gvl(burn_without_gvl, &request, RUBY_UBF_IO, NULL);
  return ULONG2NUM(request.loops);
}

void Init_gvl_free_burner(void) {
  VALUE module = rb_define_module("GvlFreeBurner");
  rb_define_module_function(module, "burn", burn, 1);
}
