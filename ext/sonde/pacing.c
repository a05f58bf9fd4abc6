// pacing.c: the overhead budget (see pacing.h). Pure C and lock-free: the
// sampler adds its costs to one atomic counter; the trigger thread owns the
// credit and reads that counter when it plans the next tick.
#include "pacing.h"

#include "shared.h"

#define PERCENT 100.0
#define NANOS_PER_SECOND 1e9
// Credit saved up while sampling was cheap may be spent at once, but never
// more than what this much wall time earns: a long quiet period must not
// pay for a burst of expensive passes.
#define CREDIT_WINDOW_SECONDS 1.0

void pacing_init(pacing *pace, int64_t base_interval_ns, double overhead_target_percent, int64_t now_ns) {
  pace->base_interval_ns = base_interval_ns;
  pace->target_share = overhead_target_percent / PERCENT;
  pace->credit_cap_ns = pace->target_share * CREDIT_WINDOW_SECONDS * NANOS_PER_SECOND;
  pace->credit_ns = 0;
  pace->last_refill_ns = now_ns;
  pace->spent_seen_ns = 0;
  pace->ticks = 0;
  pace->passes = 0;
  pace->last_cost_ns = 0;
  pace->spent_ns = 0;
  pace->delayed_ticks = 0;
}

// Passes expected to cost this much are worth a CPU clock read.
#define CPU_CLOCK_WORTH_FROM_NS 50000
// A pass charged by wall time is charged at most this many times the last
// pass's cost, and never less than this floor for the cap.
#define WALL_CHARGE_CAP_FACTOR 20
#define WALL_CHARGE_CAP_FLOOR_NS 50000

// The first pass too: nothing is known of its cost yet, and a costly first
// pass charged under the cap would let a second one through unpaid.
bool pacing_wants_cpu_time(const pacing *pace) {
  if (shared_load_relaxed(&pace->passes) == 0) return true;
  return shared_load_relaxed(&pace->last_cost_ns) >= CPU_CLOCK_WORTH_FROM_NS;
}

int64_t pacing_cost_to_charge(const pacing *pace, int64_t wall_ns, int64_t cpu_ns) {
  if (wall_ns < 0) wall_ns = 0;
  if (cpu_ns >= 0) return cpu_ns < wall_ns ? cpu_ns : wall_ns;
  int64_t cap = WALL_CHARGE_CAP_FACTOR * shared_load_relaxed(&pace->last_cost_ns);
  if (cap < WALL_CHARGE_CAP_FLOOR_NS) cap = WALL_CHARGE_CAP_FLOOR_NS;
  return wall_ns < cap ? wall_ns : cap;
}

void pacing_record_cost(pacing *pace, int64_t cost_ns) {
  if (cost_ns < 0) cost_ns = 0;
  shared_store_relaxed(&pace->last_cost_ns, cost_ns);
  shared_add_relaxed(&pace->spent_ns, (uint64_t)cost_ns);
  shared_add_relaxed(&pace->passes, 1);
}

void pacing_record_extra_cost(pacing *pace, int64_t cost_ns) {
  if (cost_ns > 0) shared_add_relaxed(&pace->spent_ns, (uint64_t)cost_ns);
}

void pacing_on_tick(pacing *pace) { pace->ticks++; }

void pacing_on_ticks(pacing *pace, uint64_t n) { pace->ticks += n; }

static void settle(pacing *pace, int64_t now_ns) {
  if (now_ns > pace->last_refill_ns) {
    pace->credit_ns += pace->target_share * (double)(now_ns - pace->last_refill_ns);
    pace->last_refill_ns = now_ns;
  }
  if (pace->credit_ns > pace->credit_cap_ns) pace->credit_ns = pace->credit_cap_ns;
  uint64_t spent = shared_load_relaxed(&pace->spent_ns);
  pace->credit_ns -= (double)(spent - pace->spent_seen_ns);
  pace->spent_seen_ns = spent;
}

// A pass asked for but not reported yet is charged at the last pass's cost.
// Some ticks never produce a pass (the signal reached a thread that had just
// let go of the GVL), so at most one is counted: a lost tick costs one pass
// of credit, never a stall.
static double in_flight_ns(const pacing *pace) {
  uint64_t passes = shared_load_relaxed(&pace->passes);
  if (passes >= pace->ticks) return 0;
  return (double)shared_load_relaxed(&pace->last_cost_ns);
}

int64_t pacing_next_interval_ns(pacing *pace, int64_t now_ns) {
  settle(pace, now_ns);
  double credit = pace->credit_ns - in_flight_ns(pace);
  if (credit >= 0) return pace->base_interval_ns;
  // Wait until the debt is earned back; never less than the asked interval.
  int64_t repay = (int64_t)(-credit / pace->target_share);
  shared_add_relaxed(&pace->delayed_ticks, 1);
  return repay > pace->base_interval_ns ? repay : pace->base_interval_ns;
}

uint64_t pacing_delayed_ticks(const pacing *pace) { return shared_load_relaxed(&pace->delayed_ticks); }

uint64_t pacing_charged_ns(const pacing *pace) { return shared_load_relaxed(&pace->spent_ns); }
