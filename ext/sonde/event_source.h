// event_source.h: the shape every source of samples has, so that a new one
// (allocations next) is one more file and one more entry in profiler.c's
// list, touching no other source. A source produces samples (or the events
// the sampling pass turns into samples); it keeps its state in its own part
// of the run and touches no other part's.
//
// All of these run with the GVL, on the thread that calls Sonde's API or in
// the GC's mark phase (mark), except forget_after_fork, which runs in a
// forked child right after fork (pthread_atfork), before any Ruby code.
#ifndef SONDE_EVENT_SOURCE_H
#define SONDE_EVENT_SOURCE_H

#include <stddef.h>

#include <ruby.h>

#include "run.h"
#include "status.h"

typedef struct {
  const char *name;
  // Starts producing. On failure returns the status and writes why into
  // error; the source is then stopped (nothing left running).
  sonde_status (*start)(sonde_run *run, char *error, size_t error_size);
  // Stops producing; when it returns the source sends no more signals and
  // runs no more hooks. Idempotent, and safe after a failed start.
  void (*stop)(sonde_run *run);
  // Marks the Ruby objects the source holds.
  void (*mark)(const sonde_run *run);
  // Adds the source's counters to a Sonde.stats Hash.
  void (*add_stats)(const sonde_run *run, VALUE stats);
  // In a forked child: forgets what did not survive the fork (threads,
  // timers, locks another thread held), without system calls on the
  // parent's resources. Called for every source of an active run, started
  // or not (the fork may come while another thread is inside start).
  void (*forget_after_fork)(sonde_run *run);
} event_source;

#endif
