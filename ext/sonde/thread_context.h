// thread_context.h: WHAT is recorded for each thread at each sampling pass:
// its stack, the CPU time and wall time it spent since its previous sample,
// its name, id and state.
#ifndef SONDE_THREAD_CONTEXT_H
#define SONDE_THREAD_CONTEXT_H

#include "profiler.h"

// Returns NULL when out of memory.
thread_contexts *thread_contexts_new(void);
void thread_contexts_free(thread_contexts *contexts);

// Meets every current thread without recording, so that the first sample of
// a thread that existed before the profile started charges only the time
// since the start. Needs the GVL.
void thread_contexts_baseline(sonde_profiler *profiler);

// One sampling pass: records every Ruby thread but the profiler's own. May
// raise (a Ruby exception while naming a new thread); callers protect it.
// Needs the GVL; never called during GC or from a signal handler.
void thread_contexts_sample_all(sonde_profiler *profiler);

// During GC (from the GC tracepoint): notes when GC starts and ends and
// which thread runs it. Allocates nothing and calls no Ruby code.
void thread_contexts_on_gc_enter_no_alloc(sonde_profiler *profiler);
void thread_contexts_on_gc_exit_no_alloc(sonde_profiler *profiler);

// Where GC hooks would slow down allocation: GC time comes from Ruby's own
// GC clock (GC.total_time), read at each pass, charged to the thread running
// the pass. Call once at start, with the GVL.
void thread_contexts_start_polling_gc(sonde_profiler *profiler);

// Records the GC time accumulated since the last call as one "Garbage
// Collection" sample of the thread that ran it (labels state=gc, gc type,
// gc reason), and deducts it from that thread's next sample. Needs the GVL,
// not during GC. Called at each pass, flush and stop.
void thread_contexts_record_pending_gc(sonde_profiler *profiler);

// For a GC state: its "gc type" (major/minor) and "gc reason" labels.
// Returns false for other states.
bool thread_state_gc_labels(uint8_t state, const char **type, const char **reason);

// Number of threads with live state (dead threads are forgotten).
size_t thread_contexts_count(const thread_contexts *contexts);

// Keeps cached Ruby objects alive. For the GC mark phase.
void thread_contexts_mark(const thread_contexts *contexts);

// The label value of a state, for export: "running", "waiting for gvl", ...
const char *thread_state_name(uint8_t state);

#endif
