// modules: pacing.c
// pacing.c against a simulated clock: whatever a pass costs, the share of
// time spent sampling stays under the target, and cheap passes keep the rate.
#include <stdio.h>

#include "pacing.h"
#include "test_harness.h"

#define MS 1000000LL
#define US 1000LL
#define SECOND 1000000000LL

typedef struct {
  int64_t samples;
  int64_t sampling_ns;
} simulation;

// The burst allowance: what one second earns at the target share.
#define ALLOWANCE(target_percent, duration) ((target_percent) / 100.0 * SECOND / (double)(duration))

// Runs the trigger/sampler loop for `duration` of simulated time, each pass
// costing cost_of(i); returns what happened.
static simulation simulate(pacing *pace, int64_t duration, int64_t (*cost_of)(int64_t)) {
  simulation result = {0, 0};
  int64_t now = 0;
  while (now < duration) {
    now += pacing_next_interval_ns(pace, now);
    int64_t cost = cost_of(result.samples);
    pacing_record_cost(pace, cost);
    result.sampling_ns += cost;
    now += cost; // the pass itself takes time too
    result.samples++;
  }
  return result;
}

// As the real trigger sees it: a pass starts at the tick (or when the
// previous pass ends) and reports its cost only when it ends, while the
// trigger plans its next tick right after asking for it.
#define MAX_PASSES 100000
static simulation simulate_passes_in_time(pacing *pace, int64_t duration, int64_t (*cost_of)(int64_t)) {
  static int64_t ends[MAX_PASSES], costs[MAX_PASSES];
  simulation result = {0, 0};
  int64_t now = 0, busy_until = 0;
  int64_t reported = 0;
  while (now < duration && result.samples < MAX_PASSES) {
    while (reported < result.samples && ends[reported] <= now) pacing_record_cost(pace, costs[reported++]);
    now += pacing_next_interval_ns(pace, now);
    while (reported < result.samples && ends[reported] <= now) pacing_record_cost(pace, costs[reported++]);
    pacing_on_tick(pace);
    int64_t start = now > busy_until ? now : busy_until;
    // Ruby queues a postponed job once: a tick while one waits is merged.
    if (result.samples > 0 && ends[result.samples - 1] - costs[result.samples - 1] > now) continue;
    costs[result.samples] = cost_of(result.samples);
    ends[result.samples] = busy_until = start + costs[result.samples];
    result.sampling_ns += costs[result.samples];
    result.samples++;
  }
  return result;
}

// Some ticks never produce a pass at all (the signal came too late).
static simulation simulate_lost_ticks(pacing *pace, int64_t duration, int64_t cost) {
  simulation result = {0, 0};
  int64_t now = 0;
  for (int64_t tick = 0; now < duration; tick++) {
    now += pacing_next_interval_ns(pace, now);
    pacing_on_tick(pace);
    if (tick % 3 == 0) continue; // lost
    pacing_record_cost(pace, cost);
    result.sampling_ns += cost;
    result.samples++;
  }
  return result;
}

static int64_t seven_ms(int64_t i) { (void)i; return 7 * MS; }
static int64_t one_ms(int64_t i) { (void)i; return MS; }
static int64_t three_us(int64_t i) { (void)i; return 3 * US; }
static int64_t spiky(int64_t i) { return i % 10 == 0 ? 20 * MS : 100 * US; }
static int64_t growing(int64_t i) { return i < 50 ? 10 * US : 2 * MS; }

static void test_one_ms_samples_at_one_percent_give_about_ten_per_second(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0); // 100 Hz asked
  simulation run = simulate(&pace, 10 * SECOND, one_ms);
  CHECK(run.samples <= 10 * 10 + 2);
  CHECK(run.samples >= 10 * 10 - 2);
  CHECK((double)run.sampling_ns / (10 * SECOND) <= 0.01 + ALLOWANCE(1.0, 10 * SECOND));
  CHECK(pacing_delayed_ticks(&pace) >= (uint64_t)run.samples - 1);
}

static void test_cheap_samples_keep_the_asked_rate(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  simulation run = simulate(&pace, 10 * SECOND, three_us);
  CHECK(run.samples >= 995); // 100 Hz for 10 s, less the 3 µs passes
  CHECK_EQ_INT(0, (long long)pacing_delayed_ticks(&pace));
}

static void test_spikes_stay_under_the_target(void) {
  pacing pace;
  pacing_init(&pace, 1 * MS, 2.0, 0); // 1000 Hz asked, 2% budget
  simulation run = simulate(&pace, 30 * SECOND, spiky);
  CHECK((double)run.sampling_ns / (30 * SECOND) <= 0.02 + ALLOWANCE(2.0, 30 * SECOND));
  CHECK(run.samples > 250); // about 2.09 ms a pass on average: ~290 fit in 2% of 30 s
}

static void test_a_lasting_rise_is_followed_at_once(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  simulation run = simulate(&pace, 20 * SECOND, growing);
  CHECK((double)run.sampling_ns / (20 * SECOND) <= 0.01 + ALLOWANCE(1.0, 20 * SECOND));
}

static void test_larger_targets_allow_more(void) {
  pacing pace;
  pacing_init(&pace, 1 * MS, 20.0, 0);
  simulation run = simulate(&pace, 1 * SECOND, one_ms);
  CHECK((double)run.sampling_ns / SECOND <= 0.2 + ALLOWANCE(20.0, SECOND));
  CHECK(run.samples >= 150); // 1 ms passes, 5 ms apart
}

static void test_passes_that_report_late_are_paid_for_before_the_next_tick(void) {
  pacing pace;
  pacing_init(&pace, 1 * MS, 1.0, 0);
  simulation run = simulate_passes_in_time(&pace, 10 * SECOND, seven_ms);
  // Before the first pass reports, its cost is unknown: the passes asked for
  // meanwhile (three here) are the one overshoot allowed.
  double startup = 3.0 * 7 * MS / (10 * SECOND);
  CHECK((double)run.sampling_ns / (10 * SECOND) <= 0.01 + ALLOWANCE(1.0, 10 * SECOND) + startup);
  CHECK(run.samples >= 10); // 7 ms passes, 1% of 10 s: about 14
}

static void test_lost_ticks_do_not_stall_sampling(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  simulation run = simulate_lost_ticks(&pace, 10 * SECOND, 3 * US);
  CHECK(run.samples >= 600); // two ticks in three give a pass: ~666 at 100 Hz
}

// As sampling_pass.c charges a pass: CPU time when the pass was expected to be
// costly, else wall time under a cap.
static void charge(pacing *pace, int64_t wall, int64_t cpu) {
  int64_t measured_cpu = pacing_wants_cpu_time(pace) ? cpu : -1;
  pacing_record_cost(pace, pacing_cost_to_charge(pace, wall, measured_cpu));
}

static void test_a_cheap_pass_descheduled_by_the_os_does_not_stall_sampling(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  int64_t now = 0, samples = 0;
  while (now < 10 * SECOND) {
    now += pacing_next_interval_ns(&pace, now);
    pacing_on_tick(&pace);
    // 5 µs passes; one in a hundred is descheduled for 10 ms of wall time.
    int64_t wall = samples % 100 == 50 ? 10 * MS : 5 * US;
    charge(&pace, wall, 5 * US);
    now += wall;
    samples++;
  }
  CHECK(samples >= 950); // 100 Hz for 10 s, less the 10 ms stalls themselves
}

static void test_costly_passes_are_charged_their_cpu_time(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  pacing_record_cost(&pace, 2 * MS);
  CHECK(pacing_wants_cpu_time(&pace));
  CHECK(pacing_cost_to_charge(&pace, 12 * MS, 2 * MS) == 2 * MS); // 10 ms descheduled
  CHECK(pacing_cost_to_charge(&pace, 2 * MS, 3 * MS) == 2 * MS);  // clocks of different grain
}

static void test_a_real_rise_is_under_charged_once_then_charged_in_full(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  pacing_record_cost(&pace, 5 * US);
  CHECK(!pacing_wants_cpu_time(&pace));
  int64_t first = pacing_cost_to_charge(&pace, 20 * MS, -1);
  CHECK(first == 100 * US); // 20 x 5 µs
  pacing_record_cost(&pace, first);
  CHECK(pacing_wants_cpu_time(&pace));
  CHECK(pacing_cost_to_charge(&pace, 20 * MS, 20 * MS) == 20 * MS);
}

static void test_the_first_pass_is_timed_by_cpu(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  CHECK(pacing_wants_cpu_time(&pace));
  pacing_record_cost(&pace, 5 * US);
  CHECK(!pacing_wants_cpu_time(&pace));
}

static void test_wall_charges_have_a_floor_for_their_cap(void) {
  pacing pace;
  pacing_init(&pace, 10 * MS, 1.0, 0);
  CHECK(pacing_cost_to_charge(&pace, 40 * US, -1) == 40 * US); // first pass: nothing known, the floor holds
  CHECK(pacing_cost_to_charge(&pace, 10 * MS, -1) == 50 * US);
  CHECK(pacing_cost_to_charge(&pace, -5, -1) == 0);
}

int main(void) {
  RUN(test_a_cheap_pass_descheduled_by_the_os_does_not_stall_sampling);
  RUN(test_costly_passes_are_charged_their_cpu_time);
  RUN(test_a_real_rise_is_under_charged_once_then_charged_in_full);
  RUN(test_wall_charges_have_a_floor_for_their_cap);
  RUN(test_the_first_pass_is_timed_by_cpu);
  RUN(test_passes_that_report_late_are_paid_for_before_the_next_tick);
  RUN(test_lost_ticks_do_not_stall_sampling);
  RUN(test_one_ms_samples_at_one_percent_give_about_ten_per_second);
  RUN(test_cheap_samples_keep_the_asked_rate);
  RUN(test_spikes_stay_under_the_target);
  RUN(test_a_lasting_rise_is_followed_at_once);
  RUN(test_larger_targets_allow_more);
  return test_summary("pacing");
}
