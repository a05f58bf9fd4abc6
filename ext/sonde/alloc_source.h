// alloc_source.h: allocation samples and the live heap, as an event source.
//
// Ruby's NEWOBJ hook sees every allocation; one in alloc_interval on
// average (a random geometric gap, so that no loop allocating every N-th
// object can line up with it) is sampled: the allocating thread's stack,
// the object's class, its label set and trace context are captured into a
// buffer of this source's own, and recorded with the GVL at the next safe
// point (the postponed job) or pass. Each sample weighs the allocations
// since the previous one, so alloc-samples totals are the exact number of
// allocations and each stack's share is an unbiased estimate.
//
// With heap, every sampled object is tracked (heap_tracker.h) until the GC
// frees it (Ruby's FREEOBJ hook); each flush and the stop record the
// survivors as heap-live-samples (their weights) and heap-live-size (the
// memory each holds now, ObjectSpace.memsize_of, times its weight) under
// the stack and class they were allocated with.
//
// This is the allocation event source (alloc_event_source).
#ifndef SONDE_ALLOC_SOURCE_H
#define SONDE_ALLOC_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "event_source.h"

// The most sampled objects the heap tracker follows at once.
// 32,768 samples stand for 33 million live objects at the default
// interval; the table is then 4 MB (heap_tracker.c).
#define ALLOC_HEAP_MAX_OBJECTS (1u << 15)

// The object class of the samples that stand for lost ones (their class is
// unknown); never a class's VALUE (those are 8-byte aligned).
#define ALLOC_CLASS_UNKNOWN 1

// NULL when out of memory.
alloc_source *alloc_source_new(const run_settings *settings);
void alloc_source_free(alloc_source *alloc);

extern const event_source alloc_event_source;

// With the GVL, outside GC: records the allocation samples captured so far.
// With keep_unmet, the samples of threads no pass has met yet wait for one
// (they are named then); without, they are recorded under their tid.
// Calls no Ruby method. A no-op for a run without allocation sampling.
void alloc_source_record_captures(sonde_run *run, bool keep_unmet);

// With the GVL, outside GC, while the source runs (its FREEOBJ hook on):
// records the live heap as of now into the active recorder. Calls no Ruby
// method and allocates no Ruby object. A no-op without heap.
void alloc_source_record_heap(sonde_run *run);

// For the profile's header: which sample types this run fills.
bool alloc_source_samples_allocations(const sonde_run *run);
bool alloc_source_tracks_heap(const sonde_run *run);

#endif
