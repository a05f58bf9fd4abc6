// worker.h: WHEN to sample. The trigger thread ticks at the sampling rate
// and sends SIGPROF to the thread holding the GVL (or asks the idle helper
// when nobody holds it); the SIGPROF handler queues a postponed job; the job
// runs the sampling pass with the GVL.
#ifndef SONDE_WORKER_H
#define SONDE_WORKER_H

#include <stddef.h>

#include "profiler.h"

// Registers the fork hook. Once, when the extension loads.
void worker_init_once(void);

// Initializes the profiler's locks and condition variables. Returns false on failure.
bool worker_init_locks(sonde_profiler *profiler);

// Starts sampling for a fully initialized profiler (with the GVL). Returns
// false and writes the reason into error if it could not: another SIGPROF
// handler, a thread that could not be created. Nothing is left running then.
bool worker_start(sonde_profiler *profiler, char *error, size_t error_size);

// Stops sampling (with the GVL): ends the trigger and helper threads, waits
// for them, and leaves an empty SIGPROF handler behind. After it returns no
// sample is taken for this profiler. Safe to call after a failure.
void worker_stop(sonde_profiler *profiler);

// The profiler that is sampling now, or NULL. The one global of the core.
sonde_profiler *worker_active(void);

// Sonde's threads call this once they run without the GVL.
void worker_thread_started(sonde_profiler *profiler);

// One sampling pass with the GVL; catches any Ruby exception, which stops
// sampling and is kept in profiler->failure. from_idle_helper is for stats.
void worker_sample_with_gvl(sonde_profiler *profiler, bool from_idle_helper);

// Adds to a counter that threads without the GVL also write.
#define STATS_ADD(profiler, field, amount) __atomic_fetch_add(&(profiler)->stats.field, (amount), __ATOMIC_RELAXED)
#define STATS_READ(profiler, field) __atomic_load_n(&(profiler)->stats.field, __ATOMIC_RELAXED)

#endif
