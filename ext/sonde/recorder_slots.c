// recorder_slots.c: two recorders and their periods (see the header). With
// the GVL only; the encoding of a flushed recorder runs without it, on a
// recorder no pass writes into any more.
#include "recorder_slots.h"

#include <stdlib.h>

struct recorder_slots {
  recorder *recorders[RECORDER_SLOTS];
  int active;
  bool flushing;
  int64_t period_start_monotonic_ns;
  int64_t period_start_epoch_ns;
  uint64_t flushes;
};

recorder_slots *recorder_slots_new(int64_t start_monotonic_ns, int64_t start_epoch_ns) {
  recorder_slots *slots = calloc(1, sizeof(*slots));
  if (slots == NULL) return NULL;
  for (int i = 0; i < RECORDER_SLOTS; i++) {
    slots->recorders[i] = recorder_new();
    if (slots->recorders[i] == NULL) {
      recorder_slots_free(slots);
      return NULL;
    }
  }
  slots->period_start_monotonic_ns = start_monotonic_ns;
  slots->period_start_epoch_ns = start_epoch_ns;
  return slots;
}

void recorder_slots_move_first_start(recorder_slots *slots, int64_t start_monotonic_ns) {
  if (slots->flushes > 0) return;
  slots->period_start_epoch_ns += start_monotonic_ns - slots->period_start_monotonic_ns;
  slots->period_start_monotonic_ns = start_monotonic_ns;
}

void recorder_slots_free(recorder_slots *slots) {
  if (slots == NULL) return;
  for (int i = 0; i < RECORDER_SLOTS; i++) recorder_free(slots->recorders[i]);
  free(slots);
}

int recorder_slots_enable_timeline(recorder_slots *slots, size_t capacity) {
  for (int i = 0; i < RECORDER_SLOTS; i++) {
    if (recorder_enable_timeline(slots->recorders[i], capacity) != 0) return -1;
  }
  return 0;
}

bool recorder_slots_bound_timeline_for_testing(recorder_slots *slots, size_t capacity) {
  for (int i = 0; i < RECORDER_SLOTS; i++) {
    timeline_log *log = recorder_timeline_for_testing(slots->recorders[i]);
    if (log == NULL || timeline_log_set_capacity_for_testing(log, capacity) != 0) return false;
  }
  return true;
}

void recorder_slots_timeline_counts(const recorder_slots *slots, uint64_t *logged, uint64_t *dropped) {
  *logged = 0;
  *dropped = 0;
  for (int i = 0; i < RECORDER_SLOTS; i++) {
    const timeline_log *log = recorder_timeline(slots->recorders[i]);
    if (log == NULL) continue;
    *logged += timeline_log_appended(log);
    *dropped += timeline_log_dropped(log);
  }
}

recorder *recorder_slots_active(const recorder_slots *slots) { return slots->recorders[slots->active]; }

recorder_period recorder_slots_final_period(const recorder_slots *slots, int64_t end_monotonic_ns) {
  return (recorder_period){
      .rec = recorder_slots_active(slots),
      .start_epoch_ns = slots->period_start_epoch_ns,
      .duration_ns = end_monotonic_ns - slots->period_start_monotonic_ns,
  };
}

bool recorder_slots_begin_flush(recorder_slots *slots, int64_t end_monotonic_ns, recorder_period *period) {
  if (slots->flushing) return false;
  *period = recorder_slots_final_period(slots, end_monotonic_ns);
  slots->active = (slots->active + 1) % RECORDER_SLOTS;
  slots->flushing = true;
  slots->flushes++;
  // The next period starts where this one ended: no gap, no overlap. Its
  // epoch start is this one's plus its monotonic length, as profiles say
  // (time + duration).
  slots->period_start_monotonic_ns = end_monotonic_ns;
  slots->period_start_epoch_ns = period->start_epoch_ns + period->duration_ns;
  return true;
}

void recorder_slots_finish_flush(recorder_slots *slots, recorder *flushed) {
  recorder_clear(flushed);
  slots->flushing = false;
}

uint64_t recorder_slots_flushes(const recorder_slots *slots) { return slots->flushes; }

void recorder_slots_each_frame(const recorder_slots *slots, void (*visit)(uint64_t frame_id)) {
  // Both: the one being flushed still needs its frames named.
  for (int slot = 0; slot < RECORDER_SLOTS; slot++) {
    const recorder *rec = slots->recorders[slot];
    size_t count = recorder_location_count(rec);
    for (size_t i = 0; i < count; i++) visit(recorder_location(rec, i).frame_id);
  }
}

void recorder_slots_each_object_class(const recorder_slots *slots, void (*visit)(uint64_t object_class)) {
  for (int slot = 0; slot < RECORDER_SLOTS; slot++) {
    recorder_each_object_class(slots->recorders[slot], visit);
  }
}
