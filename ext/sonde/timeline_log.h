// timeline_log.h: the samples of a period in the order they were taken,
// each with its moment, beside the recorder's aggregate (which keeps only
// sums). Bounded: past its capacity the oldest entry makes room for the
// newest and is counted as dropped, so a long period costs at most
// capacity entries, never more. Pure C: no Ruby, unit-tested under
// AddressSanitizer.
//
// Appended to on the sampling path (with the GVL, never from a signal
// handler or during GC); it allocates only while it grows towards its
// capacity, doubling, and never fails: when it cannot grow, it behaves as
// if full.
#ifndef SONDE_TIMELINE_LOG_H
#define SONDE_TIMELINE_LOG_H

#include <stddef.h>
#include <stdint.h>

// One timestamped sample: what it added to one aggregated sample of the
// recorder (sample_index), and when it ended (at_ns, CLOCK_MONOTONIC).
typedef struct {
  int64_t at_ns;
  int64_t cpu_ns;
  int64_t wall_ns;
  int64_t gvl_wait_ns;
  uint32_t sample_index;
  uint16_t cpu_samples;
  uint16_t wall_samples;
} timeline_entry;

typedef struct timeline_log timeline_log;

// A log that keeps at most capacity entries (at least 1). NULL when out of
// memory. It starts small and grows as entries come.
timeline_log *timeline_log_new(size_t capacity);
void timeline_log_free(timeline_log *log);

// Keeps entry; when full, the oldest entry is dropped for it. Cannot fail.
void timeline_log_append(timeline_log *log, const timeline_entry *entry);

// Forgets the entries (the next period's log starts empty) and keeps the
// memory it grew to. The lifetime counters are kept.
void timeline_log_clear(timeline_log *log);

// The entries kept, oldest first: index 0 .. count - 1. An index out of
// range reads as a zeroed entry.
size_t timeline_log_count(const timeline_log *log);
timeline_entry timeline_log_at(const timeline_log *log, size_t index);
size_t timeline_log_capacity(const timeline_log *log);

// Lifetime counts: every entry appended, and those dropped to make room.
uint64_t timeline_log_appended(const timeline_log *log);
uint64_t timeline_log_dropped(const timeline_log *log);

// Tests only: a new bound (at least 1); entries over it are dropped,
// oldest first, and counted. Returns 0, or -1 when out of memory (the log
// as it was).
int timeline_log_set_capacity_for_testing(timeline_log *log, size_t capacity);

// Tests only: while fail is nonzero, growing fails, so a test can reach
// the path where the log cannot grow.
void timeline_log_fail_growth_for_testing(timeline_log *log, int fail);

#endif
