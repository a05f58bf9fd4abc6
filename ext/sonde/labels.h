// labels.h: which label set and which trace context (trace_context.h) the
// code running on each thread is under (Sonde.with_labels,
// Sonde.with_trace_context). The sets themselves are interned on the Ruby
// side (lib/sonde/labels.rb): here a set is its id, 0 for none, which
// samples carry to the recorder and the encoder names from the Ruby side's
// table. A trace context is carried as its numbers.
#ifndef SONDE_LABELS_H
#define SONDE_LABELS_H

#include <stdint.h>

#include <ruby.h>

#include "trace_context.h"

// At load, with the GVL: reads the fiber-local keys the Ruby side keeps the
// current set's id and trace context under (Sonde::Labels::FIBER_KEY,
// Sonde::TraceContext::FIBER_KEY) and defines Native.label_set_changed and
// Native.trace_context_changed.
void labels_define_methods(VALUE native);

// Inside a signal handler: the set of the code the calling thread runs now
// (its current fiber's). A plain read of a thread-local variable.
uint32_t labels_current_signal_safe(void);

// With the GVL: the set of the code thread runs now (its current fiber's),
// read from the fiber-local; calls no Ruby method.
uint32_t labels_of_thread(VALUE thread);

// Inside a signal handler: the trace context of the code the calling thread
// runs now, copied from thread-local storage (double-buffered: a handler
// that interrupts its own thread's write reads the other, whole copy).
void labels_current_trace_signal_safe(trace_context *out);

// With the GVL: thread's current trace context, from its fiber-local
// (all zero for none).
void labels_trace_of_thread(VALUE thread, trace_context *out);

#endif
