// testing.c: Sonde::Native::Testing, hooks for tests to reach the paths a
// healthy run never takes (a failing pass, a kernel that refuses timers).
// Not part of Sonde's API. With the GVL.
#include <errno.h>

#include "cpu_timers.h"
#include "profiler.h"
#include "run.h"
#include "sampling_pass.h"

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

void testing_define_methods(VALUE native) {
  VALUE testing = rb_define_module_under(native, "Testing");
  rb_define_module_function(testing, "fail_next_sample", testing_fail_next_sample, 0);
  rb_define_module_function(testing, "fail_timer_creation", testing_fail_timer_creation, 1);
}
