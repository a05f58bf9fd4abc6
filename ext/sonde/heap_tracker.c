// heap_tracker.c: the live sampled objects (see the header).
//
// Contexts: track_no_alloc (NEWOBJ hook) only probes and writes the slot
// table allocated at creation; everything else runs with the GVL outside
// GC.
//
// Objects sit in an open-addressing table keyed by address, with linear
// probing, four slots per object it may hold. An entry that keep_if drops
// becomes a tombstone (a probe goes on past it), and tidy rebuilds the
// table without tombstones (into a fresh table). Track refuses a new
// object once live entries and tombstones fill three quarters of the
// slots, which bounds every probe until the next tidy.
//
// Stacks live in a recorder used as a stack store (interned once per
// distinct stack). Stacks of dropped objects stay there until tidy finds
// the store much larger than what live objects use, and then copies the
// live ones into a fresh store.
#include "heap_tracker.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY_OBJECT 0
#define TOMBSTONE 1 // never an object's address (objects are 8-byte aligned and never 0)
#define STACK_PENDING UINT32_MAX
#define SLOTS_PER_OBJECT 4
#define ADDRESS_MULTIPLIER UINT64_C(0x9e3779b97f4a7c15)
// A store holding this many more stacks than twice the live objects is rebuilt.
#define STACK_STORE_SLACK 1024

// 40 bytes: the table is four slots per object, and its pages are all
// touched once a few thousand objects are spread over it by their hash.
typedef struct {
  uint64_t object; // EMPTY_OBJECT, TOMBSTONE, or the tracked object's address
  uint64_t object_class;
  uint64_t identity; // what tells this object from a later one at its address; 0 until recorded
  uint32_t sequence; // the low bits of the capture's: only ever compared with an in-flight capture's
  int32_t tid;
  uint32_t weight;
  uint32_t stack_id; // in stacks, or STACK_PENDING
} entry;
_Static_assert(sizeof(entry) == 40, "a slot is 40 bytes");

struct heap_tracker {
  uint32_t max_objects;
  uint32_t slot_count; // a power of two
  uint32_t shift;      // 64 - log2(slot_count)
  entry *slots;
  uint32_t live, tombstones;
  uint64_t drops;
  recorder *stacks;
  uint32_t frame_capacity;
  recorder_frame *frames; // frame_capacity: one stack read back
};

heap_tracker *heap_tracker_new(uint32_t max_objects, uint32_t frame_capacity) {
  if (max_objects == 0 || max_objects > (UINT32_C(1) << 28) || frame_capacity == 0) return NULL;
  heap_tracker *tracker = calloc(1, sizeof(*tracker));
  if (tracker == NULL) return NULL;
  uint32_t slot_count = 16, shift = 60;
  while (slot_count < (uint64_t)max_objects * SLOTS_PER_OBJECT) {
    slot_count <<= 1;
    shift--;
  }
  tracker->max_objects = max_objects;
  tracker->slot_count = slot_count;
  tracker->shift = shift;
  tracker->frame_capacity = frame_capacity;
  // Zeroed pages cost no memory until written, so a large table that
  // tracks few objects stays small.
  tracker->slots = calloc(slot_count, sizeof(entry));
  tracker->frames = calloc(frame_capacity, sizeof(recorder_frame));
  tracker->stacks = recorder_new();
  if (!tracker->slots || !tracker->frames || !tracker->stacks) {
    heap_tracker_free(tracker);
    return NULL;
  }
  return tracker;
}

void heap_tracker_free(heap_tracker *tracker) {
  if (tracker == NULL) return;
  free(tracker->slots);
  free(tracker->frames);
  recorder_free(tracker->stacks);
  free(tracker);
}

static uint32_t home_slot(const heap_tracker *tracker, uint64_t object) {
  return (uint32_t)(((object >> 3) * ADDRESS_MULTIPLIER) >> tracker->shift);
}

static entry *find(const heap_tracker *tracker, uint64_t object) {
  uint32_t mask = tracker->slot_count - 1;
  for (uint32_t i = home_slot(tracker, object), probes = 0; probes < tracker->slot_count; i = (i + 1) & mask, probes++) {
    entry *candidate = &tracker->slots[i];
    if (candidate->object == object) return candidate;
    if (candidate->object == EMPTY_OBJECT) return NULL;
  }
  return NULL;
}

bool heap_tracker_track_no_alloc(heap_tracker *tracker, uint64_t object, uint64_t object_class, uint32_t weight,
                                 int32_t tid, uint64_t sequence) {
  if (object <= TOMBSTONE) return false;
  uint32_t occupied = tracker->live + tracker->tombstones;
  if (tracker->live >= tracker->max_objects || occupied >= tracker->slot_count / 4 * 3) {
    tracker->drops++;
    return false;
  }
  // An object at this address that is still tracked was freed (a new one
  // cannot be allocated where a live one is) or moved (GC.compact; the run
  // clears the tracker then): the newer wins.
  entry *target = find(tracker, object);
  if (target == NULL) {
    uint32_t mask = tracker->slot_count - 1;
    uint32_t i = home_slot(tracker, object);
    while (tracker->slots[i].object > TOMBSTONE) i = (i + 1) & mask;
    target = &tracker->slots[i];
    if (target->object == TOMBSTONE) tracker->tombstones--;
    tracker->live++;
  }
  *target = (entry){.object = object,
                    .object_class = object_class,
                    .sequence = (uint32_t)sequence,
                    .tid = (int32_t)tid,
                    .weight = weight,
                    .stack_id = STACK_PENDING};
  return true;
}

static void remove_entry(heap_tracker *tracker, entry *found) {
  found->object = TOMBSTONE;
  tracker->live--;
  tracker->tombstones++;
}

static heap_object object_of(const entry *tracked) {
  return (heap_object){tracked->object, tracked->object_class, tracked->identity, tracked->tid, tracked->weight};
}

uint32_t heap_tracker_keep_if(heap_tracker *tracker, heap_object_test *keep, void *data) {
  uint32_t dropped = 0;
  for (uint32_t i = 0; i < tracker->slot_count && tracker->live > 0; i++) {
    entry *tracked = &tracker->slots[i];
    if (tracked->object <= TOMBSTONE) continue;
    heap_object object = object_of(tracked);
    if (keep(&object, data)) continue;
    remove_entry(tracker, tracked);
    dropped++;
  }
  return dropped;
}

int heap_tracker_set_stack(heap_tracker *tracker, uint64_t object, uint64_t sequence, uint32_t weight,
                           uint64_t identity, const recorder_frame *frames, uint32_t depth) {
  entry *found = find(tracker, object);
  if (found == NULL || found->sequence != (uint32_t)sequence) return 0;
  uint32_t stack_id;
  if (recorder_intern_stack(tracker->stacks, frames, depth, &stack_id) != 0) {
    remove_entry(tracker, found);
    return -1;
  }
  found->stack_id = stack_id;
  found->weight = weight;
  found->identity = identity;
  return 0;
}

void heap_tracker_scale_weight(heap_tracker *tracker, uint64_t object, uint64_t identity, double scale) {
  entry *found = find(tracker, object);
  if (found == NULL || found->identity != identity || identity == 0) return;
  double scaled = (double)found->weight * scale + 0.5;
  found->weight = scaled >= (double)UINT32_MAX ? UINT32_MAX : scaled < 1 ? 1 : (uint32_t)scaled;
}

static uint32_t read_stack(heap_tracker *tracker, uint32_t stack_id) {
  uint32_t depth = recorder_stack_frames(tracker->stacks, stack_id, tracker->frames, tracker->frame_capacity);
  return depth > tracker->frame_capacity ? tracker->frame_capacity : depth;
}

void heap_tracker_each(heap_tracker *tracker, heap_object_visitor *visit, void *data) {
  for (uint32_t i = 0; i < tracker->slot_count; i++) {
    const entry *tracked = &tracker->slots[i];
    if (tracked->object <= TOMBSTONE || tracked->stack_id == STACK_PENDING) continue;
    uint32_t depth = read_stack(tracker, tracked->stack_id);
    heap_object object = object_of(tracked);
    visit(&object, tracker->frames, depth, data);
  }
}

// Copies the live entries into a fresh table, then frees the old one. Out
// of memory, the tombstones stay (track then refuses objects sooner).
static void rebuild_without_tombstones(heap_tracker *tracker) {
  entry *fresh = calloc(tracker->slot_count, sizeof(entry));
  if (fresh == NULL) return;
  uint32_t mask = tracker->slot_count - 1;
  for (uint32_t i = 0; i < tracker->slot_count; i++) {
    const entry *tracked = &tracker->slots[i];
    if (tracked->object <= TOMBSTONE) continue;
    uint32_t j = home_slot(tracker, tracked->object);
    while (fresh[j].object != EMPTY_OBJECT) j = (j + 1) & mask;
    fresh[j] = *tracked;
  }
  free(tracker->slots);
  tracker->slots = fresh;
  tracker->tombstones = 0;
}

// Re-interns the live objects' stacks into a fresh store, in two rounds:
// the first may fail (out of memory: the old store stays, nothing is lost,
// only not reclaimed); the second finds every stack already there, so it
// cannot fail, and moves the ids over.
static void compact_stacks(heap_tracker *tracker) {
  recorder *fresh = recorder_new();
  if (fresh == NULL) return;
  for (int round = 0; round < 2; round++) {
    for (uint32_t i = 0; i < tracker->slot_count; i++) {
      entry *tracked = &tracker->slots[i];
      if (tracked->object <= TOMBSTONE || tracked->stack_id == STACK_PENDING) continue;
      uint32_t stack_id;
      if (recorder_intern_stack(fresh, tracker->frames, read_stack(tracker, tracked->stack_id), &stack_id) != 0) {
        recorder_free(fresh);
        return;
      }
      if (round == 1) tracked->stack_id = stack_id;
    }
  }
  recorder_free(tracker->stacks);
  tracker->stacks = fresh;
}

void heap_tracker_tidy(heap_tracker *tracker) {
  if (tracker->tombstones > tracker->slot_count / 4) rebuild_without_tombstones(tracker);
  if (recorder_stack_count(tracker->stacks) > 2 * (size_t)tracker->live + STACK_STORE_SLACK) compact_stacks(tracker);
}

void heap_tracker_clear(heap_tracker *tracker) {
  memset(tracker->slots, 0, (size_t)tracker->slot_count * sizeof(entry));
  tracker->live = 0;
  tracker->tombstones = 0;
  recorder_clear(tracker->stacks);
}

void heap_tracker_each_frame(const heap_tracker *tracker, void (*visit)(uint64_t frame_id)) {
  size_t count = recorder_location_count(tracker->stacks);
  for (size_t i = 0; i < count; i++) visit(recorder_location(tracker->stacks, i).frame_id);
}

uint32_t heap_tracker_count(const heap_tracker *tracker) { return tracker->live; }
uint64_t heap_tracker_drops(const heap_tracker *tracker) { return tracker->drops; }
uint32_t heap_tracker_capacity(const heap_tracker *tracker) { return tracker->max_objects; }
