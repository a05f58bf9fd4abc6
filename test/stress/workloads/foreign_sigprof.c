// foreign_sigprof.c: a test-only Ruby extension standing in for another C
// library (another profiler) that owns SIGPROF, for
// test/stress/signals_test.rb.
//
// ForeignSigprof.install   installs its own SA_SIGINFO handler with
//                          sigaction; the handler counts the signals it gets
// ForeignSigprof.count     how many SIGPROFs the handler got
// ForeignSigprof.installed? whether SIGPROF's handler is still this one
// ForeignSigprof.disposition "default", "ignore", or "handler in LIBRARY"
//                          (what dladdr says of the current handler)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <ruby.h>

static volatile sig_atomic_t received;

static void foreign_handler(int signal_number, siginfo_t *info, void *context) { received++; }

static VALUE install(VALUE self) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  action.sa_sigaction = foreign_handler;
  if (sigaction(SIGPROF, &action, NULL) != 0) rb_sys_fail("sigaction");
  return Qtrue;
}

static VALUE count(VALUE self) { return LONG2NUM((long)received); }

static VALUE installed_p(VALUE self) {
  struct sigaction current;
  if (sigaction(SIGPROF, NULL, &current) != 0) rb_sys_fail("sigaction");
  return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == foreign_handler ? Qtrue : Qfalse;
}

static VALUE disposition(VALUE self) {
  struct sigaction current;
  if (sigaction(SIGPROF, NULL, &current) != 0) rb_sys_fail("sigaction");
  if (!(current.sa_flags & SA_SIGINFO)) {
    if (current.sa_handler == SIG_DFL) return rb_str_new_cstr("default");
    if (current.sa_handler == SIG_IGN) return rb_str_new_cstr("ignore");
  }
  void *address = (current.sa_flags & SA_SIGINFO) ? (void *)current.sa_sigaction : (void *)current.sa_handler;
  Dl_info info;
  char text[1024];
  if (dladdr(address, &info) != 0 && info.dli_fname != NULL) {
    snprintf(text, sizeof(text), "%s in %s", info.dli_sname ? info.dli_sname : "?", info.dli_fname);
  } else {
    snprintf(text, sizeof(text), "handler at %p", address);
  }
  return rb_str_new_cstr(text);
}

void Init_foreign_sigprof(void) {
  VALUE module = rb_define_module("ForeignSigprof");
  rb_define_module_function(module, "install", install, 0);
  rb_define_module_function(module, "count", count, 0);
  rb_define_module_function(module, "installed?", installed_p, 0);
  rb_define_module_function(module, "disposition", disposition, 0);
}
