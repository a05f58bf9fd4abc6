// modules: timeline_log.c
// timeline_log.c against the simplest reference: the log holds the last
// `capacity` entries appended, oldest first, and counts the rest as
// dropped; growth that fails makes it behave as if full, never lose order.
#include <stdlib.h>

#include "test_harness.h"
#include "timeline_log.h"

static timeline_entry entry_number(int64_t n) {
  return (timeline_entry){.at_ns = n * 1000, .cpu_ns = n, .wall_ns = 2 * n, .gvl_wait_ns = 3 * n,
                          .sample_index = (uint32_t)(n % 97), .cpu_samples = 1, .wall_samples = (uint16_t)(n % 2)};
}

static int same_entry(timeline_entry a, timeline_entry b) {
  return a.at_ns == b.at_ns && a.cpu_ns == b.cpu_ns && a.wall_ns == b.wall_ns && a.gvl_wait_ns == b.gvl_wait_ns &&
         a.sample_index == b.sample_index && a.cpu_samples == b.cpu_samples && a.wall_samples == b.wall_samples;
}

// After appending entries 0 .. appended-1: the last min(appended, capacity)
// in order, and the rest counted as dropped.
static void check_holds_the_last(const timeline_log *log, int64_t appended, size_t capacity) {
  size_t expected = (size_t)appended < capacity ? (size_t)appended : capacity;
  CHECK_EQ_INT(timeline_log_count(log), expected);
  int64_t first = appended - (int64_t)expected;
  int mismatches = 0;
  for (size_t i = 0; i < timeline_log_count(log); i++) {
    if (!same_entry(timeline_log_at(log, i), entry_number(first + (int64_t)i))) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
}

static void test_keeps_every_entry_in_order_below_the_bound(void) {
  timeline_log *log = timeline_log_new(10000);
  if (!CHECK(log != NULL)) return;
  for (int64_t n = 0; n < 3000; n++) timeline_log_append(log, &(timeline_entry){0});
  timeline_log_clear(log);
  for (int64_t n = 0; n < 3000; n++) {
    timeline_entry e = entry_number(n);
    timeline_log_append(log, &e);
  }
  check_holds_the_last(log, 3000, 10000);
  CHECK_EQ_INT(timeline_log_appended(log), 6000);
  CHECK_EQ_INT(timeline_log_dropped(log), 0);
  timeline_log_free(log);
}

static void test_at_the_bound_the_oldest_make_room_and_are_counted(void) {
  // Capacities that are and are not a power of two times the start size.
  size_t capacities[] = {1, 7, 256, 300, 1024, 1500};
  for (size_t c = 0; c < sizeof(capacities) / sizeof(capacities[0]); c++) {
    timeline_log *log = timeline_log_new(capacities[c]);
    if (!CHECK(log != NULL)) return;
    int64_t total = (int64_t)capacities[c] * 3 + 5;
    for (int64_t n = 0; n < total; n++) {
      timeline_entry e = entry_number(n);
      timeline_log_append(log, &e);
      if (n == (int64_t)capacities[c] / 2 || n == (int64_t)capacities[c] + 1) check_holds_the_last(log, n + 1, capacities[c]);
    }
    check_holds_the_last(log, total, capacities[c]);
    CHECK_EQ_INT(timeline_log_dropped(log), total - (int64_t)capacities[c]);
    CHECK_EQ_INT(timeline_log_capacity(log), capacities[c]);
    timeline_log_free(log);
  }
}

static void test_clear_empties_but_keeps_the_lifetime_counts(void) {
  timeline_log *log = timeline_log_new(4);
  if (!CHECK(log != NULL)) return;
  for (int64_t n = 0; n < 6; n++) {
    timeline_entry e = entry_number(n);
    timeline_log_append(log, &e);
  }
  timeline_log_clear(log);
  CHECK_EQ_INT(timeline_log_count(log), 0);
  CHECK_EQ_INT(timeline_log_appended(log), 6);
  CHECK_EQ_INT(timeline_log_dropped(log), 2);
  for (int64_t n = 0; n < 3; n++) {
    timeline_entry e = entry_number(n);
    timeline_log_append(log, &e);
  }
  check_holds_the_last(log, 3, 4);
  timeline_log_free(log);
}

static void test_a_log_that_cannot_grow_behaves_as_if_full(void) {
  timeline_log *never = timeline_log_new(100);
  if (!CHECK(never != NULL)) return;
  timeline_log_fail_growth_for_testing(never, 1);
  timeline_entry e = entry_number(1);
  timeline_log_append(never, &e);
  CHECK_EQ_INT(timeline_log_count(never), 0);
  CHECK_EQ_INT(timeline_log_dropped(never), 1);
  timeline_log_free(never);

  // Grown once (256 entries), then stuck: the newest 256 are kept.
  timeline_log *stuck = timeline_log_new(100000);
  if (!CHECK(stuck != NULL)) return;
  timeline_entry first = entry_number(0);
  timeline_log_append(stuck, &first);
  timeline_log_fail_growth_for_testing(stuck, 1);
  for (int64_t n = 1; n < 1000; n++) {
    timeline_entry next = entry_number(n);
    timeline_log_append(stuck, &next);
  }
  check_holds_the_last(stuck, 1000, 256);
  CHECK_EQ_INT(timeline_log_dropped(stuck), 1000 - 256);
  // Growth back: it grows again, keeping the order.
  timeline_log_fail_growth_for_testing(stuck, 0);
  for (int64_t n = 1000; n < 1300; n++) {
    timeline_entry next = entry_number(n);
    timeline_log_append(stuck, &next);
  }
  CHECK_EQ_INT(timeline_log_count(stuck), 556);
  CHECK(same_entry(timeline_log_at(stuck, 0), entry_number(1000 - 256)));
  CHECK(same_entry(timeline_log_at(stuck, 555), entry_number(1299)));
  timeline_log_free(stuck);
}

static void test_out_of_range_reads_are_zero_and_capacity_is_at_least_one(void) {
  timeline_log *log = timeline_log_new(0);
  if (!CHECK(log != NULL)) return;
  CHECK_EQ_INT(timeline_log_capacity(log), 1);
  CHECK(same_entry(timeline_log_at(log, 0), (timeline_entry){0}));
  timeline_entry a = entry_number(5), b = entry_number(6);
  timeline_log_append(log, &a);
  timeline_log_append(log, &b);
  CHECK_EQ_INT(timeline_log_count(log), 1);
  CHECK(same_entry(timeline_log_at(log, 0), b));
  CHECK(same_entry(timeline_log_at(log, 1), (timeline_entry){0}));
  timeline_log_free(log);
}

static void test_a_lower_bound_keeps_the_newest(void) {
  timeline_log *log = timeline_log_new(10000);
  if (!CHECK(log != NULL)) return;
  for (int64_t n = 0; n < 1000; n++) {
    timeline_entry e = entry_number(n);
    timeline_log_append(log, &e);
  }
  CHECK_EQ_INT(timeline_log_set_capacity_for_testing(log, 100), 0);
  check_holds_the_last(log, 1000, 100);
  CHECK_EQ_INT(timeline_log_dropped(log), 900);
  for (int64_t n = 1000; n < 1050; n++) {
    timeline_entry e = entry_number(n);
    timeline_log_append(log, &e);
  }
  check_holds_the_last(log, 1050, 100);
  CHECK_EQ_INT(timeline_log_dropped(log), 950);
  // On an empty log (never grown), then growing to the new bound.
  timeline_log *fresh = timeline_log_new(10000);
  if (!CHECK(fresh != NULL)) return;
  CHECK_EQ_INT(timeline_log_set_capacity_for_testing(fresh, 3), 0);
  for (int64_t n = 0; n < 5; n++) {
    timeline_entry e = entry_number(n);
    timeline_log_append(fresh, &e);
  }
  check_holds_the_last(fresh, 5, 3);
  timeline_log_free(fresh);
  timeline_log_free(log);
}

int main(void) {
  RUN(test_keeps_every_entry_in_order_below_the_bound);
  RUN(test_at_the_bound_the_oldest_make_room_and_are_counted);
  RUN(test_clear_empties_but_keeps_the_lifetime_counts);
  RUN(test_a_log_that_cannot_grow_behaves_as_if_full);
  RUN(test_out_of_range_reads_are_zero_and_capacity_is_at_least_one);
  RUN(test_a_lower_bound_keeps_the_newest);
  return test_summary("timeline_log");
}
