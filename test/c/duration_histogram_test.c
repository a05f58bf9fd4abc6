// modules: duration_histogram.c
// duration_histogram.c: quantiles of known durations, within a bucket's
// 1/16 and never below the truth; the edges (nothing counted, tiny and
// enormous durations, negative ones).
#include <stdint.h>

#include "duration_histogram.h"
#include "test_harness.h"

static duration_histogram histogram;

static void reset(void) { histogram = (duration_histogram){0}; }

// Within [truth, truth * 17/16]: the bucket's upper bound.
static int close_above(int64_t quantile, int64_t truth) { return quantile >= truth && quantile * 16 <= truth * 17; }

static void test_nothing_counted_reads_zero(void) {
  reset();
  CHECK_EQ_INT(duration_histogram_quantile(&histogram, 0.5), 0);
}

static void test_quantiles_of_one_to_ten_thousand_microseconds(void) {
  reset();
  for (int64_t us = 1; us <= 10000; us++) duration_histogram_add(&histogram, us * 1000);
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.5), 5000 * 1000));
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.9), 9000 * 1000));
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.99), 9900 * 1000));
  CHECK(close_above(duration_histogram_quantile(&histogram, 1.0), 10000 * 1000));
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.0001), 1000));
}

static void test_a_few_preempted_passes_leave_the_median_alone(void) {
  reset();
  for (int i = 0; i < 95; i++) duration_histogram_add(&histogram, 20000);
  for (int i = 0; i < 5; i++) duration_histogram_add(&histogram, 5000000);
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.5), 20000));
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.95), 20000));
  CHECK(close_above(duration_histogram_quantile(&histogram, 0.96), 5000000));
}

static void test_small_durations_count_exactly(void) {
  reset();
  for (int64_t ns = 0; ns < 32; ns++) duration_histogram_add(&histogram, ns);
  CHECK_EQ_INT(duration_histogram_quantile(&histogram, 0.5), 15);
  CHECK_EQ_INT(duration_histogram_quantile(&histogram, 1.0), 31);
  reset();
  duration_histogram_add(&histogram, -5); // a clock that went backwards counts as 0
  CHECK_EQ_INT(duration_histogram_quantile(&histogram, 1.0), 0);
}

// Every duration maps to a bucket whose upper bound is at or above it and
// within 1/16, across the octaves (both edges of each).
static void test_every_octave_bounds_its_values(void) {
  for (int octave = 5; octave < 40; octave++) {
    int64_t low = (int64_t)1 << octave, high = ((int64_t)1 << (octave + 1)) - 1;
    int64_t values[] = {low, low + 1, low + (low >> 1), high};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
      reset();
      duration_histogram_add(&histogram, values[i]);
      if (!CHECK(close_above(duration_histogram_quantile(&histogram, 1.0), values[i]))) {
        fprintf(stderr, "    octave %d value %lld read %lld\n", octave, (long long)values[i],
                (long long)duration_histogram_quantile(&histogram, 1.0));
      }
    }
  }
}

static void test_enormous_durations_land_in_the_last_bucket(void) {
  reset();
  duration_histogram_add(&histogram, INT64_MAX);
  duration_histogram_add(&histogram, (int64_t)1 << 50);
  CHECK(duration_histogram_quantile(&histogram, 1.0) >= ((int64_t)1 << 40) - 1);
  CHECK_EQ_INT(histogram.total, 2);
}

int main(void) {
  RUN(test_nothing_counted_reads_zero);
  RUN(test_quantiles_of_one_to_ten_thousand_microseconds);
  RUN(test_a_few_preempted_passes_leave_the_median_alone);
  RUN(test_small_durations_count_exactly);
  RUN(test_every_octave_bounds_its_values);
  RUN(test_enormous_durations_land_in_the_last_bucket);
  return test_summary("duration_histogram");
}
