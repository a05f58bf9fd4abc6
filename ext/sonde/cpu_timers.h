// cpu_timers.h: one kernel timer per profiled thread, on that thread's own
// CPU clock (timer_create on the clock of its tid, SIGEV_THREAD_ID aimed at
// the thread). After every interval of the thread's CPU time the kernel
// sends SIGPROF to the thread itself, wherever it is: running Ruby, in C
// code that released the GVL, in GC. Idle threads get no signal.
//
// The kernel checks CPU timers at its tick (250 Hz on these machines), so a
// thread is signalled at most that often whatever the interval; each signal
// says how much CPU the thread used since its previous one (read from its
// clock), so sampled totals stay exact at any effective rate.
//
// Contexts: arm, disarm and the rest take this module's own lock (the pass
// and the thread-begin hook hold the GVL, the trigger thread does not);
// cpu_timers_on_signal_signal_safe runs inside the SIGPROF handler and
// takes no lock: it finds its thread's record through the timer's
// sigev_value, checked against a generation so that a signal still queued
// for a deleted timer is recognised and ignored.
#ifndef SONDE_CPU_TIMERS_H
#define SONDE_CPU_TIMERS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cpu_timers cpu_timers;

// A live timer, as arm returns it; 0 is "none".
typedef uint64_t cpu_timer_ref;

// interval_ns of CPU time between signals; seed makes the first signal of
// each thread fall at a random point of its first interval (below). NULL
// when out of memory.
cpu_timers *cpu_timers_new(int64_t interval_ns, uint64_t seed);

// Only after cpu_timers_disarm_all and once no SIGPROF handler can run.
void cpu_timers_free(cpu_timers *timers);

typedef enum {
  CPU_TIMER_ARMED,
  CPU_TIMER_THREAD_GONE,   // the thread ended before its timer could be made
  CPU_TIMER_REFUSED,       // the kernel refused this timer (a limit): this thread goes without
  CPU_TIMER_UNAVAILABLE,   // timers cannot be made here (seccomp, no kernel support): none will be
} cpu_timer_result;

// Makes and arms the timer of thread tid; thread_handle is handed back to
// its signals (the VM handle the handler reads its stack with). The first
// signal falls at a random point of the first interval, so that threads
// started together do not all take their signals at once; the thread's CPU
// time is counted from the arming. What the signals did not cover when the
// thread ends is cpu_timers_finish's to tell: the kernel checks CPU timers
// only at its tick, so a thread that lives for less than a tick is almost
// never signalled, whatever the odds its CPU time deserves (issue 23: a
// third to a half of the CPU of 15,000 threads a second went unseen).
// The first refusal of the CPU_TIMER_UNAVAILABLE kind is remembered: later
// calls return it at once.
// count_from_ns is the thread's CPU clock reading its CPU is counted from
// (0: its birth; a negative value: the arming).
cpu_timer_result cpu_timers_arm(cpu_timers *timers, int64_t tid, const void *thread_handle, int64_t count_from_ns,
                                cpu_timer_ref *ref);

// Deletes a thread's timer (the thread ended). A signal it had queued is
// ignored when it arrives. Does nothing for ref 0 or a ref already disarmed.
void cpu_timers_disarm(cpu_timers *timers, cpu_timer_ref ref);

// Deletes a thread's timer and returns the CPU time its committed signals
// did not cover: cpu_now_ns (the thread's CPU clock, read by the caller
// now) minus where the last committed signal (else the arming) left it; 0
// if the clock went no further, -1 when ref names no live timer. Waits
// for handlers still inside this module (a few loads each) so that none
// commits after the reading. Not inside a signal handler.
int64_t cpu_timers_finish(cpu_timers *timers, cpu_timer_ref ref, int64_t cpu_now_ns);

// Deletes every timer and refuses new ones from then on (stop, or another
// library took SIGPROF over). Any thread; idempotent.
void cpu_timers_disarm_all(cpu_timers *timers);

// In a forked child: timers are not inherited by fork, so the records are
// dropped without deleting anything (the ids are the parent's). The lock
// is made anew: another thread may have held it at fork.
void cpu_timers_forget_after_fork(cpu_timers *timers);

// What one CPU-timer signal says, for the capture.
typedef struct {
  int32_t tid;
  const void *thread_handle;
  int64_t cpu_ns; // CPU time of this thread since its previous CPU sample
  // For cpu_timers_commit_signal_safe.
  uint32_t index, generation;
  int64_t clock_ns;
} cpu_timer_hit;

// Inside the SIGPROF handler: whether this signal came from one of the live
// timers (si_code SI_TIMER and a current generation), and if so what it
// says. Reads the calling thread's CPU clock. Lock-free.
bool cpu_timers_on_signal_signal_safe(cpu_timers *timers, const siginfo_t *info, cpu_timer_hit *hit);

// Inside the SIGPROF handler of a wall tick, on the thread it landed on
// (tid: that thread's): whether the thread's CPU timer is overdue, and if
// so a hit as its CPU signal would have made. The kernel checks a CPU
// timer only when its tick finds the thread running, so a thread that
// shares its core with busier ones (a loaded machine, a CPU quota) runs
// between ticks and goes long without its signal, whose one sample would
// then carry all that CPU (docs/reading-profiles.md). Overdue: 2
// intervals of CPU since its last sample, which a timer that keeps up
// (it fires within a kernel tick of each interval) never is at 250 Hz or
// less. Lock-free; the caller commits a kept sample with
// cpu_timers_commit_signal_safe as for a CPU signal.
bool cpu_timers_on_overdue_tick_signal_safe(cpu_timers *timers, int32_t tid, cpu_timer_hit *hit);

// Inside the SIGPROF handler, once the sample is kept: its CPU time is
// accounted for, the next sample counts from here. A sample that could not
// be kept (a full buffer) is not committed: its CPU time goes with the
// thread's next sample, so totals stay exact.
void cpu_timers_commit_signal_safe(cpu_timers *timers, const cpu_timer_hit *hit);

// Stats. live: timers armed now. signals: CPU-timer signals taken;
// committed: those kept as samples; sampled_cpu_ns: CPU time the kept ones
// covered (so committed / sampled seconds is the effective rate, counted
// in the kernel's signals, that is: what a sample weighs); failures: timers
// the kernel refused. (Samples taken by overdue ticks count as committed;
// signal_sampler.c counts them apart.)
typedef struct {
  uint64_t live, signals, committed, failures;
  int64_t sampled_cpu_ns;
  bool unavailable;
  int unavailable_errno;
} cpu_timer_stats;

cpu_timer_stats cpu_timers_stats(cpu_timers *timers);

// Whether the kernel refused any timer: then some thread may have none.
// Lock-free (an atomic read): safe during GC and in a signal handler.
bool cpu_timers_any_refused(cpu_timers *timers);

// Tests only: makes every later timer_create fail with err, as a seccomp
// filter or a container policy would.
void cpu_timers_fail_creation_for_testing(cpu_timers *timers, int err);

#endif
