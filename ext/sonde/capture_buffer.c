// capture_buffer.c: the slots the SIGPROF handler fills (see the header).
//
// Runs in two contexts: the handler (claim, publish, abandon, sequence:
// atomics only, no locks, no allocation, no Ruby) and the one consumer,
// which holds the GVL (drain, mark, reset). Each slot's state word is the
// only thing they share about it:
//
//   FREE --claim (CAS, handler)--> WRITING --publish--> PUBLISHED
//   PUBLISHED --drain (CAS, consumer)--> READING --taken--> FREE
//                                                 --kept---> PUBLISHED
//
// A handler writes a slot's contents only while it is WRITING, the consumer
// reads them only while it is READING: the compare-and-swaps, with acquire
// and release order, hand the contents over between threads.
#include "capture_buffer.h"

#include <stdlib.h>

#include "shared.h"

enum { SLOT_FREE, SLOT_WRITING, SLOT_PUBLISHED, SLOT_READING };

struct capture_buffer {
  uint32_t slot_count;
  uint32_t frame_capacity;
  capture *slots;
  uint32_t *states;   // one per slot, atomic
  uint32_t *order;    // the consumer's scratch: slots being drained, by sequence
  uint64_t *frame_ids; // slot_count * frame_capacity, slot i's at i * frame_capacity
  int32_t *lines;
  uint64_t sequence;  // atomic
  uint64_t published; // atomic
  uint64_t drops;     // atomic
  // Atomic: no slot at or above it was ever claimed. Handlers take the
  // lowest free slot, so a few slots near the start are in use at a time
  // and a drain or a mark looks at those only, not at every slot: the
  // consumer drains at each thread's end too, thousands of times a second
  // under thread churn.
  uint32_t claimed_below;
};

capture_buffer *capture_buffer_new(uint32_t slot_count, uint32_t frame_capacity) {
  if (slot_count == 0 || frame_capacity == 0) return NULL;
  capture_buffer *buffer = calloc(1, sizeof(*buffer));
  if (buffer == NULL) return NULL;
  buffer->slot_count = slot_count;
  buffer->frame_capacity = frame_capacity;
  buffer->slots = calloc(slot_count, sizeof(capture));
  buffer->states = calloc(slot_count, sizeof(uint32_t));
  buffer->order = calloc(slot_count, sizeof(uint32_t));
  // Large and zeroed: calloc maps fresh pages, which cost no memory until a
  // handler writes them, and the lowest free slot is always taken first.
  buffer->frame_ids = calloc((size_t)slot_count * frame_capacity, sizeof(uint64_t));
  buffer->lines = calloc((size_t)slot_count * frame_capacity, sizeof(int32_t));
  if (!buffer->slots || !buffer->states || !buffer->order || !buffer->frame_ids || !buffer->lines) {
    capture_buffer_free(buffer);
    return NULL;
  }
  for (uint32_t i = 0; i < slot_count; i++) {
    buffer->slots[i].frame_ids = buffer->frame_ids + (size_t)i * frame_capacity;
    buffer->slots[i].lines = buffer->lines + (size_t)i * frame_capacity;
  }
  return buffer;
}

void capture_buffer_free(capture_buffer *buffer) {
  if (buffer == NULL) return;
  free(buffer->slots);
  free(buffer->states);
  free(buffer->order);
  free(buffer->frame_ids);
  free(buffer->lines);
  free(buffer);
}

uint32_t capture_buffer_frame_capacity(const capture_buffer *buffer) { return buffer->frame_capacity; }

uint32_t capture_buffer_slot_count(const capture_buffer *buffer) { return buffer->slot_count; }

static uint32_t index_of(const capture_buffer *buffer, const capture *slot) {
  return (uint32_t)(slot - buffer->slots);
}

capture *capture_buffer_claim_signal_safe(capture_buffer *buffer) {
  for (uint32_t i = 0; i < buffer->slot_count; i++) {
    uint32_t expected = SLOT_FREE;
    if (shared_load_relaxed(&buffer->states[i]) != SLOT_FREE) continue;
    if (shared_cas_acquire(&buffer->states[i], &expected, SLOT_WRITING)) {
      // Raised before the slot can be published: a drain that sees the
      // slot published sees the bound that covers it.
      uint32_t below = shared_load_relaxed(&buffer->claimed_below);
      while (below <= i && !shared_cas_release(&buffer->claimed_below, &below, i + 1)) {
      }
      capture *slot = &buffer->slots[i];
      slot->kind = 0;
      slot->flags = 0;
      slot->tid = 0;
      slot->cpu_ns = 0;
      slot->sequence = 0;
      slot->depth = 0;
      slot->total_depth = 0;
      slot->label_set = 0;
      slot->object = 0;
      slot->object_class = 0;
      slot->weight = 0;
      slot->draws = 0;
      return slot;
    }
  }
  shared_add_relaxed(&buffer->drops, 1);
  return NULL;
}

void capture_buffer_publish_signal_safe(capture_buffer *buffer, capture *slot) {
  shared_add_relaxed(&buffer->published, 1);
  shared_store_release(&buffer->states[index_of(buffer, slot)], SLOT_PUBLISHED);
}

void capture_buffer_abandon_signal_safe(capture_buffer *buffer, capture *slot) {
  shared_store_release(&buffer->states[index_of(buffer, slot)], SLOT_FREE);
}

uint64_t capture_buffer_next_sequence_signal_safe(capture_buffer *buffer) {
  return shared_add_then_load_relaxed(&buffer->sequence, 1);
}

static uint32_t slots_ever_claimed(const capture_buffer *buffer) {
  uint32_t below = shared_load_acquire(&buffer->claimed_below);
  return below < buffer->slot_count ? below : buffer->slot_count;
}

uint32_t capture_buffer_drain(capture_buffer *buffer, capture_visitor *visit, void *data) {
  uint32_t count = 0;
  uint32_t claimed = slots_ever_claimed(buffer);
  for (uint32_t i = 0; i < claimed; i++) {
    uint32_t expected = SLOT_PUBLISHED;
    if (shared_load_relaxed(&buffer->states[i]) != SLOT_PUBLISHED) continue;
    if (shared_cas_acquire(&buffer->states[i], &expected, SLOT_READING)) {
      buffer->order[count++] = i;
    }
  }
  // Insertion sort by sequence: a drain sees a handful of slots, and the
  // consumer wants them in the order they were captured (the latest wall
  // capture of a thread is the one that counts).
  for (uint32_t i = 1; i < count; i++) {
    uint32_t moving = buffer->order[i];
    uint32_t j = i;
    while (j > 0 && buffer->slots[buffer->order[j - 1]].sequence > buffer->slots[moving].sequence) {
      buffer->order[j] = buffer->order[j - 1];
      j--;
    }
    buffer->order[j] = moving;
  }
  uint32_t taken = 0;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t index = buffer->order[i];
    bool take = visit(&buffer->slots[index], data) == CAPTURE_TAKEN;
    shared_store_release(&buffer->states[index], take ? SLOT_FREE : SLOT_PUBLISHED);
    if (take) taken++;
  }
  return taken;
}

void capture_buffer_each_published(const capture_buffer *buffer, void (*visit)(const capture *slot, void *data),
                                   void *data) {
  uint32_t claimed = slots_ever_claimed(buffer);
  for (uint32_t i = 0; i < claimed; i++) {
    uint32_t state = shared_load_acquire(&buffer->states[i]);
    if (state == SLOT_PUBLISHED || state == SLOT_READING) visit(&buffer->slots[i], data);
  }
}

typedef struct {
  void (*visit)(uint64_t frame_id, void *data);
  void *data;
} frame_visit;

static void visit_frames_of(const capture *slot, void *data) {
  const frame_visit *frames = data;
  for (uint32_t f = 0; f < slot->depth; f++) frames->visit(slot->frame_ids[f], frames->data);
}

void capture_buffer_each_published_frame(const capture_buffer *buffer, void (*visit)(uint64_t frame_id, void *data),
                                         void *data) {
  frame_visit frames = {visit, data};
  capture_buffer_each_published(buffer, visit_frames_of, &frames);
}

void capture_buffer_reset(capture_buffer *buffer) {
  for (uint32_t i = 0; i < buffer->slot_count; i++) shared_store_release(&buffer->states[i], SLOT_FREE);
}

bool capture_buffer_slot_published(const capture_buffer *buffer, const capture *slot) {
  return shared_load_acquire(&buffer->states[index_of(buffer, slot)]) == SLOT_PUBLISHED;
}

uint64_t capture_buffer_published(const capture_buffer *buffer) {
  return shared_load_relaxed(&buffer->published);
}

uint64_t capture_buffer_drops(const capture_buffer *buffer) { return shared_load_relaxed(&buffer->drops); }
