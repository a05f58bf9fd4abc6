// pacing.h: keeps the time spent sampling under a share of wall time (the
// overhead budget), as a token bucket. Wall time earns sampling credit at
// the target share (1% of each second = 10 ms); each sampling pass spends
// what it cost. While the credit is negative the trigger waits until it is
// earned back, so over any stretch of time the share stays under the target
// plus a small burst allowance, whatever a pass costs (many threads, deep
// stacks, a slow machine). Cheap passes never wait: the asked rate holds.
//
// Pure C, no Ruby, unit-tested. The sampler (with the GVL) only adds to an
// atomic counter of time spent; everything else belongs to the trigger thread.
#ifndef SONDE_PACING_H
#define SONDE_PACING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
  // Set once.
  int64_t base_interval_ns; // the interval the rate asks for
  double target_share;      // e.g. 0.01 for 1%
  double credit_cap_ns;     // the burst allowance
  // The trigger thread's.
  double credit_ns;
  int64_t last_refill_ns;
  uint64_t spent_seen_ns;
  uint64_t ticks;
  // Shared (atomic).
  uint64_t spent_ns;      // written by the sampler
  uint64_t passes;        // written by the sampler
  int64_t last_cost_ns;   // written by the sampler
  uint64_t delayed_ticks; // written by the trigger, read by stats
} pacing;

// overhead_target_percent in (0, 100]; base_interval_ns > 0; now_ns on the
// monotonic clock.
void pacing_init(pacing *pace, int64_t base_interval_ns, double overhead_target_percent, int64_t now_ns);

// What a pass costs the application is the CPU it takes, not its wall time:
// a pass descheduled by the OS for 10 ms would otherwise buy a one-second
// pause at a 1% budget. But a thread's CPU clock is a system call (about a
// microsecond), dear next to a pass of a few: so only passes expected to be
// costly read it (pacing_wants_cpu_time), and the others are charged their
// wall time, capped at a multiple of what the last pass cost. A real rise
// in cost is under-charged for one pass at most: then it is expected.
bool pacing_wants_cpu_time(const pacing *pace);

// The cost to charge for a pass of wall_ns, given its CPU time cpu_ns when
// it was read (else pass a negative cpu_ns).
int64_t pacing_cost_to_charge(const pacing *pace, int64_t wall_ns, int64_t cpu_ns);

// The sampler reports what one pass cost. Allocation-free, lock-free.
void pacing_record_cost(pacing *pace, int64_t cost_ns);

// Sampling work that is not a tick's pass (recording the CPU samples the
// signal handler captured between two ticks): spends credit like a pass,
// but is not counted as one (a tick's pass may still be on its way).
void pacing_record_extra_cost(pacing *pace, int64_t cost_ns);

// The trigger tells that it just asked for a pass (sent a signal, woke
// the helper). Until that pass reports its cost, its likely cost (the last
// pass's) is held back from the credit, so a slow pass that has not
// finished yet cannot let a second one through.
void pacing_on_tick(pacing *pace);
// The same for n ticks at once: those a standing offer's CPU signals took
// for the trigger since its last check.
void pacing_on_ticks(pacing *pace, uint64_t n);

// The trigger asks how long to wait before its next tick: the base interval,
// or longer while the budget is overdrawn (counted in delayed_ticks).
int64_t pacing_next_interval_ns(pacing *pace, int64_t now_ns);

uint64_t pacing_delayed_ticks(const pacing *pace);

// Total cost charged to the budget so far (pacing_cost_to_charge of each pass).
uint64_t pacing_charged_ns(const pacing *pace);

#endif
