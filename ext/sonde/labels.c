// labels.c: the current label set and trace context of each thread, where
// a signal handler can read them.
//
// Contexts: labels_current_signal_safe and labels_current_trace_signal_safe
// run in the SIGPROF handler: they read thread-local variables
// (initial-exec TLS, so no allocation and no lookup on first use from a
// handler). Everything else runs with the GVL: Native.label_set_changed
// and Native.trace_context_changed (called by Sonde.with_labels and
// Sonde.with_trace_context on the thread whose context changed) and the
// fiber-switch hook (on the thread that switched) write the calling
// thread's variables; labels_of_thread and labels_trace_of_thread read
// another thread's fiber-locals (rb_thread_local_aref: a table lookup, no
// method call, so the sampling pass may use them).
#include "labels.h"

#include <string.h>

#include <ruby/debug.h>

#include "sample_constants.h"
#include "shared.h"

// The calling thread's current set. Initial-exec: the handler must not be
// the first to touch a dynamically allocated TLS block.
static __thread volatile uint32_t current_label_set __attribute__((tls_model("initial-exec")));
// The calling thread's current trace context, in two copies: the writer
// (this thread, with the GVL) fills the one not in use, then switches the
// index with one store, so a handler interrupting the write on this thread
// reads a whole context, the old or the new.
static __thread trace_context current_traces[2] __attribute__((tls_model("initial-exec")));
static __thread volatile uint32_t current_trace_index __attribute__((tls_model("initial-exec")));

// Written once at load.
static ID fiber_key, trace_fiber_key;
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

// A packed context (Sonde::TraceContext.pack), or none for anything else.
static void trace_of(VALUE packed, trace_context *out) {
  if (RB_TYPE_P(packed, T_STRING) && RSTRING_LEN(packed) == (long)TRACE_CONTEXT_PACKED_SIZE) {
    memcpy(out, RSTRING_PTR(packed), TRACE_CONTEXT_PACKED_SIZE);
  } else {
    memset(out, 0, sizeof(*out));
  }
}

void labels_current_trace_signal_safe(trace_context *out) { *out = current_traces[current_trace_index & 1]; }

void labels_trace_of_thread(VALUE thread, trace_context *out) {
  trace_of(rb_thread_local_aref(thread, trace_fiber_key), out);
}

static void set_current_trace(VALUE packed) {
  uint32_t spare = (current_trace_index + 1) & 1;
  trace_of(packed, &current_traces[spare]);
  // The copy must be whole before a handler can pick it.
  shared_fence_signal();
  current_trace_index = spare;
}

static void on_fiber_switch(VALUE tracepoint, void *data) {
  VALUE thread = rb_thread_current();
  current_label_set = labels_of_thread(thread);
  set_current_trace(rb_thread_local_aref(thread, trace_fiber_key));
}

// Made on the first change of labels or trace context, and kept: a switch
// must bring the new fiber's into the thread's variables.
static void follow_fiber_switches(void) {
  if (!NIL_P(fiber_switch_hook)) return;
  fiber_switch_hook = rb_tracepoint_new(0, RUBY_EVENT_FIBER_SWITCH, on_fiber_switch, NULL);
  rb_tracepoint_enable(fiber_switch_hook);
}

// Native.label_set_changed(id): the calling fiber's set (its fiber-local)
// is now id; the thread's variable follows, and from now on fiber switches.
static VALUE native_label_set_changed(VALUE self, VALUE id) {
  follow_fiber_switches();
  current_label_set = label_set_of(id);
  return Qnil;
}

// Native.trace_context_changed(packed or nil): the same for the calling
// fiber's trace context.
static VALUE native_trace_context_changed(VALUE self, VALUE packed) {
  follow_fiber_switches();
  set_current_trace(packed);
  return Qnil;
}

void labels_define_methods(VALUE native) {
  VALUE sonde = rb_const_get(rb_cObject, rb_intern("Sonde"));
  VALUE labels = rb_const_get(sonde, rb_intern("Labels"));
  fiber_key = SYM2ID(rb_const_get(labels, rb_intern("FIBER_KEY")));
  VALUE trace = rb_const_get(sonde, rb_intern("TraceContext"));
  trace_fiber_key = SYM2ID(rb_const_get(trace, rb_intern("FIBER_KEY")));
  if (NUM2LONG(rb_const_get(trace, rb_intern("PACKED_BYTES"))) != (long)TRACE_CONTEXT_PACKED_SIZE) {
    rb_raise(rb_eRuntimeError, "sonde: TraceContext::PACKED_BYTES is not what the core reads (%d)",
             (int)TRACE_CONTEXT_PACKED_SIZE);
  }
  if (NUM2LONG(rb_const_get(labels, rb_intern("MAX_LABELS"))) > SAMPLE_MAX_LABELS) {
    rb_raise(rb_eRuntimeError, "sonde: Labels::MAX_LABELS is above what the encoder holds (%d)",
             SAMPLE_MAX_LABELS);
  }
  rb_gc_register_address(&fiber_switch_hook);
  rb_define_module_function(native, "label_set_changed", native_label_set_changed, 1);
  rb_define_module_function(native, "trace_context_changed", native_trace_context_changed, 1);
}
