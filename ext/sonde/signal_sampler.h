// signal_sampler.h: what Sonde's SIGPROF handler does. Two kinds of signal
// reach it, told apart by their siginfo:
// - a thread's CPU timer (SI_TIMER): the thread used another interval of
//   CPU. It reads its own stack where the signal landed (or notes a GC
//   sample when it was running the GC) with the CPU time since its previous
//   CPU sample, into the capture buffer.
// - the trigger's tick (SI_TKILL from this process), sent to the GVL
//   holder: it reads its own stack for the tick's wall sample.
// Then, if it holds the GVL, it queues the postponed job that records
// (sampling_pass.h).
//
// Everything here runs inside the signal handler: no locks, no allocation,
// no Ruby calls that can raise or allocate; errno is saved by signals.c.
#ifndef SONDE_SIGNAL_SAMPLER_H
#define SONDE_SIGNAL_SAMPLER_H

#include <signal.h>
#include <stdint.h>

#include <ruby.h>

// The callback signals.c calls from the SIGPROF handler.
void signal_sampler_on_sigprof_inside_signal_handler(const siginfo_t *info);

// Counters of the current run (reset at its start, with the GVL). Bumped
// by handlers with atomics.
void signal_sampler_reset_stats(void);
void signal_sampler_add_stats(VALUE stats);

#endif
