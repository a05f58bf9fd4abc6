// modules: capture_buffer.c
// sanitizers: thread
//
// capture_buffer_test.c: the slots the SIGPROF handler fills, checked alone
// and under contention. Writer threads claim, fill and publish slots as fast
// as they can (as handlers on many threads would) while one consumer drains
// them; every capture must arrive exactly once, whole, and every loss must
// be a counted drop. Run under AddressSanitizer and UBSan.
#include "capture_buffer.h"
#include "test_harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 8
#define FRAMES 16
#define WRITERS 4
#define CAPTURES_PER_WRITER 20000

// A capture's contents derive from (writer, n), so the consumer can tell a
// torn or mixed-up slot from a whole one.
static uint64_t frame_value(int writer, uint32_t n, uint32_t frame) {
  return ((uint64_t)writer << 48) | ((uint64_t)n << 8) | frame;
}

static void fill(capture *slot, int writer, uint32_t n) {
  slot->kind = CAPTURE_CPU;
  slot->tid = writer;
  slot->cpu_ns = n;
  slot->depth = 1 + n % FRAMES;
  slot->total_depth = slot->depth;
  for (uint32_t f = 0; f < slot->depth; f++) {
    slot->frame_ids[f] = frame_value(writer, n, f);
    slot->lines[f] = (int32_t)(n + f);
  }
}

static bool is_whole(const capture *slot) {
  uint32_t n = (uint32_t)slot->cpu_ns;
  if (slot->kind != CAPTURE_CPU || slot->depth != 1 + n % FRAMES) return false;
  for (uint32_t f = 0; f < slot->depth; f++) {
    if (slot->frame_ids[f] != frame_value(slot->tid, n, f) || slot->lines[f] != (int32_t)(n + f)) return false;
  }
  return true;
}

typedef struct {
  int seen;
  bool whole;
} single_drain;

static capture_verdict check_whole(const capture *slot, void *data) {
  single_drain *state = data;
  state->seen++;
  state->whole = state->whole && is_whole(slot);
  return CAPTURE_TAKEN;
}

static void test_claim_fill_publish_drain(void) {
  capture_buffer *buffer = capture_buffer_new(SLOTS, FRAMES);
  CHECK(buffer != NULL);
  CHECK_EQ_INT(capture_buffer_frame_capacity(buffer), FRAMES);
  capture *slot = capture_buffer_claim_signal_safe(buffer);
  CHECK(slot != NULL);
  fill(slot, 1, 5);
  slot->sequence = capture_buffer_next_sequence_signal_safe(buffer);
  capture_buffer_publish_signal_safe(buffer, slot);
  CHECK_EQ_INT(capture_buffer_published(buffer), 1);

  single_drain state = {0, true};
  CHECK_EQ_INT(capture_buffer_drain(buffer, check_whole, &state), 1);
  CHECK_EQ_INT(state.seen, 1);
  CHECK(state.whole);
  CHECK_EQ_INT(capture_buffer_drain(buffer, check_whole, &state), 0); // taken: gone
  CHECK_EQ_INT(state.seen, 1);
  capture_buffer_free(buffer);
}

static capture_verdict keep_all(const capture *s, void *data) {
  (void)s;
  (*(int *)data)++;
  return CAPTURE_KEPT;
}

static capture_verdict take_all(const capture *s, void *data) {
  uint64_t *last = data;
  CHECK(s->sequence > *last); // capture order
  *last = s->sequence;
  return CAPTURE_TAKEN;
}

static void count_frame(uint64_t frame_id, void *data) {
  (void)frame_id;
  (*(int *)data)++;
}

static void test_full_buffer_counts_drops_and_kept_slots_stay(void) {
  capture_buffer *buffer = capture_buffer_new(SLOTS, FRAMES);
  // Published in reverse slot order of sequence: the drain must sort.
  capture *slots[SLOTS];
  for (int i = 0; i < SLOTS; i++) {
    slots[i] = capture_buffer_claim_signal_safe(buffer);
    CHECK(slots[i] != NULL);
    fill(slots[i], 2, (uint32_t)i);
  }
  for (int i = SLOTS - 1; i >= 0; i--) {
    slots[i]->sequence = capture_buffer_next_sequence_signal_safe(buffer);
    capture_buffer_publish_signal_safe(buffer, slots[i]);
  }
  CHECK(capture_buffer_claim_signal_safe(buffer) == NULL);
  CHECK_EQ_INT(capture_buffer_drops(buffer), 1);

  int frames = 0;
  capture_buffer_each_published_frame(buffer, count_frame, &frames);
  int expected_frames = 0;
  for (int i = 0; i < SLOTS; i++) expected_frames += 1 + i % FRAMES;
  CHECK_EQ_INT(frames, expected_frames);

  int shown = 0;
  CHECK_EQ_INT(capture_buffer_drain(buffer, keep_all, &shown), 0);
  CHECK_EQ_INT(shown, SLOTS);
  uint64_t last = 0;
  CHECK_EQ_INT(capture_buffer_drain(buffer, take_all, &last), SLOTS);
  frames = 0;
  capture_buffer_each_published_frame(buffer, count_frame, &frames);
  CHECK_EQ_INT(frames, 0);

  // An abandoned slot is free again, a claimed one is not shown.
  capture *claimed = capture_buffer_claim_signal_safe(buffer);
  capture_buffer_abandon_signal_safe(buffer, claimed);
  claimed = capture_buffer_claim_signal_safe(buffer);
  shown = 0;
  CHECK_EQ_INT(capture_buffer_drain(buffer, keep_all, &shown), 0);
  CHECK_EQ_INT(shown, 0);
  capture_buffer_reset(buffer);
  for (int i = 0; i < SLOTS; i++) CHECK(capture_buffer_claim_signal_safe(buffer) != NULL);
  capture_buffer_free(buffer);
}

typedef struct {
  capture_buffer *buffer;
  int writer;
  uint64_t published;
  uint64_t dropped;
} writer_args;

static void *write_captures(void *arg) {
  writer_args *args = arg;
  for (uint32_t n = 0; n < CAPTURES_PER_WRITER; n++) {
    capture *slot = capture_buffer_claim_signal_safe(args->buffer);
    if (slot == NULL) {
      args->dropped++;
      continue;
    }
    fill(slot, args->writer, n);
    slot->sequence = capture_buffer_next_sequence_signal_safe(args->buffer);
    capture_buffer_publish_signal_safe(args->buffer, slot);
    args->published++;
  }
  return NULL;
}

typedef struct {
  uint64_t received[WRITERS];
  uint64_t torn;
  uint32_t *seen; // one bit per (writer, n)
} consumer_state;

static capture_verdict receive(const capture *slot, void *data) {
  consumer_state *state = data;
  if (!is_whole(slot) || slot->tid < 0 || slot->tid >= WRITERS) {
    state->torn++;
    return CAPTURE_TAKEN;
  }
  size_t bit = (size_t)slot->tid * CAPTURES_PER_WRITER + (uint32_t)slot->cpu_ns;
  if (state->seen[bit / 32] & (1u << (bit % 32))) state->torn++; // delivered twice
  state->seen[bit / 32] |= 1u << (bit % 32);
  state->received[slot->tid]++;
  return CAPTURE_TAKEN;
}

static void test_many_writers_one_consumer(void) {
  capture_buffer *buffer = capture_buffer_new(SLOTS, FRAMES);
  consumer_state state = {{0}, 0, calloc((WRITERS * CAPTURES_PER_WRITER + 31) / 32, sizeof(uint32_t))};
  pthread_t threads[WRITERS];
  writer_args args[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    args[w] = (writer_args){.buffer = buffer, .writer = w};
    CHECK_EQ_INT(pthread_create(&threads[w], NULL, write_captures, &args[w]), 0);
  }
  // Drain while they write; then once more after they are done.
  for (int round = 0; round < 200000; round++) capture_buffer_drain(buffer, receive, &state);
  for (int w = 0; w < WRITERS; w++) pthread_join(threads[w], NULL);
  capture_buffer_drain(buffer, receive, &state);

  uint64_t published = 0, dropped = 0, received = 0;
  for (int w = 0; w < WRITERS; w++) {
    published += args[w].published;
    dropped += args[w].dropped;
    received += state.received[w];
    CHECK(state.received[w] == args[w].published);
  }
  CHECK_EQ_INT(state.torn, 0);
  CHECK(published + dropped == (uint64_t)WRITERS * CAPTURES_PER_WRITER);
  CHECK(received == published);
  CHECK(capture_buffer_published(buffer) == published);
  CHECK(capture_buffer_drops(buffer) == dropped);
  free(state.seen);
  capture_buffer_free(buffer);
}

static capture_verdict keep_it(const capture *slot, void *data) {
  (void)slot;
  (void)data;
  return CAPTURE_KEPT;
}

static capture_verdict take_it(const capture *slot, void *data) {
  (void)slot;
  (void)data;
  return CAPTURE_TAKEN;
}

// A slot reads as published from its publish until a drain takes it (the
// allocation hook merges into such slots), and kept slots stay published.
static void test_slot_published_follows_the_slot(void) {
  capture_buffer *buffer = capture_buffer_new(SLOTS, FRAMES);
  capture *slot = capture_buffer_claim_signal_safe(buffer);
  CHECK(!capture_buffer_slot_published(buffer, slot));
  fill(slot, 1, 1);
  capture_buffer_publish_signal_safe(buffer, slot);
  CHECK(capture_buffer_slot_published(buffer, slot));
  capture_buffer_drain(buffer, keep_it, NULL);
  CHECK(capture_buffer_slot_published(buffer, slot));
  capture_buffer_drain(buffer, take_it, NULL);
  CHECK(!capture_buffer_slot_published(buffer, slot));
  capture_buffer_free(buffer);
}

int main(void) {
  test_claim_fill_publish_drain();
  test_slot_published_follows_the_slot();
  test_full_buffer_counts_drops_and_kept_slots_stay();
  test_many_writers_one_consumer();
  CHECK(capture_buffer_new(0, FRAMES) == NULL);
  CHECK(capture_buffer_new(SLOTS, 0) == NULL);
  return test_summary("capture_buffer");
}
