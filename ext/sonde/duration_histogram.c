// duration_histogram.c: log-linear buckets of durations (see the header).
// Pure C; the sampling pass adds with the GVL, stats read with the GVL.
#include "duration_histogram.h"

#include <stddef.h>

// Durations under 2 * SUB_BUCKETS ns count in buckets 1 ns wide; from
// there each power of two [2^k, 2^(k+1)) is SUB_BUCKETS buckets of equal
// width. Bucket b covers the values index_of maps to b.
#define LINEAR_LIMIT (2 * DURATION_HISTOGRAM_SUB_BUCKETS)
#define SUB_BUCKET_BITS 4 // log2(DURATION_HISTOGRAM_SUB_BUCKETS)

_Static_assert(DURATION_HISTOGRAM_SUB_BUCKETS == 1 << SUB_BUCKET_BITS, "sub-buckets are a power of two");

static unsigned highest_bit(uint64_t value) { return 63u - (unsigned)__builtin_clzll(value); }

static size_t index_of(uint64_t ns) {
  if (ns < LINEAR_LIMIT) return (size_t)ns;
  unsigned octave = highest_bit(ns); // >= SUB_BUCKET_BITS + 1: after the linear buckets
  uint64_t sub = (ns >> (octave - SUB_BUCKET_BITS)) & (DURATION_HISTOGRAM_SUB_BUCKETS - 1);
  size_t index = (size_t)(octave - SUB_BUCKET_BITS + 1) * DURATION_HISTOGRAM_SUB_BUCKETS + (size_t)sub;
  return index < DURATION_HISTOGRAM_BUCKETS ? index : DURATION_HISTOGRAM_BUCKETS - 1;
}

// The largest duration index_of maps to bucket index.
static int64_t upper_bound_of(size_t index) {
  if (index < LINEAR_LIMIT) return (int64_t)index;
  unsigned octave = (unsigned)(index / DURATION_HISTOGRAM_SUB_BUCKETS) + SUB_BUCKET_BITS - 1;
  uint64_t sub = index % DURATION_HISTOGRAM_SUB_BUCKETS;
  uint64_t width = (uint64_t)1 << (octave - SUB_BUCKET_BITS);
  return (int64_t)(((uint64_t)1 << octave) + (sub + 1) * width - 1);
}

void duration_histogram_add(duration_histogram *histogram, int64_t duration_ns) {
  histogram->counts[index_of(duration_ns > 0 ? (uint64_t)duration_ns : 0)]++;
  histogram->total++;
}

int64_t duration_histogram_quantile(const duration_histogram *histogram, double q) {
  if (histogram->total == 0) return 0;
  if (q > 1) q = 1;
  // The rank of the quantile among the durations, 1-based (nearest rank).
  uint64_t rank = (uint64_t)(q * (double)histogram->total);
  if ((double)rank < q * (double)histogram->total) rank++;
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < DURATION_HISTOGRAM_BUCKETS; i++) {
    seen += histogram->counts[i];
    if (seen >= rank) return upper_bound_of(i);
  }
  return upper_bound_of(DURATION_HISTOGRAM_BUCKETS - 1);
}
