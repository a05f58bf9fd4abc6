// profiler.h: the state of one profiling run, shared by the parts of the
// core. Fields are grouped by who may touch them and when, because three
// kinds of context meet here: the SIGPROF handler (reads only), the trigger
// thread (no GVL), and Ruby threads holding the GVL (everything else).
#ifndef SONDE_PROFILER_H
#define SONDE_PROFILER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

#include "pacing.h"
#include "recorder.h"

typedef struct thread_contexts thread_contexts;

// Counters shown by Sonde.stats. Those bumped outside the GVL are atomics.
typedef struct {
  uint64_t signals_sent;      // trigger thread
  uint64_t signal_failures;   // trigger thread: pthread_kill failed
  uint64_t idle_requests;     // trigger thread: no GVL owner, helper asked
  uint64_t signals_received;  // handler (atomic)
  uint64_t wrong_thread;      // handler (atomic): the receiver did not hold the GVL
  uint64_t jobs_not_queued;   // handler (atomic): Ruby's postponed-job queue was full
  uint64_t samples;           // sampling passes, with the GVL
  uint64_t cpu_samples;       // passes where a profiled thread was on the CPU (= sum of cpu-samples)
  uint64_t idle_samples;      // passes taken by the idle helper
  uint64_t thread_samples;    // threads recorded over all passes
  uint64_t dropped_samples;   // thread samples lost to a failed allocation
  int64_t sampling_ns_total, sampling_ns_min, sampling_ns_max;
  uint64_t gc_events;         // GC enter/exit pairs seen
  uint64_t gc_samples;        // GC time records (merged GCs)
  uint64_t flushes;
} sonde_stats;

// Two recorders: sampling writes into recorders[active]; a flush swaps
// them (with the GVL, so no pass is in between) and exports the other one.
#define RECORDER_SLOTS 2

// Sonde's own Ruby threads that profiles leave out (trigger, idle helper,
// and those the Ruby side registers: the flusher, exporters).
#define MAX_IGNORED_THREADS 8

typedef struct sonde_profiler {
  // Set once by start, before any other thread can see the profiler.
  int64_t interval_ns;
  uint32_t max_frames;
  bool use_signals;
  bool record_gc;
  int64_t start_monotonic_ns;
  int64_t start_epoch_ns;

  // Read by everyone, written by stop or by a failed sample.
  volatile bool stop_requested;

  // The sampler adds each pass's cost; the trigger plans ticks from it.
  pacing pace;

  // With the GVL only.
  recorder *recorders[RECORDER_SLOTS];
  int active_recorder;
  bool flushing; // a flush is encoding the other recorder (GVL released)
  int64_t period_start_monotonic_ns; // since the last flush
  int64_t period_start_epoch_ns;
  VALUE ignored_threads[MAX_IGNORED_THREADS];
  int ignored_thread_count;
  VALUE gc_tracepoint;
  thread_contexts *contexts;
  recorder_frame *frame_buffer; // max_frames + 1 (truncation marker)
  int64_t previous_pass_ns;
  VALUE trigger_thread;
  VALUE idle_thread;
  VALUE failure; // the exception that stopped sampling, or Qnil
  bool fail_next_sample; // test hook
  bool pass_in_progress; // a pass that calls into Ruby must not be re-entered
  sonde_stats stats;

  // GC accounting. The tracepoint (during GC: no allocation, no Ruby calls)
  // accumulates here; a postponed job records it after GC. Where GC hooks
  // slow down allocation (vm_gc_hooks_slow_allocation), there is no
  // tracepoint: each pass polls Ruby's own GC clock instead (gc_polled).
  bool gc_polled;
  int64_t gc_total_time_seen_ns; // GC.total_time at the previous poll
  size_t gc_count_seen;          // GC.count at the previous poll
  int64_t gc_started_wall_ns;
  int64_t gc_started_cpu_ns;
  const void *gc_thread; // the VM thread that ran the GC
  int64_t gc_pending_wall_ns;
  int64_t gc_pending_cpu_ns;

  // Wakes the trigger thread early when stopping; also tells start that
  // Sonde's threads are up (threads_started, under trigger_lock).
  pthread_mutex_t trigger_lock;
  pthread_cond_t trigger_wakeup;
  int threads_started;

  // The idle helper waits here for a request from the trigger thread.
  pthread_mutex_t idle_lock;
  pthread_cond_t idle_wakeup;
  bool idle_requested;
  bool idle_helper_waited; // the helper's own; set on its first wait
} sonde_profiler;

// The recorder sampling writes into now.
static inline recorder *profiler_active_recorder(sonde_profiler *profiler) {
  return profiler->recorders[profiler->active_recorder];
}

// Defines Sonde::Native.start, stop, stats, ... on the module the loader gives.
void profiler_define_methods(VALUE native);

#endif
