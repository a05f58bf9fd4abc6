// run.h: one profiling run, as the parts of the core that take part in it.
// Each part owns its state behind its own interface; the run only holds
// them together and carries the settings every part reads.
//
// Set once by profiler.c, with the GVL, before any other thread can see the
// run (settings, start times, the parts' pointers); nothing here is written
// afterwards. What changes during a run lives inside the parts.
#ifndef SONDE_RUN_H
#define SONDE_RUN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct scheduler scheduler;
typedef struct cpu_timers cpu_timers;
typedef struct capture_buffer capture_buffer;
typedef struct gc_source gc_source;
typedef struct thread_contexts thread_contexts;
typedef struct recorder_slots recorder_slots;
typedef struct sampling_pass sampling_pass;
typedef struct own_threads own_threads;
typedef struct alloc_source alloc_source;
typedef struct exit_cpu exit_cpu;

typedef struct {
  int64_t interval_ns; // 1 / rate
  uint32_t max_frames;
  bool use_signals; // false: no-signals mode, no SIGPROF at all
  bool record_gc;
  double overhead_target_percent;
  uint32_t alloc_interval; // sample one allocation in this many on average; 0: allocations not sampled
  bool heap;               // track the sampled objects that stay alive (needs alloc_interval)
  double alloc_duty;       // share of ticks during which allocations are listened to, (0, 1]
  bool timeline;           // keep each CPU and wall sample's moment too (timeline_log.h)
} run_settings;

typedef struct sonde_run {
  run_settings settings;
  int64_t start_monotonic_ns;
  int64_t start_epoch_ns;
  scheduler *scheduler;      // wall ticks: the trigger thread and the idle helper
  cpu_timers *timers;        // per-thread CPU timers; NULL in no-signals mode
  capture_buffer *captures;  // what the SIGPROF handler read; NULL in no-signals mode
  gc_source *gc;
  thread_contexts *contexts; // per-thread sampling state
  recorder_slots *slots;     // the two recorders and the flush periods
  sampling_pass *pass;       // the pass that records with the GVL, and its failure
  own_threads *own;          // Sonde's own Ruby threads, left out of profiles and Thread.list
  own_threads *muted;        // threads left out of the profile (a live capture's request thread)
  alloc_source *alloc;       // allocation and live-heap samples; NULL when not asked for
  exit_cpu *exits;           // ended threads' CPU after their EXITED event; NULL on 3.1
  int64_t stop_burn_ns_for_testing; // Testing.burn_at_stop: CPU the stop burns between its end and the halt
} sonde_run;

// The run sampling now, or NULL: the core's one global run pointer (the
// other mutable statics are listed in docs/DESIGN.md, "Global state").
// Written only by profiler.c with the GVL: set before the SIGPROF handler
// is installed and the trigger thread exists, cleared once the trigger
// thread is joined, every CPU timer deleted and no handler runs any more.
// Read by the SIGPROF handler, postponed jobs and Ruby hooks; the trigger
// thread has its own pointer to the run, set when it is started.
sonde_run *run_active(void);
void run_set_active(sonde_run *run);

#endif
