// testing.c: Sonde::Native::Testing, hooks for tests to reach the paths a
// healthy run never takes (a failing pass, a kernel that refuses timers),
// and for benchmarks to time one step of a pass alone. Not part of Sonde's
// API. With the GVL.
#include <errno.h>

#include "clocks.h"
#include "cpu_timers.h"
#include "profiler.h"
#include "recorder_slots.h"
#include "run.h"
#include "sampling_pass.h"
#include "stacks.h"
#include "vm.h"

static sonde_run *running_run(void) {
  sonde_run *run = run_active();
  if (run == NULL) {
    rb_raise(rb_const_get(rb_const_get(rb_cObject, rb_intern("Sonde")), rb_intern("StateError")),
             "Sonde is not running");
  }
  return run;
}

// Testing.fail_next_sample -> makes the next sampling pass raise.
static VALUE testing_fail_next_sample(VALUE self) {
  sampling_pass_fail_next_for_testing(running_run()->pass);
  return Qnil;
}

// Testing.fail_timer_creation(errno) -> every later timer_create of the
// run fails with that errno (EPERM: as a seccomp policy would; EAGAIN: a
// kernel limit). Returns false in no-signals mode (no timers).
static VALUE testing_fail_timer_creation(VALUE self, VALUE err) {
  sonde_run *run = running_run();
  if (run->timers == NULL) return Qfalse;
  cpu_timers_fail_creation_for_testing(run->timers, NUM2INT(err));
  return Qtrue;
}

// Testing.bound_timeline(entries) -> true, or false when the run keeps no
// timeline: each period's timeline keeps at most that many entries from
// now on, so a test can see the bound at work without a long run.
static VALUE testing_bound_timeline(VALUE self, VALUE entries) {
  long capacity = NUM2LONG(entries);
  if (capacity < 1) rb_raise(rb_eArgError, "entries must be at least 1");
  return recorder_slots_bound_timeline_for_testing(running_run()->slots, (size_t)capacity) ? Qtrue : Qfalse;
}

// Testing.burn_at_stop(seconds) -> the stop burns that much CPU on its
// own thread after it reads its period's end and before it halts, while
// the CPU timers still run: samples taken then come after the end.
static VALUE testing_burn_at_stop(VALUE self, VALUE seconds) {
  double value = NUM2DBL(seconds);
  if (!(value >= 0 && value <= 10)) rb_raise(rb_eArgError, "seconds must be from 0 to 10");
  running_run()->stop_burn_ns_for_testing = (int64_t)(value * 1e9);
  return Qnil;
}

// Testing.stack_read_ns(thread, times) -> [frames, [ns, ...]]: reads the
// thread's stack times in a row, as a sampling pass reads a thread that
// ran since its previous sample (all its frames, no memo), and times each
// read. The first read after the application ran finds the stack's memory
// (its frames, their iseqs and method entries) where the application left
// it; the next ones find it in the caches the first filled
// (bench/workloads/puma_worker.rb compares them).
#define STACK_READ_MAX_FRAMES 2048
static VALUE testing_stack_read_ns(VALUE self, VALUE thread, VALUE times) {
  long count = NUM2LONG(times);
  if (count < 1 || count > 100) rb_raise(rb_eArgError, "times must be from 1 to 100");
  const void *handle = vm_thread_handle_of(thread);
  if (handle == NULL) rb_raise(rb_eArgError, "not a living thread");
  static recorder_frame frames[STACK_READ_MAX_FRAMES + 1];
  VALUE durations = rb_ary_new_capa(count);
  uint32_t depth = 0;
  for (long i = 0; i < count; i++) {
    int64_t started = clocks_monotonic_ns();
    depth = stacks_collect(handle, frames, STACK_READ_MAX_FRAMES);
    rb_ary_push(durations, LL2NUM(clocks_monotonic_ns() - started));
  }
  return rb_ary_new_from_args(2, UINT2NUM(depth), durations);
}

void testing_define_methods(VALUE native) {
  VALUE testing = rb_define_module_under(native, "Testing");
  rb_define_module_function(testing, "fail_next_sample", testing_fail_next_sample, 0);
  rb_define_module_function(testing, "fail_timer_creation", testing_fail_timer_creation, 1);
  rb_define_module_function(testing, "bound_timeline", testing_bound_timeline, 1);
  rb_define_module_function(testing, "burn_at_stop", testing_burn_at_stop, 1);
  rb_define_module_function(testing, "stack_read_ns", testing_stack_read_ns, 2);
}
