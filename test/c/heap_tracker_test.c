// modules: heap_tracker.c recorder.c timeline_log.c
//
// heap_tracker_test.c: the live sampled objects, checked against a naive
// reference under a random mix of allocations, frees, stacks, tidies and
// clears (as the NEWOBJ/FREEOBJ hooks and flushes would make them), plus
// the edges: a full tracker counts its drops, a stack for an object freed
// (or reused) meanwhile is ignored, and tidy reclaims tombstones and stacks
// without losing a live object. Run under AddressSanitizer and UBSan.
#include "heap_tracker.h"
#include "test_harness.h"

#include <stdlib.h>

#define FRAMES 8

static void stack_of(uint64_t seed, recorder_frame *frames, uint32_t *depth) {
  *depth = 1 + (uint32_t)(seed % FRAMES);
  for (uint32_t i = 0; i < *depth; i++) frames[i] = (recorder_frame){.frame_id = 1000 + seed % 97 + i, .line = (int32_t)i};
}

typedef struct {
  uint64_t objects[64];
  uint32_t depths[64];
  uint64_t leaf_frames[64];
  uint32_t weights;
  int count;
} seen_objects;

static void collect(const heap_object *object, const recorder_frame *frames, uint32_t depth, void *data) {
  seen_objects *seen = data;
  if (seen->count < 64) {
    seen->objects[seen->count] = object->object;
    seen->depths[seen->count] = depth;
    seen->leaf_frames[seen->count] = depth ? frames[0].frame_id : 0;
  }
  seen->weights += object->weight;
  seen->count++;
}

static bool keep_all_but(const heap_object *object, void *data) { return object->object != *(uint64_t *)data; }

// Stops tracking one object, as a liveness check that found it dead does.
static uint32_t forget(heap_tracker *tracker, uint64_t object) {
  return heap_tracker_keep_if(tracker, keep_all_but, &object);
}

typedef struct {
  uint64_t identities[8];
  int count;
} asked;

static bool keep_recorded(const heap_object *object, void *data) {
  asked *seen = data;
  if (seen->count < 8) seen->identities[seen->count] = object->identity;
  seen->count++;
  return object->identity != 0;
}

// keep_if is asked about every entry, recorded (with its identity) or not
// (identity 0), and drops those it refuses.
static void test_keep_if_sees_identities_and_drops(void) {
  heap_tracker *tracker = heap_tracker_new(8, FRAMES);
  recorder_frame frames[FRAMES];
  uint32_t depth;
  stack_of(2, frames, &depth);
  heap_tracker_track_no_alloc(tracker, 0x1000, 0x77, 1, 1, 1);
  heap_tracker_track_no_alloc(tracker, 0x2000, 0x77, 1, 1, 2);
  CHECK_EQ_INT(heap_tracker_set_stack(tracker, 0x1000, 1, 3, 0xabc, frames, depth), 0);
  asked seen = {0};
  CHECK_EQ_INT(heap_tracker_keep_if(tracker, keep_recorded, &seen), 1);
  CHECK_EQ_INT(seen.count, 2);
  CHECK(seen.identities[0] == 0xabc || seen.identities[1] == 0xabc);
  CHECK(seen.identities[0] == 0 || seen.identities[1] == 0);
  CHECK_EQ_INT(heap_tracker_count(tracker), 1);
  CHECK_EQ_INT(forget(tracker, 0x3000), 0); // never tracked
  CHECK_EQ_INT(forget(tracker, 0x1000), 1);
  CHECK_EQ_INT(heap_tracker_count(tracker), 0);
  heap_tracker_free(tracker);
}

// A window's scale reaches the object recorded in it, not a later object
// at its address (another identity).
static void test_scale_weight_needs_the_identity(void) {
  heap_tracker *tracker = heap_tracker_new(8, FRAMES);
  recorder_frame frames[FRAMES];
  uint32_t depth;
  stack_of(2, frames, &depth);
  heap_tracker_track_no_alloc(tracker, 0x1000, 0x77, 10, 1, 1);
  heap_tracker_set_stack(tracker, 0x1000, 1, 10, 0x55, frames, depth);
  heap_tracker_scale_weight(tracker, 0x1000, 0x66, 3.0); // another identity: nothing
  heap_tracker_scale_weight(tracker, 0x2000, 0x55, 3.0); // not tracked: nothing
  seen_objects seen = {0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.weights, 10);
  heap_tracker_scale_weight(tracker, 0x1000, 0x55, 2.54);
  seen = (seen_objects){0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.weights, 25);
  heap_tracker_free(tracker);
}

static void test_track_stack_forget(void) {
  heap_tracker *tracker = heap_tracker_new(8, FRAMES);
  if (!CHECK(tracker != NULL)) return;
  recorder_frame frames[FRAMES];
  uint32_t depth;
  stack_of(5, frames, &depth);
  CHECK(heap_tracker_track_no_alloc(tracker, 0x1000, 0x77, 10, 42, 1));
  CHECK(heap_tracker_track_no_alloc(tracker, 0x2000, 0x77, 20, 42, 2));
  CHECK_EQ_INT(heap_tracker_count(tracker), 2);
  // Pending stacks are not visited.
  seen_objects seen = {0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.count, 0);
  CHECK_EQ_INT(heap_tracker_set_stack(tracker, 0x1000, 1, 10, 7, frames, depth), 0);
  // The weight as recorded replaces the hook's (a listening window's scale).
  CHECK_EQ_INT(heap_tracker_set_stack(tracker, 0x2000, 2, 25, 7, frames, depth), 0);
  seen = (seen_objects){0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.count, 2);
  CHECK_EQ_INT(seen.weights, 35);
  CHECK_EQ_INT(seen.depths[0], depth);
  CHECK_EQ_INT(seen.leaf_frames[0], frames[0].frame_id);
  forget(tracker, 0x1000);
  forget(tracker, 0x3000); // never tracked
  seen = (seen_objects){0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.count, 1);
  CHECK_EQ_INT(seen.objects[0], 0x2000);
  CHECK_EQ_INT(heap_tracker_count(tracker), 1);
  heap_tracker_free(tracker);
}

static void test_stack_for_freed_or_reused_address_is_ignored(void) {
  heap_tracker *tracker = heap_tracker_new(8, FRAMES);
  recorder_frame frames[FRAMES];
  uint32_t depth;
  stack_of(3, frames, &depth);
  heap_tracker_track_no_alloc(tracker, 0x1000, 0x77, 1, 1, 1);
  forget(tracker, 0x1000);
  CHECK_EQ_INT(heap_tracker_set_stack(tracker, 0x1000, 1, 1, 7, frames, depth), 0); // freed: nothing happens
  // The address now holds a later sample: the earlier capture's stack is not its.
  heap_tracker_track_no_alloc(tracker, 0x1000, 0x88, 1, 1, 2);
  heap_tracker_set_stack(tracker, 0x1000, 1, 1, 7, frames, depth);
  seen_objects seen = {0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.count, 0);
  recorder_frame other[FRAMES];
  uint32_t other_depth;
  stack_of(4, other, &other_depth);
  heap_tracker_set_stack(tracker, 0x1000, 2, 1, 7, other, other_depth);
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.count, 1);
  CHECK_EQ_INT(seen.depths[0], other_depth);
  heap_tracker_free(tracker);
}

static void test_full_tracker_counts_drops(void) {
  heap_tracker *tracker = heap_tracker_new(4, FRAMES);
  for (uint64_t i = 1; i <= 6; i++) heap_tracker_track_no_alloc(tracker, i * 0x40, 1, 1, 1, i);
  CHECK_EQ_INT(heap_tracker_count(tracker), 4);
  CHECK_EQ_INT(heap_tracker_drops(tracker), 2);
  forget(tracker, 0x40);
  CHECK(heap_tracker_track_no_alloc(tracker, 0x1000, 1, 1, 1, 9));
  heap_tracker_free(tracker);
}

// Churn leaves tombstones; without tidy the tracker stops taking objects
// (bounded probes), with tidy it goes on, and the stack store shrinks back.
static void test_tidy_reclaims_tombstones_and_stacks(void) {
  heap_tracker *tracker = heap_tracker_new(64, FRAMES);
  recorder_frame frames[FRAMES];
  uint32_t depth;
  uint64_t sequence = 0;
  uint64_t refused_without_tidy = 0;
  for (int round = 0; round < 2000; round++) {
    uint64_t object = 0x10000 + (uint64_t)round * 0x28;
    sequence++;
    if (!heap_tracker_track_no_alloc(tracker, object, 1, 1, 1, sequence)) {
      refused_without_tidy++;
      continue;
    }
    stack_of((uint64_t)round * 7919, frames, &depth);
    heap_tracker_set_stack(tracker, object, sequence, 1, 7, frames, depth);
    forget(tracker, object);
  }
  CHECK(refused_without_tidy > 0);
  heap_tracker_clear(tracker);
  uint64_t refused = 0;
  for (int round = 0; round < 20000; round++) {
    uint64_t object = 0x10000 + (uint64_t)round * 0x28;
    sequence++;
    if (!heap_tracker_track_no_alloc(tracker, object, 1, 1, 1, sequence)) refused++;
    stack_of((uint64_t)round * 7919, frames, &depth);
    heap_tracker_set_stack(tracker, object, sequence, 1, 7, frames, depth);
    // Keep one object in 1000 alive.
    if (round % 1000 != 0) forget(tracker, object);
    heap_tracker_tidy(tracker);
  }
  CHECK_EQ_INT(refused, 0);
  CHECK_EQ_INT(heap_tracker_count(tracker), 20);
  seen_objects seen = {0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(seen.count, 20);
  for (int i = 0; i < 20 && i < seen.count; i++) {
    uint64_t round = (seen.objects[i] - 0x10000) / 0x28;
    CHECK_EQ_INT(round % 1000, 0);
    stack_of(round * 7919, frames, &depth);
    CHECK_EQ_INT(seen.depths[i], depth);
    CHECK_EQ_INT(seen.leaf_frames[i], frames[0].frame_id);
  }
  heap_tracker_free(tracker);
}

// Random operations against a reference: the set of live objects with
// known stacks, and each one's weight, must match.
#define REFERENCE_OBJECTS 512
static void test_against_reference(void) {
  heap_tracker *tracker = heap_tracker_new(REFERENCE_OBJECTS, FRAMES);
  uint32_t weight[REFERENCE_OBJECTS] = {0}; // 0: not tracked
  bool has_stack[REFERENCE_OBJECTS] = {false};
  uint64_t sequence_of[REFERENCE_OBJECTS] = {0};
  uint64_t sequence = 0;
  srand(7);
  recorder_frame frames[FRAMES];
  uint32_t depth;
  for (int step = 0; step < 200000; step++) {
    int n = rand() % REFERENCE_OBJECTS;
    uint64_t object = 0x100000 + (uint64_t)n * 0x28;
    switch (rand() % 5) {
      case 0:
      case 1:
        if (weight[n] == 0) {
          sequence_of[n] = ++sequence;
          uint32_t w = 1 + (uint32_t)(rand() % 100);
          if (heap_tracker_track_no_alloc(tracker, object, 5, w, 1, sequence_of[n])) {
            weight[n] = w;
            has_stack[n] = false;
          }
        }
        break;
      case 2:
        if (weight[n] != 0 && !has_stack[n]) {
          stack_of((uint64_t)n, frames, &depth);
          CHECK_EQ_INT(heap_tracker_set_stack(tracker, object, sequence_of[n], weight[n], 7, frames, depth), 0);
          has_stack[n] = true;
        }
        break;
      case 3:
        forget(tracker, object);
        weight[n] = 0;
        break;
      default:
        if (rand() % 50 == 0) heap_tracker_tidy(tracker);
    }
  }
  uint32_t expected_count = 0, expected_weights = 0, tracked = 0;
  for (int n = 0; n < REFERENCE_OBJECTS; n++) {
    if (weight[n] != 0) tracked++;
    if (weight[n] != 0 && has_stack[n]) {
      expected_count++;
      expected_weights += weight[n];
    }
  }
  seen_objects seen = {0};
  heap_tracker_each(tracker, collect, &seen);
  CHECK_EQ_INT(heap_tracker_count(tracker), tracked);
  CHECK_EQ_INT(seen.count, expected_count);
  CHECK_EQ_INT(seen.weights, expected_weights);
  CHECK_EQ_INT(heap_tracker_drops(tracker), 0);
  heap_tracker_free(tracker);
}

static void test_bad_arguments(void) {
  CHECK(heap_tracker_new(0, FRAMES) == NULL);
  CHECK(heap_tracker_new(8, 0) == NULL);
  heap_tracker *tracker = heap_tracker_new(8, FRAMES);
  CHECK(!heap_tracker_track_no_alloc(tracker, 0, 1, 1, 1, 1));
  CHECK(!heap_tracker_track_no_alloc(tracker, 1, 1, 1, 1, 1));
  CHECK_EQ_INT(heap_tracker_count(tracker), 0);
  heap_tracker_free(tracker);
}

int main(void) {
  RUN(test_track_stack_forget);
  RUN(test_keep_if_sees_identities_and_drops);
  RUN(test_scale_weight_needs_the_identity);
  RUN(test_stack_for_freed_or_reused_address_is_ignored);
  RUN(test_full_tracker_counts_drops);
  RUN(test_tidy_reclaims_tombstones_and_stacks);
  RUN(test_against_reference);
  RUN(test_bad_arguments);
  return test_summary("heap_tracker");
}
