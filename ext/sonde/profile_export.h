// profile_export.h: turns what the recorder aggregated into a pprof profile.
#ifndef SONDE_PROFILE_EXPORT_H
#define SONDE_PROFILE_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

#include "recorder.h"

// What a profile covers: its period, and which of the optional sample
// types the run filled (a type the run could not fill is left out rather
// than written as zeros that would read as "none").
typedef struct {
  int64_t start_epoch_ns;
  int64_t duration_ns;
  int64_t period_ns; // the sampling interval asked for
  int64_t monotonic_to_epoch_ns; // added to a CLOCK_MONOTONIC moment, the epoch's (timeline)
  bool allocations;  // alloc-samples
  bool heap;         // heap-live-samples, heap-live-size
} profile_export_times;

// Raises TypeError or ArgumentError unless comments is nil or an Array of
// Strings without NUL bytes. Called before sampling is halted, so that a
// bad argument cannot cost the profile.
void profile_export_check_comments(VALUE comments);

// Returns the gzip'd pprof bytes as a binary String, with comments (nil or
// an Array of Strings, already checked) in its comment field. Needs the GVL:
// frames are named through the VM. Raises NoMemoryError when out of memory.
// label_sets: nil, or the Ruby side's table of label sets (Sonde::Labels):
// entry id is the frozen Array [key, value, ...] of set id, written as
// string labels (at most SAMPLE_MAX_LABELS: sample_constants.h) on each
// sample recorded under it.
VALUE profile_export_pprof(const recorder *rec, const profile_export_times *times, VALUE comments, VALUE label_sets);

// The frozen Hash {sample_types: {cpu_time: "cpu-time", ...}, units: {...},
// labels: {thread_id: "thread id", ...}} of profile_names.h.
VALUE profile_export_names(void);

#endif
