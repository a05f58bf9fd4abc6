// ractor_accounting.h: what a profile leaves out because Sonde samples the
// main Ractor's threads only: how many other Ractors ran, and the process's
// CPU time against the CPU time in the profile, per run and per period.
//
// Everything here runs with the GVL on the main Ractor, in plain calls
// (Sonde.start, flush, stop, stats, Ractor.new through
// lib/sonde/ractor_guard.rb), never in a pass, a hook or a handler: it calls
// Ractor.count, a Ruby method.
#ifndef SONDE_RACTOR_ACCOUNTING_H
#define SONDE_RACTOR_ACCOUNTING_H

#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

#include "recorder.h"

// Kept by value in the profiler's state; only ractor_accounting.c reads or
// writes the fields.
typedef struct {
  int64_t run_start_cpu_ns;      // the process's CPU clock at the start
  int64_t period_start_cpu_ns;   // and at the start of the current period
  uint64_t alive_at_start;       // other Ractors alive at the start
  uint64_t alive_at_period_start;
  uint64_t created;              // Ractor.new calls from the main Ractor during the run
  uint64_t created_in_period;
  uint64_t most_alive;           // the most other Ractors seen alive at once (start, flushes, stop)
  int64_t flushed_cpu_ns;        // CPU time in the periods already exported
  bool final_period_taken;       // the stop's period is in flushed_cpu_ns
} ractor_accounting;

// At Sonde.start, before sampling begins.
void ractor_accounting_start(ractor_accounting *accounting);

// Whether other Ractors are alive now (Ractor.count).
bool ractor_accounting_others_alive(void);

// Ractor.new is about to run on the main Ractor.
void ractor_accounting_note_created(ractor_accounting *accounting);

// A period ends (a flush, or the stop when final): rec holds its samples.
// Returns comments (nil or an Array of Strings) with, when other Ractors
// ran during the period, one more saying so and how much CPU the profile
// leaves out; a new Array, the caller's is not changed. Can raise only
// NoMemoryError (nothing is half-updated then).
VALUE ractor_accounting_end_period(ractor_accounting *accounting, const recorder *rec, VALUE comments, bool final);

// Adds other_ractors, process_cpu_seconds and profiled_cpu_seconds to
// stats. active is the recorder filling now (its CPU is counted unless the
// stop's period took it already).
void ractor_accounting_add_stats(const ractor_accounting *accounting, const recorder *active, VALUE stats);

#endif
