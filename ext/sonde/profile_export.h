// profile_export.h: turns what the recorder aggregated into a pprof profile.
#ifndef SONDE_PROFILE_EXPORT_H
#define SONDE_PROFILE_EXPORT_H

#include <stdint.h>

#include <ruby.h>

#include "recorder.h"

typedef struct {
  int64_t start_epoch_ns;
  int64_t duration_ns;
  int64_t period_ns; // the sampling interval asked for
} profile_export_times;

// Returns the gzip'd pprof bytes as a binary String. Needs the GVL: frames
// are named through the VM. Raises NoMemoryError when out of memory.
VALUE profile_export_pprof(const recorder *rec, const profile_export_times *times);

#endif
