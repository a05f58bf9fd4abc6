// clocks.h: the clocks Sonde reads. All are async-signal-safe (clock_gettime
// is) and allocate nothing.
#ifndef SONDE_CLOCKS_H
#define SONDE_CLOCKS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define NANOS_PER_SECOND 1000000000LL

// Monotonic time in nanoseconds; never fails on Linux.
int64_t clocks_monotonic_ns(void);

// Wall-clock (epoch) time in nanoseconds, for timestamps in profiles.
int64_t clocks_epoch_ns(void);

// The CPU clock of a thread of this process, from its Linux thread id: the
// clock id pthread_getcpuclockid would give for it, made without needing
// its pthread_t (which Ruby's public API does not hand out for threads that
// have not run since Sonde loaded). Returns false for an invalid tid.
bool clocks_thread_cpu_clock(int64_t tid, clockid_t *clock);

// CPU time consumed so far on that clock, in nanoseconds, or -1 when the
// clock cannot be read (its thread is gone).
int64_t clocks_cpu_ns(clockid_t clock);

#endif
