// trace_context.h: the tracing span a sample was taken in (OpenTelemetry's
// or Datadog's, as Sonde::TraceContext read it at the start of a request
// or job), carried per sample beside its label set. Span ids change with
// every request, so unlike labels they are not interned into sets (a set
// per request would exhaust the label table): each sample carries the
// numbers themselves. Pure C, constants and plain structs only: the signal
// handler copies them, the recorder keys samples on them.
#ifndef SONDE_TRACE_CONTEXT_H
#define SONDE_TRACE_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

// All zero: no span. The Ruby side packs the four numbers, in this order,
// as native-endian unsigned 64-bit integers (Sonde::TraceContext::PACKING).
typedef struct {
  uint64_t trace_id_high; // a 128-bit trace id's upper half (0 for a 64-bit id)
  uint64_t trace_id_low;
  uint64_t span_id;
  uint64_t local_root_span_id; // the first span of the trace in this process (the request's server span)
} trace_context;

#define TRACE_CONTEXT_PACKED_SIZE (4 * sizeof(uint64_t))

static inline bool trace_context_is_set(const trace_context *trace) { return trace->span_id != 0; }

static inline bool trace_context_equal(const trace_context *a, const trace_context *b) {
  return a->trace_id_high == b->trace_id_high && a->trace_id_low == b->trace_id_low && a->span_id == b->span_id &&
         a->local_root_span_id == b->local_root_span_id;
}

#endif
