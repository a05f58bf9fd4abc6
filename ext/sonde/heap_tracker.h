// heap_tracker.h: the sampled objects that may still be alive, for
// live-heap profiles. Each sampled allocation is tracked by its object's
// address, with an identity given when it is recorded (alloc_source.c uses
// the object id), until keep_if finds it dead; at a flush the survivors
// are read back with the stack that allocated them, their class, their
// weight (the allocations their sample stands for) and the thread that
// allocated them.
//
// Pure C, no Ruby: objects, classes, identities and frames are opaque
// numbers here. Unit-tested under AddressSanitizer
// (test/c/heap_tracker_test.c).
//
// Contexts. track_no_alloc runs in Ruby's NEWOBJ hook: it touches only
// memory allocated at creation, allocates nothing and takes no lock. Every
// other function runs with the GVL, outside GC, and may allocate. Ruby
// runs these one at a time (they all hold the GVL), so the tracker needs
// no atomics.
//
// Bounded: at most max_objects objects are tracked; a sample that finds
// the tracker full is not tracked and is counted (heap_tracker_drops).
#ifndef SONDE_HEAP_TRACKER_H
#define SONDE_HEAP_TRACKER_H

#include <stdbool.h>
#include <stdint.h>

#include "recorder.h"

typedef struct heap_tracker heap_tracker;

// A tracked object, as the visitor of heap_tracker_each sees it.
typedef struct {
  uint64_t object;
  uint64_t object_class;
  uint64_t identity; // as given to heap_tracker_set_stack; 0 before
  int32_t tid;       // the thread that allocated it
  uint32_t weight; // the allocations its sample stands for
} heap_object;

// frame_capacity: the deepest stack kept (the run's max_frames + 1 for the
// truncation marker). NULL when out of memory or max_objects is 0.
heap_tracker *heap_tracker_new(uint32_t max_objects, uint32_t frame_capacity);
void heap_tracker_free(heap_tracker *tracker);

// In the NEWOBJ hook: starts tracking object, sampled by the capture
// numbered sequence, whose stack heap_tracker_set_stack gives later.
// Returns false when the tracker is full (counted).
bool heap_tracker_track_no_alloc(heap_tracker *tracker, uint64_t object, uint64_t object_class, uint32_t weight,
                                 int32_t tid, uint64_t sequence);

// With the GVL: the stack of the object sampled by capture `sequence`, its
// weight as recorded (the sample's, scaled: alloc_source.c) and its
// identity (never 0). An object no longer tracked (or whose address now
// holds a later sample) is left alone. Returns -1 when out of memory (the
// object is then no longer tracked), else 0.
int heap_tracker_set_stack(heap_tracker *tracker, uint64_t object, uint64_t sequence, uint32_t weight,
                           uint64_t identity, const recorder_frame *frames, uint32_t depth);

// With the GVL: multiplies the weight of the object tracked at this
// address with this identity by scale (rounded, at least 1). Any other
// entry, or none, is left alone.
void heap_tracker_scale_weight(heap_tracker *tracker, uint64_t object, uint64_t identity, double scale);

// With the GVL: asks keep about every tracked object, recorded or not, and
// stops tracking those it says no to. Returns how many it dropped.
typedef bool heap_object_test(const heap_object *object, void *data);
uint32_t heap_tracker_keep_if(heap_tracker *tracker, heap_object_test *keep, void *data);

// With the GVL: calls visit for every tracked object whose stack is known,
// with that stack (leaf first).
typedef void heap_object_visitor(const heap_object *object, const recorder_frame *frames, uint32_t depth, void *data);
void heap_tracker_each(heap_tracker *tracker, heap_object_visitor *visit, void *data);

// With the GVL, outside GC: clears the slots dropped objects left behind and
// drops stacks no tracked object uses any more, so that neither grows
// without bound. Allocates only for the latter; out of memory, it keeps
// what it has.
void heap_tracker_tidy(heap_tracker *tracker);

// Forgets every object (after GC.compact moved them). Keeps the memory.
void heap_tracker_clear(heap_tracker *tracker);

// For the GC mark phase: every frame id the stacks hold.
void heap_tracker_each_frame(const heap_tracker *tracker, void (*visit)(uint64_t frame_id));

uint32_t heap_tracker_count(const heap_tracker *tracker);
uint64_t heap_tracker_drops(const heap_tracker *tracker);
uint32_t heap_tracker_capacity(const heap_tracker *tracker);

#endif
