// profile_names.h: the names Sonde's pprof profiles give their sample types,
// units and labels. The one definition: profile_export.c writes them, and
// Sonde::Native.profile_names hands the same strings to the Ruby side (the
// report, the converters), so a profile and its readers cannot disagree.
// Constants only.
#ifndef SONDE_PROFILE_NAMES_H
#define SONDE_PROFILE_NAMES_H

#define PROFILE_TYPE_CPU_TIME "cpu-time"
#define PROFILE_TYPE_CPU_SAMPLES "cpu-samples"
#define PROFILE_TYPE_WALL_TIME "wall-time"
#define PROFILE_TYPE_WALL_SAMPLES "wall-samples"
#define PROFILE_TYPE_GVL_WAIT_TIME "gvl-wait-time"
// Allocation and live-heap profiles (alloc_source.h), named as Datadog's
// profiler names them, so its backend shows them without a rename.
#define PROFILE_TYPE_ALLOC_SAMPLES "alloc-samples"
// How many allocation samples alloc-samples' estimate rests on (Datadog's
// name for the same count).
#define PROFILE_TYPE_ALLOC_SAMPLES_UNSCALED "alloc-samples-unscaled"
#define PROFILE_TYPE_HEAP_LIVE_SAMPLES "heap-live-samples"
#define PROFILE_TYPE_HEAP_LIVE_SIZE "heap-live-size"

#define PROFILE_UNIT_NANOSECONDS "nanoseconds"
#define PROFILE_UNIT_COUNT "count"
#define PROFILE_UNIT_BYTES "bytes"

#define PROFILE_LABEL_THREAD_ID "thread id"
#define PROFILE_LABEL_THREAD_NAME "thread name"
#define PROFILE_LABEL_STATE "state"
#define PROFILE_LABEL_GC_TYPE "gc type"
#define PROFILE_LABEL_GC_REASON "gc reason"
// On allocation and heap samples: the allocated object's class ("String",
// "MyApp::User"; "(VM internal)" for objects Ruby keeps hidden).
#define PROFILE_LABEL_ALLOCATION_CLASS "allocation class"
// The trace context's (trace_context.h), in lower-case hex: 32 digits for
// the trace id (W3C's form), 16 for span ids. Pyroscope links spans to
// profiles by span_id in this form; the Datadog exporter turns the span
// ids into the numeric labels its backend reads.
#define PROFILE_LABEL_TRACE_ID "trace_id"
#define PROFILE_LABEL_SPAN_ID "span_id"
#define PROFILE_LABEL_LOCAL_ROOT_SPAN_ID "local_root_span_id"
// With a timeline (timeline: true): the moment a CPU or wall sample ended,
// in nanoseconds since the Unix epoch (a number label; Datadog's backend
// reads this name). A wall sample covers [end - wall-time, end].
#define PROFILE_LABEL_END_TIMESTAMP_NS "end_timestamp_ns"

#endif
