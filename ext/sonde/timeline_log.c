// timeline_log.c: a ring of timestamped samples that grows by doubling up
// to its capacity (see the header). Pure C, no Ruby.
//
// Runs on the sampling path with the GVL held; never in a signal handler
// and never during GC. Appending is a store and two additions, except the
// few times the ring doubles: a period of a busy thread at 100 Hz grows it
// about ten times, then it is reused period after period (clear keeps the
// memory).
#include "timeline_log.h"

#include <stdbool.h>
#include <stdlib.h>

// Small enough that a short capture of a quiet program costs a few KB.
#define INITIAL_ENTRIES 256

struct timeline_log {
  timeline_entry *entries;
  size_t allocated; // entries allocated, <= capacity
  size_t capacity;  // the bound
  size_t start;     // index of the oldest entry
  size_t count;
  uint64_t appended, dropped;
  bool fail_growth;
};

timeline_log *timeline_log_new(size_t capacity) {
  timeline_log *log = calloc(1, sizeof(*log));
  if (log == NULL) return NULL;
  log->capacity = capacity > 0 ? capacity : 1;
  return log;
}

void timeline_log_free(timeline_log *log) {
  if (log == NULL) return;
  free(log->entries);
  free(log);
}

// Doubles the allocation (up to the capacity), keeping the entries in
// order from index 0. False when it cannot: the ring stays as it was.
static bool grow(timeline_log *log) {
  if (log->allocated >= log->capacity || log->fail_growth) return false;
  size_t wanted = log->allocated == 0 ? INITIAL_ENTRIES : log->allocated * 2;
  if (wanted > log->capacity || wanted < log->allocated) wanted = log->capacity;
  timeline_entry *grown = malloc(wanted * sizeof(timeline_entry));
  if (grown == NULL) return false;
  for (size_t i = 0; i < log->count; i++) grown[i] = log->entries[(log->start + i) % log->allocated];
  free(log->entries);
  log->entries = grown;
  log->allocated = wanted;
  log->start = 0;
  return true;
}

void timeline_log_append(timeline_log *log, const timeline_entry *entry) {
  log->appended++;
  if (log->count == log->allocated && !grow(log)) {
    if (log->allocated == 0) {
      log->dropped++; // nothing to overwrite: this one is the one dropped
      return;
    }
    log->entries[log->start] = *entry; // the oldest gives way
    log->start = (log->start + 1) % log->allocated;
    log->dropped++;
    return;
  }
  log->entries[(log->start + log->count) % log->allocated] = *entry;
  log->count++;
}

void timeline_log_clear(timeline_log *log) {
  log->start = 0;
  log->count = 0;
}

size_t timeline_log_count(const timeline_log *log) { return log->count; }

timeline_entry timeline_log_at(const timeline_log *log, size_t index) {
  timeline_entry none = {0};
  if (index >= log->count) return none;
  return log->entries[(log->start + index) % log->allocated];
}

size_t timeline_log_capacity(const timeline_log *log) { return log->capacity; }

uint64_t timeline_log_appended(const timeline_log *log) { return log->appended; }

uint64_t timeline_log_dropped(const timeline_log *log) { return log->dropped; }

int timeline_log_set_capacity_for_testing(timeline_log *log, size_t capacity) {
  if (capacity == 0) capacity = 1;
  size_t kept = log->count < capacity ? log->count : capacity;
  size_t allocated = log->allocated < capacity ? log->allocated : capacity;
  timeline_entry *entries = NULL;
  if (allocated > 0) {
    entries = malloc(allocated * sizeof(timeline_entry));
    if (entries == NULL) return -1;
  }
  size_t skipped = log->count - kept;
  for (size_t i = 0; i < kept; i++) entries[i] = log->entries[(log->start + skipped + i) % log->allocated];
  free(log->entries);
  log->entries = entries;
  log->allocated = allocated;
  log->capacity = capacity;
  log->start = 0;
  log->count = kept;
  log->dropped += skipped;
  return 0;
}

void timeline_log_fail_growth_for_testing(timeline_log *log, int fail) { log->fail_growth = fail != 0; }
