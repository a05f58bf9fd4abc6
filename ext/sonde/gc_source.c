// gc_source.c: GC time as "Garbage Collection" samples (see the header).
//
// Contexts: on_gc_event_no_alloc runs inside GC, from Ruby's internal GC
// tracepoint: it reads clocks and writes this module's fields, and
// allocates nothing and calls no Ruby code (both are forbidden during GC).
// Everything else runs with the GVL, outside GC.
//
// The hook runs at every GC step, lazy sweep steps included (about five
// per GC on the cpu workload, hundreds a second), so it makes as few
// system calls as it can: the thread's tid is cached in a thread-local,
// and its CPU clock (a system call, not a vDSO read) is read only when
// some thread may lack a CPU timer; with timers, a GC's CPU time is sampled
// by the timers' signals and the hook's CPU figure would be dropped anyway.
#include "gc_source.h"

#include <stdio.h>
#include <string.h>

#include <ruby/debug.h>

#include "clocks.h"
#include "current_ids.h"
#include "cpu_timers.h"
#include "own_threads.h"
#include "recorder_slots.h"
#include "stacks.h"
#include "stats.h"
#include "thread_contexts.h"
#include "thread_states.h"
#include "vm.h"

struct gc_source {
  bool record_gc;
  cpu_timers *timers; // the run's, NULL in no-signals mode; set at start
  bool polled; // Ruby 3.1/3.2: Ruby's GC clock at each pass instead of a hook
  VALUE tracepoint;
  // Written during GC by the tracepoint, read with the GVL after it.
  int64_t started_wall_ns;
  int64_t started_cpu_ns;
  int64_t gc_tid; // the thread that ran the GC
  int64_t pending_wall_ns;
  int64_t pending_cpu_ns;
  int64_t last_exit_ns; // when the latest pending GC ended (3.3+), 0 when polled
  // Polling.
  int64_t total_time_seen_ns; // the GC clock at the previous poll, -1 when unreadable
  size_t count_seen;          // GC.count at the previous poll
  bool gc_unfinished;         // the previous poll found a GC under way (marking or sweeping by steps)
  int64_t last_running_tid;
  // The one-frame "Garbage Collection" stack, interned for this generation.
  uint32_t stack_id;
  uint64_t stack_generation;
  // The sample the latest GC went to: the next is most often the same
  // (the same thread, the same kind of GC), found without a lookup.
  recorder_sample_hint sample_hint;
  // Stats.
  uint64_t events;  // GC enter/exit pairs (3.3+), or GCs counted (3.1/3.2)
  uint64_t samples; // merged GC records
};

gc_source *gc_source_new(bool record_gc) {
  gc_source *gc = calloc(1, sizeof(*gc));
  if (gc == NULL) return NULL;
  gc->record_gc = record_gc;
  gc->tracepoint = Qnil;
  return gc;
}

void gc_source_free(gc_source *gc) { free(gc); }

void gc_source_note_running_thread(gc_source *gc, int64_t tid) { gc->last_running_tid = tid; }

// ---------------------------------------------------------------------------
// During GC.

static bool gc_cpu_time_wanted(const gc_source *gc) {
  return gc->timers == NULL || cpu_timers_any_refused(gc->timers);
}

static void on_gc_event_no_alloc(VALUE tracepoint, void *data) {
  gc_source *gc = data;
  // The hook is the main Ractor's (TracePoints are per Ractor): a GC that
  // another Ractor's thread runs is not timed here.
  if (!vm_on_main_ractor()) return;
  rb_trace_arg_t *arg = rb_tracearg_from_tracepoint(tracepoint);
  switch (rb_tracearg_event_flag(arg)) {
    case RUBY_INTERNAL_EVENT_GC_ENTER:
      gc->started_wall_ns = clocks_monotonic_ns();
      gc->started_cpu_ns = gc_cpu_time_wanted(gc) ? clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID) : -1;
      gc->gc_tid = current_tid_cached();
      break;
    case RUBY_INTERNAL_EVENT_GC_EXIT: {
      if (gc->started_wall_ns == 0) return; // enabled mid-GC
      gc->last_exit_ns = clocks_monotonic_ns();
      gc->pending_wall_ns += gc->last_exit_ns - gc->started_wall_ns;
      if (gc->started_cpu_ns >= 0) {
        int64_t cpu = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
        if (cpu >= 0) gc->pending_cpu_ns += cpu - gc->started_cpu_ns;
      }
      gc->started_wall_ns = 0;
      gc->events++;
      break;
    }
  }
}

// ---------------------------------------------------------------------------
// Polling Ruby's GC clock (3.1, 3.2).

// Ruby's GC clock (vm_gc_total_time_ns) is measured on the process CPU
// clock around each GC step, whether or not anyone asks: it is both the GC's
// CPU time and, GC being CPU work with the GVL held, its wall time. GC runs
// on the thread that allocates, which between two passes is nearly always
// the one last seen running Ruby.
//
// The clock moves only in GC steps: the step that starts a GC (which adds
// one to GC.count) and the marking and lazy sweeping steps that finish it,
// between which GC.latest_gc_info(:state) is not :none. So it is read only
// when a GC started or was under way at the previous poll (measured on
// 3.1: of 47 moves of GC.stat(:time) in 200,000 polls, 34 came with no new
// GC, none after a poll that saw :none); most passes see neither.
static VALUE state_key, state_none;

static bool gc_under_way(void) {
  if (state_key == 0) {
    state_key = ID2SYM(rb_intern("state"));
    state_none = ID2SYM(rb_intern("none"));
  }
  return rb_gc_latest_gc_info(state_key) != state_none;
}

static void poll_gc_time(gc_source *gc) {
  size_t count = rb_gc_count();
  if (count == gc->count_seen && !gc->gc_unfinished) return;
  gc->gc_unfinished = gc_under_way();
  gc->events += count - gc->count_seen;
  gc->count_seen = count;
  int64_t total = vm_gc_total_time_ns();
  if (total < 0 || gc->total_time_seen_ns < 0) {
    gc->total_time_seen_ns = total;
    return;
  }
  int64_t spent = total - gc->total_time_seen_ns;
  gc->total_time_seen_ns = total;
  if (spent <= 0) return;
  gc->pending_cpu_ns += spent;
  gc->pending_wall_ns += spent;
  gc->gc_tid = gc->last_running_tid;
}

// ---------------------------------------------------------------------------
// Recording, with the GVL.

// What the latest GC was (major or minor, and why) is set as it starts,
// which is when GC.count moves: read once per GC (3 us in a pass, where
// Ruby's GC code and data are out of the caches).
uint8_t gc_source_latest_gc_state(void) {
  static VALUE major_by_key, gc_by_key;
  static size_t count_read = SIZE_MAX;
  static uint8_t state_read;
  if (major_by_key == 0) {
    major_by_key = ID2SYM(rb_intern("major_by"));
    gc_by_key = ID2SYM(rb_intern("gc_by"));
  }
  size_t count = rb_gc_count();
  if (count == count_read) return state_read;
  VALUE major_by = rb_gc_latest_gc_info(major_by_key);
  VALUE gc_by = rb_gc_latest_gc_info(gc_by_key);
  // The reasons are a handful of static symbols, which are never freed: the
  // name of the one seen last is not looked up again (a GC between most
  // passes of a busy worker made it a few percent of a pass).
  static VALUE reason_seen = Qundef;
  static unsigned reason_index;
  if (gc_by != reason_seen) {
    const char *reason = SYMBOL_P(gc_by) ? rb_id2name(SYM2ID(gc_by)) : NULL;
    reason_index = thread_state_gc_reason_index(reason);
    reason_seen = RB_STATIC_SYM_P(gc_by) ? gc_by : Qundef;
  }
  state_read = thread_state_of_gc(RTEST(major_by), reason_index);
  count_read = count;
  return state_read;
}

// The record of a thread Sonde met goes through its context's recorder
// entry, so the recorder looks up one sample, not a thread by its name
// and a stack by its frame too.
static bool record_for_context(gc_source *gc, recorder *rec, thread_context *context, const int64_t *values,
                               int64_t at_ns) {
  uint64_t generation = recorder_generation(rec);
  if (gc->stack_generation != generation) {
    recorder_frame frame = {.frame_id = stacks_gc_frame_id(), .line = 0};
    if (recorder_intern_stack(rec, &frame, 1, &gc->stack_id) != 0) return false;
    gc->stack_generation = generation;
  }
  recorder_context sample_context = {.state = gc_source_latest_gc_state(), .at_ns = at_ns};
  return thread_context_recorder_index(context, rec, &sample_context.thread_index) &&
         recorder_add_hinted(rec, gc->stack_id, &sample_context, values, &gc->sample_hint) == 0;
}

// A GC can run on one of Sonde's own threads (the flusher allocates): it is
// named as that thread is, by its tid.
static void name_own_thread(const own_threads *own, int64_t tid, char *name, size_t size) {
  thread_contexts_name_of_unmet(tid, name, size);
  for (int i = 0; i < own->count; i++) {
    vm_thread_info info;
    if (!vm_thread_info_of(own->threads[i], &info) || info.native_tid != tid) continue;
    if (RB_TYPE_P(info.name, T_STRING)) snprintf(name, size, "%.*s", (int)RSTRING_LEN(info.name), RSTRING_PTR(info.name));
    return;
  }
}

bool gc_source_record_pending(sonde_run *run, bool names_fresh) {
  gc_source *gc = run->gc;
  if (gc->polled) poll_gc_time(gc);
  if (gc->pending_wall_ns <= 0 && gc->pending_cpu_ns <= 0) return true;
  // Polled GC time waits for a thread seen running Ruby: it ran the GC.
  if (gc->gc_tid == 0) gc->gc_tid = gc->last_running_tid;
  if (gc->gc_tid == 0) return true;
  int64_t wall = gc->pending_wall_ns, cpu = gc->pending_cpu_ns;
  // The GCs since the previous pass are one sample, placed on the
  // timeline as ending with the latest of them (polled: now, when the GC
  // clock was read).
  int64_t at_ns = gc->last_exit_ns != 0 ? gc->last_exit_ns : clocks_monotonic_ns();
  gc->pending_wall_ns = 0;
  gc->pending_cpu_ns = 0;
  gc->last_exit_ns = 0;

  thread_context *context = gc->gc_tid ? thread_contexts_find_by_tid(run->contexts, gc->gc_tid) : NULL;
  // A GC run by a muted thread (a live capture's own request, which
  // allocates its response) is left out with the rest of that thread.
  if (context != NULL && own_threads_contains(run->muted, context->thread)) return true;
  if (context != NULL) {
    // Named as the thread is named now: it may have named itself since the
    // last pass met it (a new thread names itself after it starts).
    if (!names_fresh) thread_contexts_refresh_name_now(context);
    // A thread with a CPU timer has its GC's CPU time sampled there (its
    // signals that land in GC are GC samples): counting it here too would
    // count it twice.
    if (context->timer != 0) cpu = 0;
    thread_context_charge_gc(context, wall, cpu);
  } else if (vm_exits_count_unmet_threads() && !own_threads_has_tid(run->own, gc->gc_tid)) {
    // 3.3+: a thread no pass has met. Its CPU is counted whole, its GC's
    // included, from its birth at the first pass that meets it or at its
    // EXITED (vm.h): here the GC's wall time only, else its CPU would
    // count twice (it goes with the thread's, not "Garbage Collection").
    cpu = 0;
  }
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_CPU_TIME_NS] = cpu, [RECORDER_WALL_TIME_NS] = wall};
  recorder *rec = recorder_slots_active(run->slots);
  bool recorded;
  if (context != NULL) {
    recorded = record_for_context(gc, rec, context, values, at_ns);
  } else {
    char own_name[THREAD_NAME_SIZE];
    name_own_thread(run->own, gc->gc_tid, own_name, sizeof(own_name));
    recorder_frame frame = {.frame_id = stacks_gc_frame_id(), .line = 0};
    recorded = recorder_record(rec, &frame, 1, gc->gc_tid, own_name, gc_source_latest_gc_state(), values) == 0;
  }
  if (!recorded) return false; // out of memory: this GC record is lost
  gc->samples++;
  return true;
}

// ---------------------------------------------------------------------------
// The GC source.

static sonde_status start_gc(sonde_run *run, char *error, size_t error_size) {
  gc_source *gc = run->gc;
  gc->timers = run->timers;
  if (!gc->record_gc) return SONDE_OK;
  if (vm_gc_hooks_slow_allocation()) {
    gc->polled = true;
    gc->total_time_seen_ns = vm_gc_total_time_ns();
    gc->count_seen = rb_gc_count();
    gc->gc_unfinished = true; // a GC may be under way: the first poll reads the clock
    return SONDE_OK;
  }
  gc->tracepoint =
      rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT, on_gc_event_no_alloc, gc);
  rb_tracepoint_enable(gc->tracepoint);
  return SONDE_OK;
}

static void stop_gc(sonde_run *run) {
  gc_source *gc = run->gc;
  if (!NIL_P(gc->tracepoint)) rb_tracepoint_disable(gc->tracepoint);
}

static void mark_gc(const sonde_run *run) { rb_gc_mark(run->gc->tracepoint); }

static void add_gc_stats(const sonde_run *run, VALUE stats) {
  stats_put_count(stats, "gc_events", run->gc->events);
  stats_put_count(stats, "gc_samples", run->gc->samples);
}

// Nothing of the GC source lives in another thread (the cached tid has its
// own atfork handler: current_ids.h).
static void forget_gc_after_fork(sonde_run *run) {}

const event_source gc_event_source = {
    .name = "gc",
    .start = start_gc,
    .stop = stop_gc,
    .mark = mark_gc,
    .add_stats = add_gc_stats,
    .forget_after_fork = forget_gc_after_fork,
};
