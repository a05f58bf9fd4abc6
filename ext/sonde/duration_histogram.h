// duration_histogram.h: counts durations (nanoseconds) in log-linear
// buckets, 16 to each power of two, and answers quantiles of them: what a
// typical sampling pass costs, beside the average that a few passes the
// machine preempted can move far. Pure C, no Ruby, no allocation: a fixed
// array, unit-tested under AddressSanitizer.
#ifndef SONDE_DURATION_HISTOGRAM_H
#define SONDE_DURATION_HISTOGRAM_H

#include <stdint.h>

// 16 buckets per power of two: a quantile is within 1/16 (6.25%) of the
// truth, up to 2^40 ns (18 minutes); durations below 32 ns count exactly,
// longer ones than 2^40 ns land in the last bucket.
#define DURATION_HISTOGRAM_SUB_BUCKETS 16
#define DURATION_HISTOGRAM_OCTAVES 37
#define DURATION_HISTOGRAM_BUCKETS (DURATION_HISTOGRAM_SUB_BUCKETS * DURATION_HISTOGRAM_OCTAVES)

typedef struct {
  uint64_t counts[DURATION_HISTOGRAM_BUCKETS];
  uint64_t total;
} duration_histogram;

// Counts one duration (a negative one as 0).
void duration_histogram_add(duration_histogram *histogram, int64_t duration_ns);

// The q-quantile (0 < q <= 1) of the durations counted: the upper bound of
// the bucket holding it, so never below the true value and at most 1/16
// above it. 0 when nothing was counted.
int64_t duration_histogram_quantile(const duration_histogram *histogram, double q);

#endif
