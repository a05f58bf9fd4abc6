// capture_buffer.h: the hand-off between the SIGPROF handler and the code
// that records with the GVL. A handler claims a free slot, writes its
// thread's stack and CPU time into it, and publishes it; the sampling pass
// (or the postponed job) takes published slots, records them and frees them.
//
// Pure C, no Ruby, no locks: slots change hands by compare-and-swap on one
// state word each, so any number of handlers (on as many threads) can write
// while one consumer reads. Memory is allocated once, at start; a handler
// that finds every slot taken counts a drop and returns. Unit-tested under
// AddressSanitizer with threads (test/c/capture_buffer_test.c).
#ifndef SONDE_CAPTURE_BUFFER_H
#define SONDE_CAPTURE_BUFFER_H

#include <stdbool.h>
#include <stdint.h>

#include "trace_context.h"

// What made the capture.
typedef enum {
  CAPTURE_CPU = 1,  // the thread's CPU timer fired: a CPU sample
  CAPTURE_WALL = 2, // the trigger's tick reached the GVL holder: its stack for the tick's wall sample
  CAPTURE_ALLOC = 3, // a sampled allocation (alloc_source.h), captured in Ruby's NEWOBJ hook
} capture_kind;

// What the handler saw, as bits of capture.flags.
enum {
  CAPTURE_HELD_GVL = 1,    // the thread held the GVL (it was running Ruby or C code with the GVL)
  CAPTURE_IN_GC = 2,       // a GC was running on this thread: no stack, a GC sample
  CAPTURE_STACK_LATER = 4, // the stack could not be read safely then (a GC ran elsewhere): read it at recording
};

typedef struct {
  uint8_t kind;  // capture_kind
  uint8_t flags; // CAPTURE_* bits
  int32_t tid;   // the Linux thread id of the thread that captured
  int64_t cpu_ns; // CPU time the thread used since its previous CPU sample (CAPTURE_CPU)
  int64_t at_ns;  // CLOCK_MONOTONIC when the handler ran (CAPTURE_CPU, CAPTURE_WALL)
  uint64_t sequence; // order of capture, from capture_buffer_next_sequence
  uint32_t label_set; // the thread's label set then (labels.h), 0 for none
  trace_context trace; // the thread's trace context then (labels.h), all zero for none
  uint32_t depth;       // frames kept, leaf first
  uint32_t total_depth; // the whole stack's depth (>= depth), or 0 when it could not be counted
  // CAPTURE_ALLOC: the object (not kept alive: for the heap tracker), its
  // class (kept alive by the mark phase until recorded), the allocations
  // the sample stands for, and the samples it is made of (1, more when
  // equal ones merged into it while the buffer was full).
  uint64_t object;
  uint64_t object_class;
  uint32_t weight;
  uint32_t draws;
  uint64_t *frame_ids;  // capture_buffer_frame_capacity entries, opaque to this module
  int32_t *lines;       // as many
} capture;

typedef struct capture_buffer capture_buffer;

// slot_count slots of frame_capacity frames each. NULL when out of memory.
capture_buffer *capture_buffer_new(uint32_t slot_count, uint32_t frame_capacity);

// Only once no handler can run any more (after stop waited for them).
void capture_buffer_free(capture_buffer *buffer);

uint32_t capture_buffer_frame_capacity(const capture_buffer *buffer);

// Signal-safe: a free slot, now the caller's alone to fill, or NULL when
// every slot is taken (counted in capture_buffer_drops). The lowest free
// slot is taken, so a buffer that is drained promptly touches few pages.
capture *capture_buffer_claim_signal_safe(capture_buffer *buffer);

// Signal-safe: hands a filled slot to the consumer.
void capture_buffer_publish_signal_safe(capture_buffer *buffer, capture *slot);

// Signal-safe: gives a claimed slot back without publishing it.
void capture_buffer_abandon_signal_safe(capture_buffer *buffer, capture *slot);

// Signal-safe: a number that grows with each call, for capture.sequence.
uint64_t capture_buffer_next_sequence_signal_safe(capture_buffer *buffer);

// What the consumer did with a slot it was shown.
typedef enum {
  CAPTURE_TAKEN, // recorded (or dropped on purpose): the slot is free again
  CAPTURE_KEPT,  // not now: the slot stays published for a later drain
} capture_verdict;

typedef capture_verdict capture_visitor(const capture *slot, void *data);

// Shows each published slot to visit, in capture order, and frees the ones
// it takes. One consumer at a time (callers hold the GVL); handlers may
// claim and publish meanwhile: a slot published during the drain is shown
// in this drain or the next. Returns the number of slots taken.
uint32_t capture_buffer_drain(capture_buffer *buffer, capture_visitor *visit, void *data);

// Calls visit for every frame id of every published slot (for the GC mark
// phase, which must keep the objects they name alive and in place). Runs
// on the consumer's side (with the GVL); slots being written are skipped:
// their frames are on their thread's live stack, which the GC marks.
void capture_buffer_each_published_frame(const capture_buffer *buffer, void (*visit)(uint64_t frame_id, void *data),
                                         void *data);

// The same, slot by slot (for what else a slot holds).
void capture_buffer_each_published(const capture_buffer *buffer, void (*visit)(const capture *slot, void *data),
                                   void *data);

// Frees every slot, published or not. Only when no handler can write (after
// stop, or in a forked child, where the other threads are gone).
void capture_buffer_reset(capture_buffer *buffer);

// Whether slot (one of this buffer's) is published and not yet taken by a
// drain. Meaningful only to a producer that runs one at a time with the
// consumer (the allocation hook and its drain both hold the GVL): such a
// producer may then still change a published slot it wrote.
bool capture_buffer_slot_published(const capture_buffer *buffer, const capture *slot);

// Counters: slots published in all, and captures lost to a full buffer.
uint64_t capture_buffer_published(const capture_buffer *buffer);
uint64_t capture_buffer_drops(const capture_buffer *buffer);
uint32_t capture_buffer_slot_count(const capture_buffer *buffer);

#endif
