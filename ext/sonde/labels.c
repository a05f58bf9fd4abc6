// labels.c: the current label set of each thread, where a signal handler
// can read it.
//
// Contexts: labels_current_signal_safe runs in the SIGPROF handler: it
// reads one thread-local variable (initial-exec TLS, so no allocation and
// no lookup on first use from a handler). Everything else runs with the
// GVL: Native.label_set_changed (called by Sonde.with_labels on the
// thread whose labels changed) and the fiber-switch hook (on the thread
// that switched) write the calling thread's variable; labels_of_thread
// reads another thread's fiber-local (rb_thread_local_aref: a table
// lookup, no method call, so the sampling pass may use it).
#include "labels.h"

#include <ruby/debug.h>

#include "profile_export.h"

// The calling thread's current set. Initial-exec: the handler must not be
// the first to touch a dynamically allocated TLS block.
static __thread volatile uint32_t current_label_set __attribute__((tls_model("initial-exec")));

// Written once at load.
static ID fiber_key;
// The fiber-switch hook, made on the first label change and kept: a switch
// must bring the new fiber's set into the thread's variable.
static VALUE fiber_switch_hook = Qnil;

static uint32_t label_set_of(VALUE value) {
  if (!FIXNUM_P(value)) return 0;
  long id = FIX2LONG(value);
  return id > 0 && id <= UINT32_MAX ? (uint32_t)id : 0;
}

uint32_t labels_current_signal_safe(void) { return current_label_set; }

uint32_t labels_of_thread(VALUE thread) { return label_set_of(rb_thread_local_aref(thread, fiber_key)); }

static void on_fiber_switch(VALUE tracepoint, void *data) {
  current_label_set = labels_of_thread(rb_thread_current());
}

// Native.label_set_changed(id): the calling fiber's set (its fiber-local)
// is now id; the thread's variable follows, and from now on fiber switches.
static VALUE native_label_set_changed(VALUE self, VALUE id) {
  if (NIL_P(fiber_switch_hook)) {
    fiber_switch_hook = rb_tracepoint_new(0, RUBY_EVENT_FIBER_SWITCH, on_fiber_switch, NULL);
    rb_tracepoint_enable(fiber_switch_hook);
  }
  current_label_set = label_set_of(id);
  return Qnil;
}

void labels_define_methods(VALUE native) {
  VALUE sonde = rb_const_get(rb_cObject, rb_intern("Sonde"));
  VALUE labels = rb_const_get(sonde, rb_intern("Labels"));
  fiber_key = SYM2ID(rb_const_get(labels, rb_intern("FIBER_KEY")));
  if (NUM2LONG(rb_const_get(labels, rb_intern("MAX_LABELS"))) > PROFILE_EXPORT_MAX_LABELS) {
    rb_raise(rb_eRuntimeError, "sonde: Labels::MAX_LABELS is above what the encoder holds (%d)",
             PROFILE_EXPORT_MAX_LABELS);
  }
  rb_gc_register_address(&fiber_switch_hook);
  rb_define_module_function(native, "label_set_changed", native_label_set_changed, 1);
}
