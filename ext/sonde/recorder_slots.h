// recorder_slots.h: the two recorders of a run and the periods they cover.
// Sampling writes into the active one; a flush makes the other one active
// and hands the one it took to the encoder, so sampling never waits for an
// export. With the GVL only (every pass holds it, so no pass is half-way
// through the recorder a flush takes).
#ifndef SONDE_RECORDER_SLOTS_H
#define SONDE_RECORDER_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder.h"
#include "run.h"

#define RECORDER_SLOTS 2

// The period started at start (monotonic and epoch). NULL when out of memory.
recorder_slots *recorder_slots_new(int64_t start_monotonic_ns, int64_t start_epoch_ns);
void recorder_slots_free(recorder_slots *slots);

// Before the first flush: the first period starts at start instead, its
// epoch start moved by as much. The run's start, once it has met every
// thread (sampling_pass_baseline): what came before is Sonde's own setup,
// which no thread's wall time covers.
void recorder_slots_move_first_start(recorder_slots *slots, int64_t start_monotonic_ns);

// Both recorders keep a timeline of at most capacity entries per period
// (recorder_enable_timeline). Returns 0, or -1 when out of memory.
int recorder_slots_enable_timeline(recorder_slots *slots, size_t capacity);

// Tests only: bounds both timelines to capacity entries (see
// timeline_log_set_capacity_for_testing). False without a timeline.
bool recorder_slots_bound_timeline_for_testing(recorder_slots *slots, size_t capacity);

// Timed samples logged over the run, and those the bound dropped (both
// recorders; 0 and 0 without a timeline).
void recorder_slots_timeline_counts(const recorder_slots *slots, uint64_t *logged, uint64_t *dropped);

// The recorder sampling writes into now.
recorder *recorder_slots_active(const recorder_slots *slots);

// A period, as a flush or stop hands it out.
typedef struct {
  recorder *rec;
  int64_t start_epoch_ns;
  int64_t duration_ns;
} recorder_period;

// Stop: the active recorder and its period up to end (nothing swapped).
recorder_period recorder_slots_final_period(const recorder_slots *slots, int64_t end_monotonic_ns);

// Flush: makes the other recorder active and returns the period it took,
// up to end; the next period starts exactly there. Returns false when a
// flush is already in progress (its recorder is still being encoded).
bool recorder_slots_begin_flush(recorder_slots *slots, int64_t end_monotonic_ns, recorder_period *period);

// Once the flushed recorder is encoded: clears it (keeping its capacity).
void recorder_slots_finish_flush(recorder_slots *slots, recorder *flushed);

uint64_t recorder_slots_flushes(const recorder_slots *slots);

// Calls visit for every frame id either recorder holds (the GC mark phase).
void recorder_slots_each_frame(const recorder_slots *slots, void (*visit)(uint64_t frame_id));

// Calls visit for the object class of every allocation and heap sample
// either recorder holds (the GC mark phase: classes are named at export).
void recorder_slots_each_object_class(const recorder_slots *slots, void (*visit)(uint64_t object_class));

#endif
