// scheduler.h: WHEN to take a wall sample. A native thread (the trigger,
// not a Ruby thread: Thread.list never shows it, Thread#kill cannot reach
// it, and it never needs the GVL) ticks at the sampling rate. Each tick it
// sends SIGPROF to the thread holding the GVL, whose handler reads its own
// stack and queues the sampling pass; when nobody holds the GVL it asks the
// idle helper (a Ruby thread) to run the pass instead. The overhead budget
// (pacing.h) stretches the ticks when passes cost too much. While every
// thread waits (a quiet pass: nobody held the GVL, nothing ran since the
// pass before) the trigger parks (Ruby 3.3+, until a thread takes the GVL
// or burns CPU; trigger_park.h) or backs off (3.1/3.2, up to 200 ms
// between ticks): waiting costs no tick.
//
// The scheduler owns the run's one stop flag: set by scheduler_request_stop
// only (stop, a sampling failure, process exit), read by everyone.
//
// This is the wall-tick event source (wall_tick_source in profiler.c).
#ifndef SONDE_SCHEDULER_H
#define SONDE_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ruby.h>

#include "event_source.h"
#include "pacing.h"
#include "run.h"

// NULL when out of memory (or a lock cannot be made).
// A sampling pass, run with the GVL on the idle helper's thread when no
// thread holds the GVL at a tick (profiler.c hands in the sampling pass's).
typedef void (*scheduler_pass_fn)(sonde_run *run);

scheduler *scheduler_new(const run_settings *settings, int64_t now_ns, scheduler_pass_fn idle_pass);
void scheduler_free(scheduler *sched);

extern const event_source wall_tick_source;

// The one stop flag. Any thread, signal handlers included (read only).
void scheduler_request_stop(scheduler *sched);
bool scheduler_stopping(const scheduler *sched);

// The overhead budget the passes report their cost to.
pacing *scheduler_pacing(scheduler *sched);

// Inside the SIGPROF handler: the GVL holder took a tick's signal (and
// read its stack for it); the postponed job it queues runs the full pass.
void scheduler_note_tick_signal_safe(scheduler *sched);

// Inside the SIGPROF handler of a CPU-timer signal on the GVL holder:
// whether the trigger offered it the current tick (tick_from_trigger), and
// takes it; the handler then records the tick as a tick's signal would.
bool scheduler_take_offered_tick_signal_safe(scheduler *sched);

// With the GVL, after each tick's pass: whether it was quiet (nobody held
// the GVL at the tick and no thread ran since the previous pass) and the
// GVL acquisitions counted as it began (vm_gvl_resumes_from_any_thread).
// After a quiet pass the trigger parks (3.3+) or backs off (3.1/3.2) until
// a thread runs again; a pass that was not quiet ends that at once.
void scheduler_note_pass_verdict(scheduler *sched, bool quiet, uint64_t resumes_at_start);

// With the GVL: whether the trigger parked or backed off since the last
// pass that was not quiet, so that threads' time since the last pass may
// be longer than an interval or two. A flush or stop catches up only then:
// otherwise the ticks cover it, and a pass more would cost a paced-down
// run (overhead_target) more than its budget.
bool scheduler_rested_since_busy_pass(const scheduler *sched);

// Inside the SIGPROF handler of a CPU-timer signal: a thread burns CPU, so
// the trigger goes back to its full rate (ends a park or back-off).
void scheduler_note_cpu_signal_signal_safe(scheduler *sched);

// Whether a tick's signal was taken and its pass has not run yet; takes it
// (the pass that calls this runs for it). With the GVL.
bool scheduler_take_tick(scheduler *sched);

// With the GVL, from a sampling pass: starts a new idle helper if the
// application killed the last one (counted in stats, warned about once).
void scheduler_restart_idle_helper_if_gone(scheduler *sched);

// Whether thread is the idle helper (left out of profiles).
bool scheduler_is_idle_helper(const scheduler *sched, VALUE thread);

#endif
