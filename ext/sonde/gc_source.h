// gc_source.h: GC time, as its own samples. A GC run's wall time (and, for
// a thread whose CPU is not sampled by its own timer, its CPU time) is
// recorded as one "Garbage Collection" frame with the labels state=gc,
// gc type, gc reason, on the thread that ran it, and taken off that
// thread's own next sample. (CPU-timer samples that land in a GC become GC
// samples on their own, in the signal handler: see signal_sampler.h.)
//
// How GC is timed depends on the Ruby (vm_gc_hooks_slow_allocation): from
// 3.3 a GC enter/exit hook times each GC; on 3.1 and 3.2, where any GC hook
// slows down every allocation, each pass reads Ruby's own GC clock
// (GC.total_time, as GC.stat(:time) gives it) and charges its growth to the
// thread last seen running.
//
// This is the GC event source (gc_event_source).
#ifndef SONDE_GC_SOURCE_H
#define SONDE_GC_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "event_source.h"

// NULL when out of memory.
gc_source *gc_source_new(bool record_gc);
void gc_source_free(gc_source *gc);

extern const event_source gc_event_source;

// With the GVL, not during GC: records the GC time gathered since the last
// call (at each pass, flush and stop). Calls no Ruby method. names_fresh:
// every context's name was just refreshed (the pass met its threads).
// Returns false when the record was lost (out of memory; the caller counts).
bool gc_source_record_pending(sonde_run *run, bool names_fresh);

// With the GVL: the thread seen running Ruby most recently, to which a
// polled GC's time goes (Ruby 3.1/3.2).
void gc_source_note_running_thread(gc_source *gc, int64_t tid);

// The state byte of the latest GC (type and reason), for GC samples. With
// the GVL; allocates nothing (static symbols).
uint8_t gc_source_latest_gc_state(void);

#endif
