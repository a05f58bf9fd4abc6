// alloc_source.h: allocation samples and the live heap, as an event source.
//
// Ruby's NEWOBJ hook sees every allocation while it is on (every tick, or
// a random alloc_duty share of them: docs/DESIGN.md); one in alloc_interval on
// average (a random geometric gap, so that no loop allocating every N-th
// object can line up with it) is sampled: the allocating thread's stack,
// the object's class, its label set and trace context are captured into a
// buffer of this source's own, and recorded with the GVL at the next safe
// point (the postponed job) or pass. Each sample weighs the allocations
// since the previous one (divided by alloc_duty), so alloc-samples totals
// estimate the number of allocations (exactly, with a duty of 1) and each
// stack's share is an unbiased estimate.
//
// With heap, every sampled object of a class is tracked (heap_tracker.h)
// until a check finds it dead (no FREEOBJ hook: docs/DESIGN.md says how);
// each flush and the stop check the set and record the survivors as
// heap-live-samples (their weights) and heap-live-size (the memory each
// holds now, ObjectSpace.memsize_of, times its weight) under the stack and
// class they were allocated with.
//
// This is the allocation event source (alloc_event_source).
#ifndef SONDE_ALLOC_SOURCE_H
#define SONDE_ALLOC_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "event_source.h"

// The most sampled objects the heap tracker follows at once.
// 32,768 samples stand for 33 million live objects at the default
// interval; the table is then 5 MB (heap_tracker.c).
#define ALLOC_HEAP_MAX_OBJECTS (1u << 15)

// alloc_duty's smallest share: one tick in this many.
#define ALLOC_MAX_BLOCK 100

// NULL when out of memory.
alloc_source *alloc_source_new(const run_settings *settings);
void alloc_source_free(alloc_source *alloc);

extern const event_source alloc_event_source;

// With the GVL, outside GC: records the allocation samples captured so far
// (with listening windows, they wait for alloc_source_close_window). With keep_unmet, the samples of threads no pass has met yet wait for one
// (they are named then); without, they are recorded under their tid.
// Calls no Ruby method. A no-op for a run without allocation sampling.
void alloc_source_record_captures(sonde_run *run, bool keep_unmet);

// With the GVL, outside GC, while the source runs: records the waiting
// samples, checks which tracked objects are alive, and records those as
// the live heap as of now into the active recorder. Calls no Ruby method
// but rb_obj_id (which may allocate an id for a sample being recorded;
// protected); walks the heap's page list. A no-op without heap.
void alloc_source_record_heap(sonde_run *run);

// With the GVL, after a tick's pass: with alloc_duty below 1, says whether
// allocations are listened to until the next tick (one tick per block of
// 1 / alloc_duty, drawn at random), and turns Ruby's NEWOBJ hook on or off
// to match. A no-op otherwise.
void alloc_source_after_tick(sonde_run *run);

// With the GVL, outside GC: records every allocation sample waiting, those
// of a listening window still open included (weighed by the period so
// far), and those of threads no pass has met yet (under their tid). For
// the stop and flushes.
void alloc_source_close_window(sonde_run *run);

// With the GVL, as a profile ends (a flush or the stop), after its
// allocation samples are recorded; has_samples: whether it holds any.
// With alloc_duty below 1, when no tick of the profile's period was
// listened to, writes the note its comments carry into note (its estimate
// rests on no listening of its own: never a silent zero) and returns true;
// false otherwise. Starts the next profile's count either way. Calls no
// Ruby method.
bool alloc_source_end_profile(sonde_run *run, bool has_samples, char *note, size_t size);

// With the GVL, on the main Ractor: stops sampling allocations for the rest
// of the run (the hook off for good, what it heard recorded, the tracked
// heap still checked and recorded). Ruby 3.1's NEWOBJ hook crashes the VM
// while a Ractor is created (Ruby bug #18464): lib/sonde/ractor_guard.rb
// calls this before Ractor.new there. Returns whether it was on.
bool alloc_source_turn_off(sonde_run *run);

// With the GVL, on the main Ractor: whether other Ractors may be running
// now. While they may, the live heap is neither checked nor recorded (the
// checks and records skipped are counted): they allocate and sweep the
// same heap in parallel. Set by profiler.c at the start, at Ractor.new and
// before each flush's and the stop's heap record.
void alloc_source_set_other_ractors(sonde_run *run, bool running);

// For the profile's header: which sample types this run fills.
bool alloc_source_samples_allocations(const sonde_run *run);
bool alloc_source_tracks_heap(const sonde_run *run);

#endif
