// sampling_pass.h: what is recorded, with the GVL. A full pass records the
// CPU samples the SIGPROF handler captured since the last one, then a wall
// sample of every Ruby thread (wall time, state, GVL wait) on the stack it
// had at the tick; a drain records only the CPU samples (the postponed job
// a CPU signal queues, so they do not wait for the next tick).
//
// Runs with the GVL, from the postponed job (after a SIGPROF), from the
// idle helper, and from start, flush and stop; never inside a signal
// handler and never during GC. Ruby exceptions in a pass are caught: they
// stop sampling, are kept (sampling_pass_failure) and reported; the
// application never sees them.
#ifndef SONDE_SAMPLING_PASS_H
#define SONDE_SAMPLING_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

#include "run.h"

typedef enum {
  PASS_FROM_TICK,        // the postponed job, for a tick the GVL holder took
  PASS_FROM_IDLE_HELPER, // nobody held the GVL (or no-signals mode)
  PASS_CATCH_UP,         // a flush or stop: every thread's time up to it
} pass_origin;

// NULL when out of memory.
sampling_pass *sampling_pass_new(uint32_t max_frames);
void sampling_pass_free(sampling_pass *pass);

// Once, at load: makes the postponed job the SIGPROF handler queues.
void sampling_pass_prepare_job(void);

// Meets every thread alive at start without recording: their first samples
// then cover only the time since the start. Arms their CPU timers. The
// SIGPROF handler must already be installed (a timer's first signal may
// come at once). May raise. Returns when it met them (monotonic): where
// their wall time starts.
int64_t sampling_pass_baseline(sonde_run *run);

// One full pass (see the top). Catches and keeps any exception.
void sampling_pass_run_with_gvl(sonde_run *run, pass_origin origin);

// The same, as the idle helper's pass (the scheduler's scheduler_pass_fn).
void sampling_pass_run_from_idle_helper(sonde_run *run);

// At a flush or stop, with the GVL, before the captures are recorded: one
// pass now, so that every thread's time up to this moment is in the period
// that ends, however long ago the last tick's pass was, when the trigger
// parked or backed off since the last busy pass or the last pass is two
// intervals old or more (a run the budget paced down); else the ticks
// cover the little time since. The calling thread is left out
// when the ticks sampled it recently (its stack is Sonde's own call).
// Catches and keeps any exception, as a pass does.
void sampling_pass_catch_up_with_gvl(sonde_run *run);

// Records every capture still in the buffer and the pending GC time: at a
// flush (into the period that ends) and at stop, once no handler can run
// (then captures of threads that are gone are recorded too).
void sampling_pass_record_captures(sonde_run *run, bool final);

// Records what ended threads spent after their EXITED event since the
// previous call (exit_cpu.h): at each flush, and at stop before the
// trigger thread (a native thread of Sonde's own, whose end would count)
// is told to stop.
void sampling_pass_record_native_exit_cpu(sonde_run *run);

// From the thread-begin hook, on the new thread with the GVL: meets it at
// once, so that its CPU timer runs from its first instruction.
void sampling_pass_meet_current_thread(sonde_run *run);

// From the thread-end hook, on the ending thread with the GVL: records the
// CPU time its timer's signals did not cover, deletes its timer and
// forgets it, so that ended threads cost nothing until the next pass.
void sampling_pass_end_current_thread(sonde_run *run);

// The exception that stopped sampling, or Qnil.
VALUE sampling_pass_failure(const sampling_pass *pass);

// Tests: makes the next pass raise.
void sampling_pass_fail_next_for_testing(sampling_pass *pass);

void sampling_pass_mark(const sampling_pass *pass);
void sampling_pass_add_stats(const sonde_run *run, VALUE stats);

#endif
