// sampling_pass.c: recording, with the GVL (see the header).
//
// Holding the GVL is what keeps other threads' stacks and states still
// while they are read: a thread that does not hold it cannot run Ruby, so
// its stack is the one it had when it let the GVL go. The thread that held
// the GVL at the tick has moved on to a safe point by the time its pass
// runs, so its stack comes from its SIGPROF handler, which read it where
// the signal landed (signal_sampler.c).
//
// Steady state allocates nothing: contexts are made once per thread, the
// thread list and frame buffers are reused, a thread that has not run since
// its previous sample is recorded with the stack id it had, and the
// recorder grows only on new stacks.
//
// No Ruby method is called here, nor in anything this calls: a method call
// runs the pending interrupts of the thread the pass runs on, and a
// Thread#kill or Thread#raise run inside a postponed job is swallowed by
// Ruby (rb_postponed_job_flush catches what a job throws). So exceptions
// caught here are Sonde's own.
#include "sampling_pass.h"

#include <stdio.h>
#include <string.h>

#include "alloc_source.h"
#include "capture_buffer.h"
#include "clocks.h"
#include "cpu_timers.h"
#include "duration_histogram.h"
#include "exit_cpu.h"
#include "gc_source.h"
#include "own_threads.h"
#include "recorder_slots.h"
#include "scheduler.h"
#include "stacks.h"
#include "stats.h"
#include "thread_contexts.h"
#include "thread_states.h"
#include "labels.h"
#include "vm.h"

#define INITIAL_THREAD_CAPACITY 16
// A flush or stop this long after the last pass runs one first, and a
// thread that ends this long after its previous sample gets its wall time
// since: the ticks leave them older than this only when the trigger parked
// or backed off (or the overhead budget stretched them).
#define CATCH_UP_AFTER_INTERVALS 2

struct sampling_pass {
  uint32_t max_frames;
  recorder_frame *frames; // max_frames + 1 (the truncation marker)
  vm_thread_info *threads; // this pass's threads, reused between passes
  thread_context **contexts; // each one's context, as met (NULL: none)
  size_t thread_count, thread_capacity;
  // A context was forgotten while this pass met threads: contexts[] may
  // point at one, so the wall samples look each context up again.
  bool forgot_while_meeting;
  int64_t previous_pass_ns;
  // The stack the GVL holder had at the tick, from its handler.
  int64_t holder_tid;
  uint32_t holder_depth;
  bool holder_read_later; // its handler could not read it (a GC ran): read it now
  uint32_t holder_label_set; // its label set at the tick
  trace_context holder_trace; // and its trace context
  recorder_frame *holder_frames; // max_frames + 1
  VALUE failure;
  bool fail_next;
  bool in_progress; // a pass that calls into Ruby must not be re-entered
  // This pass: its epoch (vm_begin_pass), the GVL acquisitions counted as
  // it began, and whether every thread it sampled kept its stack (nothing
  // ran since the previous pass), for the scheduler's idle verdict.
  uint64_t epoch;
  uint64_t resumes_at_start;
  bool nothing_ran;
  pass_origin origin;
  // Threads whose wall sample the latest pass deferred: a flush or stop
  // then catches up, whenever the latest pass was.
  size_t threads_deferred;
  // Stats.
  uint64_t passes, idle_passes, thread_samples, cpu_samples, dropped_samples, stacks_reused, unattributed;
  uint64_t threads_ended, cpu_remainders, ended_threads_merged, teardown_threads, unmet_ended_threads;
  uint64_t quiet_passes, waits_credited, catch_up_passes, wall_samples_deferred;
  int64_t cpu_remainder_ns, teardown_cpu_ns, native_exit_cpu_ns, unmet_ended_cpu_ns;
  int64_t ns_total, ns_min, ns_max;
  // Every pass's time, for its quantiles: a few passes the machine
  // preempted move the average, not the median.
  duration_histogram pass_times;
};

sampling_pass *sampling_pass_new(uint32_t max_frames) {
  sampling_pass *pass = calloc(1, sizeof(*pass));
  if (pass == NULL) return NULL;
  pass->max_frames = max_frames;
  pass->failure = Qnil;
  pass->frames = calloc((size_t)max_frames + 1, sizeof(recorder_frame));
  pass->holder_frames = calloc((size_t)max_frames + 1, sizeof(recorder_frame));
  pass->threads = calloc(INITIAL_THREAD_CAPACITY, sizeof(vm_thread_info));
  pass->contexts = calloc(INITIAL_THREAD_CAPACITY, sizeof(thread_context *));
  pass->thread_capacity = INITIAL_THREAD_CAPACITY;
  if (!pass->frames || !pass->holder_frames || !pass->threads || !pass->contexts) {
    sampling_pass_free(pass);
    return NULL;
  }
  return pass;
}

void sampling_pass_free(sampling_pass *pass) {
  if (pass == NULL) return;
  free(pass->frames);
  free(pass->holder_frames);
  free(pass->threads);
  free(pass->contexts);
  free(pass);
}

VALUE sampling_pass_failure(const sampling_pass *pass) { return pass->failure; }

void sampling_pass_fail_next_for_testing(sampling_pass *pass) { pass->fail_next = true; }

void sampling_pass_mark(const sampling_pass *pass) { rb_gc_mark(pass->failure); }

// ---------------------------------------------------------------------------
// Threads.

typedef struct {
  sonde_run *run;
  sampling_pass *pass;
} list_run;

// Copies the thread list first: naming a new thread calls into Ruby, and the
// VM's list must not be walked across such a call. Sonde's own threads are
// left out.
static void collect_thread(const vm_thread_info *info, void *data) {
  list_run *list = data;
  sampling_pass *pass = list->pass;
  if (own_threads_contains(list->run->own, info->thread)) return;
  if (pass->thread_count == pass->thread_capacity) {
    size_t capacity = pass->thread_capacity * 2;
    vm_thread_info *grown = realloc(pass->threads, capacity * sizeof(vm_thread_info));
    if (grown != NULL) pass->threads = grown;
    thread_context **grown_contexts = grown ? realloc(pass->contexts, capacity * sizeof(thread_context *)) : NULL;
    if (grown_contexts == NULL) {
      pass->dropped_samples++; // this thread is not sampled this pass
      return;
    }
    pass->contexts = grown_contexts;
    pass->thread_capacity = capacity;
  }
  pass->threads[pass->thread_count++] = *info;
}

static void list_threads(sonde_run *run, int64_t now) {
  run->pass->thread_count = 0;
  list_run list = {run, run->pass};
  vm_each_thread(now, collect_thread, &list);
}

static int64_t cpu_now(const thread_context *context) {
  return context->has_cpu_clock ? clocks_cpu_ns(context->cpu_clock) : -1;
}

// The CPU time a thread used since its previous CPU sample, as it ends or
// is forgotten: what its timer's signals did not cover (the timer is
// deleted), else, without a timer, since the pass that last charged it.
// -1 when its clock cannot be read any more (its native thread is gone) or
// when its tid runs a newer thread met since (that one's CPU is its own).
// *clock_ns: the clock reading the count ends at (-1: none).
static int64_t finish_cpu_of(sonde_run *run, thread_context *context, bool clock_is_its_own, int64_t *clock_ns) {
  int64_t now = clock_is_its_own ? cpu_now(context) : -1;
  *clock_ns = now;
  if (now >= 0 && vm_reuses_native_threads()) thread_contexts_note_end_clock(run->contexts, context->native_tid, now);
  int64_t uncovered = -1;
  if (run->timers != NULL && context->timer != 0) {
    uncovered = thread_context_finish_timer(context, run->timers, now);
  } else if (now >= 0 && (context->sampling.sampled || context->timer_deferred) &&
             context->sampling.cpu_ns_at_previous_sample >= 0) {
    uncovered = now > context->sampling.cpu_ns_at_previous_sample ? now - context->sampling.cpu_ns_at_previous_sample : 0;
    // A GC it ran was charged to "Garbage Collection" with its CPU (no
    // timer sampled it): not to be counted again here.
    uncovered = thread_context_deduct_gc_cpu(context, uncovered);
  }
  return now >= 0 ? uncovered : -1;
}

// The thread table entry every ended thread's leftover CPU goes under when
// the thread had no sample of its own in the period and no name of its own
// (on 3.3+ an unnamed thread is known only by its tid, and each tid would
// be an entry of its own: at 15,000 threads a second a period's table would
// grow by as many, about 500 bytes each), and where their teardown goes.
#define ENDED_THREADS_NAME "(ended threads)"

static bool ended_threads_index(recorder *rec, uint32_t *index) {
  return recorder_intern_thread(rec, 0, ENDED_THREADS_NAME, index) == 0;
}

static bool index_for_ended_thread(sampling_pass *pass, thread_context *context, recorder *rec, uint32_t *index) {
  if (context->named_by_tid && context->thread_generation != recorder_generation(rec)) {
    pass->ended_threads_merged++;
    return ended_threads_index(rec, index);
  }
  return thread_context_recorder_index(context, rec, index);
}

// Records a thread's CPU time since its previous sample as it ends, on the
// stack it has (none once it is gone: then "(CPU since the thread's last
// sample)"). Short threads get most of their CPU counted here: the kernel
// signals a CPU timer only at its tick (cpu_timers.h).
static void record_uncovered_cpu(sonde_run *run, thread_context *context, int64_t uncovered_ns, bool has_stack) {
  if (uncovered_ns <= 0 || own_threads_contains(run->own, context->thread) ||
      own_threads_contains(run->muted, context->thread)) {
    return;
  }
  sampling_pass *pass = run->pass;
  recorder_frame end_frame = {.frame_id = stacks_thread_end_frame_id(), .line = 0};
  const recorder_frame *frames = &end_frame;
  uint32_t depth = has_stack ? stacks_collect(context->handle, pass->frames, pass->max_frames) : 0;
  if (depth > 0) {
    frames = pass->frames;
  } else {
    depth = 1;
  }
  recorder_context sample_context = {.state = VM_THREAD_RUNNING, .at_ns = clocks_monotonic_ns()};
  if (has_stack) {
    sample_context.label_set = labels_of_thread(context->thread);
    labels_trace_of_thread(context->thread, &sample_context.trace);
  }
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_CPU_TIME_NS] = uncovered_ns};
  recorder *rec = recorder_slots_active(run->slots);
  uint32_t stack_id;
  if (recorder_intern_stack(rec, frames, depth, &stack_id) != 0 ||
      !index_for_ended_thread(pass, context, rec, &sample_context.thread_index) ||
      recorder_add(rec, stack_id, &sample_context, values) != 0) {
    pass->dropped_samples++;
    return;
  }
  pass->cpu_remainders++;
  pass->cpu_remainder_ns += uncovered_ns;
}

// One CPU sample of ended threads, under "(ended threads)" on a synthetic
// frame: their stacks are gone, and their labels. False when it could not
// be recorded (counted as dropped).
static bool record_ended_threads_cpu(sonde_run *run, uint64_t frame_id, int64_t ns) {
  recorder_frame frame = {.frame_id = frame_id, .line = 0};
  recorder_context sample_context = {.state = VM_THREAD_RUNNING};
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_CPU_TIME_NS] = ns};
  recorder *rec = recorder_slots_active(run->slots);
  uint32_t stack_id;
  if (recorder_intern_stack(rec, &frame, 1, &stack_id) != 0 || !ended_threads_index(rec, &sample_context.thread_index) ||
      recorder_add(rec, stack_id, &sample_context, values) != 0) {
    run->pass->dropped_samples++;
    return false;
  }
  return true;
}

// What ended threads spent in Ruby's teardown after their end hooks, since
// the previous call (3.3+; vm.h), on a "(thread teardown)" frame.
static void record_teardown_cpu(sonde_run *run) {
  uint64_t threads;
  int64_t ns = vm_take_cpu_after_end_ns(&threads);
  if (ns > 0 && record_ended_threads_cpu(run, stacks_thread_teardown_frame_id(), ns)) {
    run->pass->teardown_threads += threads;
    run->pass->teardown_cpu_ns += ns;
  }
  // And the whole CPU of the threads that ended unmet (3.3+; vm.h): no
  // stack was read for them, and none is left, so it goes where an
  // unnamed short thread's CPU at its end went, "(CPU since the thread's
  // last sample)" under "(ended threads)", its teardown in it.
  ns = vm_take_unmet_exit_cpu_ns(&threads);
  if (ns > 0 && record_ended_threads_cpu(run, stacks_thread_end_frame_id(), ns)) {
    run->pass->unmet_ended_threads += threads;
    run->pass->unmet_ended_cpu_ns += ns;
  }
}

// What ended threads spent after their EXITED event (3.3+; exit_cpu.h),
// since the previous flush, on a "(native thread exit)" frame. At flushes
// and at stop only: finding it reads every thread's clock.
void sampling_pass_record_native_exit_cpu(sonde_run *run) {
  int64_t ns = exit_cpu_take_ns(run->exits);
  if (ns <= 0 || !record_ended_threads_cpu(run, stacks_native_thread_exit_frame_id(), ns)) return;
  run->pass->native_exit_cpu_ns += ns;
}

// A context forgotten: its thread ended before a pass or a hook could see
// its end. Its native thread may still be there (Ruby 3.1 keeps it for
// the next thread): then its clock still tells what the end took.
static void disarm_timer_of(thread_context *context, void *data, bool clock_is_its_own) {
  sonde_run *run = data;
  run->pass->forgot_while_meeting = true;
  int64_t clock;
  record_uncovered_cpu(run, context, finish_cpu_of(run, context, clock_is_its_own, &clock), false);
}

static void warn_timers_unavailable_once(int err) {
  static bool warned;
  if (warned) return;
  warned = true;
  fprintf(stderr,
          "sonde: per-thread CPU timers are not available here (timer_create: %s); CPU time is charged at each "
          "sample to the stack a thread has then (README, \"CPU timers\"); Sonde.stats[:cpu_timers] is false\n",
          strerror(err));
}

static void arm_timer(sonde_run *run, thread_context *context, int64_t count_from_ns) {
  cpu_timer_result result;
  if (run->timers == NULL || !thread_context_arm_timer(context, run->timers, count_from_ns, &result)) return;
  if (result == CPU_TIMER_UNAVAILABLE) warn_timers_unavailable_once(cpu_timers_stats(run->timers).unavailable_errno);
}

// Where the CPU of a thread met by the thread-begin hook is counted from:
// its native thread's birth, so that what Ruby does before the thread's
// first instruction is not lost (issue 23: a fifth to a quarter of the CPU
// of short threads on 3.3 and 3.4), or, on a native thread Ruby reuses,
// where the previous thread's count ended (else the arming: what the
// native thread did before Sonde started is not this thread's).
static int64_t cpu_count_start_at_birth(sonde_run *run, const vm_thread_info *info) {
  int64_t from;
  if (thread_contexts_take_end_clock(run->contexts, info->native_tid, &from)) return from;
  return vm_reuses_native_threads() ? -1 : 0;
}

// A thread met by the thread-begin hook has its timer put off to the first
// pass that meets it (thread_contexts.h), counting from its birth: most
// threads that live less than a tick end before any pass, and need no
// timer (issue 23: creating, arming and deleting it were 3 of the 6 system
// calls Sonde added to each thread). Until that pass it is charged like a
// thread without a timer: the pass charges its CPU since birth to the
// stack it has then (the GVL holder's at the tick: as a timer's first
// signal, at a point of its life drawn by the tick), and its end charges
// what no pass did.
static void time_thread_met(sonde_run *run, thread_context *context, const vm_thread_info *info, bool at_birth) {
  if (!at_birth) {
    arm_timer(run, context, -1);
    return;
  }
  int64_t from = cpu_count_start_at_birth(run, info);
  int64_t count_from = from >= 0 ? from : cpu_now(context);
  if (run->timers != NULL && count_from >= 0 && thread_context_defer_timer(context)) {
    context->sampling.cpu_ns_at_previous_sample = count_from;
    return;
  }
  arm_timer(run, context, from);
}

static void arm_deferred_timer(sonde_run *run, thread_context *context, int64_t count_from_ns) {
  cpu_timer_result result;
  if (run->timers == NULL || !thread_context_arm_deferred_timer(context, run->timers, count_from_ns, &result)) return;
  if (result == CPU_TIMER_UNAVAILABLE) warn_timers_unavailable_once(cpu_timers_stats(run->timers).unavailable_errno);
}

// A thread met for the first time. Its first sample covers its time since
// wall_start (the previous pass for a thread born since, its birth for one
// met by the thread-begin hook); all its CPU time is new.
static thread_context *meet_thread(sonde_run *run, const vm_thread_info *info, int64_t wall_start, bool at_birth) {
  bool is_new;
  thread_context *context = thread_contexts_meet(run->contexts, info, &is_new, disarm_timer_of, run);
  if (context == NULL) return NULL;
  if (is_new) {
    vm_note_thread_accounted(info->thread); // its EXITED leaves its CPU to this context
    context->sampling.wall_ns_at_previous_sample = wall_start;
    time_thread_met(run, context, info, at_birth);
  } else {
    thread_contexts_refresh_name(context, info);
  }
  return context;
}

int64_t sampling_pass_baseline(sonde_run *run) {
  sampling_pass *pass = run->pass;
  int64_t now = clocks_monotonic_ns();
  list_threads(run, now);
  thread_contexts_begin_pass(run->contexts);
  for (size_t i = 0; i < pass->thread_count; i++) {
    const vm_thread_info *info = &pass->threads[i];
    thread_context *context = meet_thread(run, info, now, false);
    if (context == NULL) continue;
    context->sampling.cpu_ns_at_previous_sample = cpu_now(context);
    context->sampling.gvl_at_previous_sample = info->gvl_times;
    context->sampling.sampled = true; // the baseline stands for its previous sample
  }
  pass->previous_pass_ns = now;
  // What threads that ended before this run spent on their way out is not its.
  uint64_t threads;
  vm_take_cpu_after_end_ns(&threads);
  vm_take_unmet_exit_cpu_ns(&threads);
  return now;
}

void sampling_pass_meet_current_thread(sonde_run *run) {
  if (run->pass->in_progress || scheduler_stopping(run->scheduler)) return;
  vm_thread_info info;
  if (!vm_current_thread_info(&info) || own_threads_contains(run->own, info.thread)) return;
  meet_thread(run, &info, clocks_monotonic_ns(), true);
}

// ---------------------------------------------------------------------------
// Recording.

// Records one sample of a thread that has no context (it ended before a
// pass met it): named by its tid.
static bool record_unattributed(recorder *rec, const recorder_frame *frames, uint32_t depth, int64_t tid,
                                uint8_t state, const int64_t values[RECORDER_VALUE_COUNT]) {
  char name[THREAD_NAME_SIZE];
  thread_contexts_name_of_unmet(tid, name, sizeof(name));
  return recorder_record(rec, frames, depth, tid, name, state, values) == 0;
}

typedef enum {
  DRAIN_CPU_ONLY, // between ticks: threads not met yet and wall captures wait
  DRAIN_IN_PASS,  // a full pass: wall captures are this tick's
  DRAIN_FINAL,    // stop: everything goes, threads that ended included
} drain_mode;

typedef struct {
  sonde_run *run;
  drain_mode mode;
} drain_run;

static capture_verdict record_cpu_capture(drain_run *drain, const capture *captured) {
  sonde_run *run = drain->run;
  sampling_pass *pass = run->pass;
  thread_context *context = thread_contexts_find_by_tid(run->contexts, captured->tid);
  // A thread of Sonde's met before it was registered as one (its first
  // instructions run before Thread.new returns): not profiled.
  if (context != NULL && own_threads_contains(run->own, context->thread)) return CAPTURE_TAKEN;
  // A muted thread (a live capture's own request) is not in the profile,
  // its CPU no more than its wall time.
  if (context != NULL && own_threads_contains(run->muted, context->thread)) return CAPTURE_TAKEN;
  if (context == NULL && drain->mode == DRAIN_CPU_ONLY) return CAPTURE_KEPT;
  // Between passes a new thread may have named itself: its samples say so.
  if (context != NULL && drain->mode == DRAIN_CPU_ONLY) thread_contexts_refresh_name_now(context);

  recorder_frame gc_frame = {.frame_id = stacks_gc_frame_id(), .line = 0};
  recorder_frame no_ruby_frame = {.frame_id = stacks_no_ruby_frame_id(), .line = 0};
  const recorder_frame *frames = pass->frames;
  uint32_t depth;
  uint8_t state;
  // With gc: false there is no GC frame: the CPU a GC took goes to the
  // code that allocated, whose stack is read now (the pass runs at the
  // safe point that follows the GC, near the allocation).
  bool gc_frame_wanted = run->settings.record_gc;
  if ((captured->flags & CAPTURE_IN_GC) && gc_frame_wanted) {
    frames = &gc_frame;
    depth = 1;
    state = gc_source_latest_gc_state();
  } else if (captured->flags & (CAPTURE_STACK_LATER | CAPTURE_IN_GC)) {
    if (context == NULL) {
      pass->dropped_samples++;
      return CAPTURE_TAKEN;
    }
    depth = stacks_collect(context->handle, pass->frames, pass->max_frames);
    state = (captured->flags & CAPTURE_HELD_GVL) ? VM_THREAD_RUNNING : VM_THREAD_BLOCKED;
  } else {
    depth = stacks_from_capture(captured, pass->frames, pass->max_frames);
    state = (captured->flags & CAPTURE_HELD_GVL) ? VM_THREAD_RUNNING : VM_THREAD_BLOCKED;
  }
  // The timer fired while the thread ran only the VM's C code (as it
  // started or ended): its CPU time goes under a frame that says so.
  if (depth == 0) {
    frames = &no_ruby_frame;
    depth = 1;
  }
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_CPU_TIME_NS] = captured->cpu_ns, [RECORDER_CPU_SAMPLES] = 1};
  recorder *rec = recorder_slots_active(run->slots);
  bool recorded;
  if (context == NULL) {
    recorded = record_unattributed(rec, frames, depth, captured->tid, state, values);
    pass->unattributed++;
  } else {
    uint32_t stack_id;
    recorder_context sample_context = {.state = state, .label_set = captured->label_set, .trace = captured->trace,
                                       .at_ns = captured->at_ns};
    recorded = recorder_intern_stack_hinted(rec, frames, depth, &context->sampling.stack_hint, &stack_id) == 0 &&
               thread_context_recorder_index(context, rec, &sample_context.thread_index) &&
               recorder_add(rec, stack_id, &sample_context, values) == 0;
  }
  if (!recorded) {
    pass->dropped_samples++;
    return CAPTURE_TAKEN;
  }
  pass->cpu_samples++;
  if ((captured->flags & CAPTURE_HELD_GVL) && context != NULL) gc_source_note_running_thread(run->gc, context->native_tid);
  return CAPTURE_TAKEN;
}

// The holder's stack at the tick; the latest capture wins (ticks whose pass
// did not run come first in the drain's order).
static capture_verdict take_wall_capture(drain_run *drain, const capture *captured) {
  sampling_pass *pass = drain->run->pass;
  if (drain->mode == DRAIN_CPU_ONLY) return CAPTURE_KEPT;
  if (drain->mode == DRAIN_FINAL) return CAPTURE_TAKEN;
  pass->holder_tid = captured->tid;
  pass->holder_label_set = captured->label_set;
  pass->holder_trace = captured->trace;
  // A tick that landed in a GC has no stack: the holder's is read now, after it.
  pass->holder_read_later = (captured->flags & (CAPTURE_STACK_LATER | CAPTURE_IN_GC)) != 0;
  pass->holder_depth = pass->holder_read_later ? 0 : stacks_from_capture(captured, pass->holder_frames, pass->max_frames);
  return CAPTURE_TAKEN;
}

static capture_verdict record_capture(const capture *captured, void *data) {
  drain_run *drain = data;
  return captured->kind == CAPTURE_CPU ? record_cpu_capture(drain, captured) : take_wall_capture(drain, captured);
}

static void drain_captures(sonde_run *run, drain_mode mode) {
  if (run->captures == NULL) return;
  drain_run drain = {run, mode};
  capture_buffer_drain(run->captures, record_capture, &drain);
}

// ---------------------------------------------------------------------------
// Wall samples.

static int64_t clamp_delta(int64_t now, int64_t before) { return now > before ? now - before : 0; }

// Where a thread's wall time since its previous sample went. Without GVL
// times (Ruby 3.1) all of it goes to the state the thread is in now; with
// them (3.3+) each part goes to what the thread really did: holding the
// GVL, waiting for it, or off it. Time the GVL times do not cover (a thread
// met after its previous pass) goes to the state it is in now.
typedef struct {
  int64_t holding, waiting, off;
} wall_split;

static int64_t *part_for_state(wall_split *split, vm_thread_state state) {
  switch (state) {
    case VM_THREAD_RUNNING:
      return &split->holding;
    case VM_THREAD_WAITING_FOR_GVL:
      return &split->waiting;
    default:
      return &split->off;
  }
}

static wall_split split_wall_time(thread_context *context, const vm_thread_info *info, int64_t wall_delta) {
  wall_split split = {0};
  if (info->has_gvl_times) {
    const vm_gvl_times *before = &context->sampling.gvl_at_previous_sample, *now = &info->gvl_times;
    vm_gvl_times zero = {0};
    if (!context->sampling.sampled) before = &zero;
    split.holding = clamp_delta(now->holding_gvl_ns, before->holding_gvl_ns);
    split.waiting = clamp_delta(now->waiting_for_gvl_ns, before->waiting_for_gvl_ns);
    split.off = clamp_delta(now->off_gvl_ns, before->off_gvl_ns);
    context->sampling.gvl_at_previous_sample = *now;
    // A thread's first sample: its record's times cover its whole life
    // since Sonde met it, which may be longer than one pass (a busy pass
    // rate, or a thread born READY and not listed until it first ran).
    int64_t lifetime = split.holding + split.waiting + split.off;
    if (!context->sampling.sampled && lifetime > wall_delta) wall_delta = lifetime;
  }
  // The parts never add up to more than the wall time, nor to less.
  int64_t *parts[] = {&split.off, &split.waiting, &split.holding};
  int64_t room = wall_delta;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    if (*parts[i] > room) *parts[i] = room;
    room -= *parts[i];
  }
  *part_for_state(&split, info->state) += room;
  return split;
}

// A thread's Ruby stack changes only while it runs Ruby, which it does only
// holding the GVL: if it held the GVL at neither sample and has not taken
// it since (its GVL acquisitions, else its CPU clock, are unchanged), its
// stack is the one already interned.
static bool stack_unchanged_since(const thread_context *context, const vm_thread_info *info, uint64_t run_marker,
                                  uint64_t generation) {
  return context->sampling.stack_reusable && info->state != VM_THREAD_RUNNING && context->sampling.run_marker == run_marker &&
         context->sampling.stack_generation == generation;
}

// STACK_KEPT: the thread has not run since its previous sample, whose
// stack it still has (and so its label set and trace context too: only the
// thread itself changes them, Sonde.with_labels and with_trace_context
// write the calling fiber's).
typedef enum { STACK_FOUND, STACK_KEPT, STACK_EMPTY, STACK_NO_MEMORY } stack_result;

// The stack of this wall sample, interned: the one the GVL holder's handler
// read at the tick, the previous one when the thread has not run since, or
// the one it has now. STACK_EMPTY for a thread with no frame to show (it
// is ending: its VM stack is gone, yet it may run this very pass).
// Whether the thread's wall sample takes the stack (and label set) its
// handler read at the tick: while it still holds the GVL (the pass runs at
// its next safe point); once it let the GVL go, the stack it has now is the
// one to show, and it cannot change meanwhile.
static bool uses_holder_capture(const sampling_pass *pass, const vm_thread_info *info) {
  return pass->holder_tid == info->native_tid && !pass->holder_read_later && info->state == VM_THREAD_RUNNING;
}

static stack_result wall_stack_for(sonde_run *run, thread_context *context, const vm_thread_info *info,
                                   uint64_t run_marker, bool marker_known, recorder *rec, uint32_t *stack_id) {
  sampling_pass *pass = run->pass;
  uint64_t generation = recorder_generation(rec);
  bool ok;
  if (uses_holder_capture(pass, info)) {
    ok = recorder_intern_stack_hinted(rec, pass->holder_frames, pass->holder_depth, &context->sampling.stack_hint,
                                      stack_id) == 0;
    context->sampling.stack_id_from_memo_read = false;
  } else if (marker_known && stack_unchanged_since(context, info, run_marker, generation)) {
    *stack_id = context->sampling.stack_id;
    pass->stacks_reused++;
    return STACK_KEPT;
  } else {
    // The thread ran since (or cannot tell): its frames are read, the
    // unchanged outer ones from its memo; a stack read exactly as the
    // previous read found it is the stack id that read was interned as.
    bool unchanged;
    // The recorder marks the frames it holds: those of the previous read
    // are kept if it was interned into this recorder.
    bool previous_read_kept = context->sampling.stack_id_from_memo_read && context->sampling.stack_generation == generation;
    uint32_t depth = stacks_collect_with_memo(info->handle, context->frames_memo, previous_read_kept, pass->frames,
                                              pass->max_frames, &unchanged);
    if (depth == 0) {
      context->sampling.stack_id_from_memo_read = false;
      return STACK_EMPTY;
    }
    if (unchanged && previous_read_kept) {
      *stack_id = context->sampling.stack_id;
      pass->stacks_reused++;
      ok = true;
    } else {
      ok = recorder_intern_stack_hinted(rec, pass->frames, depth, &context->sampling.stack_hint, stack_id) == 0;
    }
    context->sampling.stack_id_from_memo_read = ok;
  }
  if (!ok) {
    context->sampling.stack_reusable = false;
    return STACK_NO_MEMORY;
  }
  context->sampling.stack_id = *stack_id;
  context->sampling.stack_generation = generation;
  context->sampling.run_marker = run_marker;
  context->sampling.stack_reusable = marker_known && info->state != VM_THREAD_RUNNING;
  return STACK_FOUND;
}

// A thread's wait since its previous sample, up to end_ns, as one sample
// on that sample's stack, labels and trace context, in the state it found
// (off the GVL), and the part queued for the GVL (by GVL times `at` as of
// end_ns; NULL: none known) as waiting for gvl. It counts as one wall
// sample, or as the passes that deferred it (as many as they would have
// taken). What follows end_ns is the ordinary sample's. False when it
// cannot be placed there (that stack is not this recorder's, or the GVL
// times went backwards): the ordinary sample then covers it all.
static bool record_wait_on_previous_stack(sonde_run *run, thread_context *context, recorder *rec, int64_t end_ns,
                                          const vm_gvl_times *at) {
  sampling_pass *pass = run->pass;
  if (!context->sampling.sampled || !context->sampling.stack_reusable || context->sampling.stack_generation != recorder_generation(rec)) return false;
  // An end seen before the previous sample (a pass that let other threads
  // run half-way) is not this wait's end.
  if (end_ns <= context->sampling.wall_ns_at_previous_sample) return false;
  const vm_gvl_times *before = &context->sampling.gvl_at_previous_sample;
  if (at && (at->off_gvl_ns < before->off_gvl_ns || at->waiting_for_gvl_ns < before->waiting_for_gvl_ns)) return false;
  int64_t wall = end_ns - context->sampling.wall_ns_at_previous_sample;
  int64_t waiting = at ? at->waiting_for_gvl_ns - before->waiting_for_gvl_ns : 0;
  if (waiting > wall) waiting = wall;
  int64_t off = wall - waiting;
  uint32_t thread_index;
  if (!thread_context_recorder_index(context, rec, &thread_index)) {
    pass->dropped_samples++;
    return false;
  }
  int64_t samples = context->sampling.passes_deferred > 0 ? context->sampling.passes_deferred : 1;
  // Off the GVL first, then queued for it, up to the end.
  struct {
    uint8_t state;
    int64_t wall;
    int64_t samples;
    int64_t ended_ns;
  } parts[] = {
      {context->sampling.off_state_at_previous_sample, off, samples, end_ns - waiting},
      {VM_THREAD_WAITING_FOR_GVL, waiting, 0, end_ns},
  };
  _Static_assert(sizeof(parts) / sizeof(parts[0]) ==
                     sizeof(context->sampling.wait_sample_hints) / sizeof(context->sampling.wait_sample_hints[0]),
                 "one sample hint per part");
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    if (parts[i].wall == 0 && parts[i].samples == 0) continue;
    int64_t values[RECORDER_VALUE_COUNT] = {
        [RECORDER_WALL_TIME_NS] = parts[i].wall,
        [RECORDER_WALL_SAMPLES] = parts[i].samples,
        [RECORDER_GVL_WAIT_NS] = parts[i].state == VM_THREAD_WAITING_FOR_GVL ? parts[i].wall : 0,
    };
    recorder_context sample_context = {.thread_index = thread_index, .state = parts[i].state,
                                       .label_set = context->sampling.label_set, .trace = context->sampling.trace,
                                       .at_ns = parts[i].ended_ns};
    if (recorder_add_hinted(rec, context->sampling.stack_id, &sample_context, values,
                            &context->sampling.wait_sample_hints[i]) != 0) {
      pass->dropped_samples++;
      return false;
    }
  }
  context->sampling.wall_ns_at_previous_sample = end_ns;
  if (at) context->sampling.gvl_at_previous_sample = *at;
  context->sampling.passes_deferred = 0;
  pass->thread_samples += (uint64_t)samples; // wall samples of its own
  return true;
}

// A thread that was off the GVL at its previous sample kept that sample's
// stack until it next took the GVL: on backends that note that moment
// (3.3+, vm_thread_info.first_resume_epoch), the wait up to it is one
// sample on that stack and in that state (and the part queued for the
// GVL, waiting for gvl), whatever came after. So a wait is its own weight
// on the stack that waited even when no pass came for seconds (the trigger
// parks while every thread waits, and passes defer the samples of threads
// that wait), and the rest of the time since goes to the stack the thread
// has now, as always.
static void credit_wait_until_resume(sonde_run *run, thread_context *context, const vm_thread_info *info,
                                     recorder *rec) {
  if (info->first_resume_epoch == 0 || info->first_resume_epoch != context->sampling.epoch_last_seen) return;
  if (record_wait_on_previous_stack(run, context, rec, info->first_resume_ns, &info->gvl_times_at_first_resume)) {
    run->pass->waits_credited++;
  }
}

// A wait that passes deferred and that no resume ended (3.1/3.2 note none;
// a flush or stop while the thread still waits): its time up to the last
// pass that found it unchanged is its previous stack's, as those passes
// would have recorded it; what came after is the ordinary sample's, as for
// a thread sampled at every pass.
static void credit_deferred_wait(sonde_run *run, thread_context *context, const vm_thread_info *info, recorder *rec) {
  if (context->sampling.passes_deferred == 0) return;
  record_wait_on_previous_stack(run, context, rec, context->sampling.wall_ns_last_seen,
                                info->has_gvl_times ? &context->sampling.gvl_last_seen : NULL);
}

// A thread at its end has no frame left to show: the time since its
// previous sample goes to that sample's stack and state, where it spent
// it (up to the back-off cap on 3.1/3.2; on 3.3+ its wait was credited up
// to its last resume already), rather than be lost.
// *ended: the thread as its previous sample saw it (state, off-GVL state).
static bool ended_on_previous_stack(const thread_context *context, const vm_thread_info *info, recorder *rec,
                                    vm_thread_info *ended) {
  if (!context->sampling.sampled || context->sampling.stack_generation != recorder_generation(rec)) return false;
  *ended = *info;
  ended->state = (vm_thread_state)context->sampling.off_state_at_previous_sample;
  ended->off_gvl_state = ended->state;
  return true;
}

// A muted thread's time since its previous sample is dropped, not kept
// for the next one: its baselines move to now.
static void skip_muted_thread(thread_context *context, int64_t now) {
  if (context->timer == 0) context->sampling.cpu_ns_at_previous_sample = cpu_now(context);
  context->sampling.wall_ns_at_previous_sample = now;
  context->sampling.sampled = true;
}

// Cost follows work, thread by thread: a thread that has not run since its
// previous sample (its GVL acquisitions, else its CPU clock, unchanged) and
// does not hold the GVL still has that sample's stack, labels and trace
// context, so sampling it again would record nothing new. Its wall time
// goes on accumulating and is recorded once, counted as the passes it
// spanned: up to the moment it takes the GVL again (3.3+,
// credit_wait_until_resume), else up to the last pass that found it
// unchanged once it has run (credit_deferred_wait), at its end, or at a
// flush or stop (catch-up passes never defer). Without GVL times (3.1/3.2)
// only while its state is the one that sample found: those passes would
// have put their time in the state they saw. Not for a thread without a
// CPU timer, whose CPU time comes with its wall samples.
static bool defer_wall_sample(sonde_run *run, thread_context *context, const vm_thread_info *info,
                              uint64_t run_marker, recorder *rec, int64_t now) {
  sampling_pass *pass = run->pass;
  if (pass->origin == PASS_CATCH_UP || context->timer == 0 || !context->sampling.sampled) return false;
  if (!stack_unchanged_since(context, info, run_marker, recorder_generation(rec))) return false;
  if (!info->has_gvl_times && info->state != (vm_thread_state)context->sampling.off_state_at_previous_sample) return false;
  // Its first GVL acquisition from now on ends the wait (vm_begin_pass).
  context->sampling.epoch_last_seen = pass->epoch;
  context->sampling.wall_ns_last_seen = now;
  context->sampling.gvl_last_seen = info->gvl_times;
  context->sampling.passes_deferred++;
  pass->threads_deferred++;
  pass->wall_samples_deferred++;
  return true;
}

static void sample_wall_of_thread(sonde_run *run, thread_context *context, const vm_thread_info *info, int64_t now,
                                  bool *someone_on_cpu, bool at_end) {
  sampling_pass *pass = run->pass;
  if (own_threads_contains(run->muted, info->thread)) {
    skip_muted_thread(context, now);
    return;
  }
  // CPU time goes with the wall sample only for a thread without a CPU
  // timer (no-signals mode, a refused timer): the CPU used since its
  // previous sample, charged to the stack it has now. Else the clock (a
  // system call, about 0.5 us) only tells whether the thread ran since,
  // where GVL acquisitions do not: not needed for the thread that holds
  // the GVL now, whose stack is read whatever it says and never kept for
  // the next pass.
  bool cpu_from_pass = context->timer == 0;
  bool needs_clock = cpu_from_pass || (!info->has_gvl_acquisitions && info->state != VM_THREAD_RUNNING);
  int64_t cpu = needs_clock ? cpu_now(context) : -1;
  bool marker_known = info->has_gvl_acquisitions || cpu >= 0;
  uint64_t run_marker = info->has_gvl_acquisitions ? info->gvl_acquisitions : (uint64_t)cpu;
  recorder *rec = recorder_slots_active(run->slots);
  uint32_t stack_id, thread_index;
  if (!at_end && marker_known && defer_wall_sample(run, context, info, run_marker, rec, now)) return;
  credit_wait_until_resume(run, context, info, rec);
  credit_deferred_wait(run, context, info, rec);
  stack_result found = wall_stack_for(run, context, info, run_marker, marker_known, rec, &stack_id);
  if (found != STACK_KEPT) pass->nothing_ran = false;
  vm_thread_info ended;
  if (found == STACK_EMPTY && at_end && ended_on_previous_stack(context, info, rec, &ended)) {
    info = &ended;
    stack_id = context->sampling.stack_id;
    found = STACK_KEPT;
  }
  // No frame to show: no sample; its time stays for the next one.
  if (found == STACK_EMPTY) return;
  // Read with the stack, which may be kept for the next pass with them.
  bool from_holder = uses_holder_capture(pass, info);
  uint32_t label_set;
  trace_context trace;
  if (from_holder) {
    label_set = pass->holder_label_set;
    trace = pass->holder_trace;
  } else if (found == STACK_KEPT) {
    label_set = context->sampling.label_set;
    trace = context->sampling.trace;
  } else {
    label_set = labels_of_thread(info->thread);
    labels_trace_of_thread(info->thread, &trace);
  }
  context->sampling.label_set = label_set;
  context->sampling.trace = trace;
  if (found == STACK_NO_MEMORY || !thread_context_recorder_index(context, rec, &thread_index)) {
    pass->dropped_samples++;
    return;
  }
  int64_t cpu_delta = 0;
  if (cpu_from_pass) {
    bool counted_before = context->sampling.sampled || context->timer_deferred;
    int64_t cpu_before = counted_before ? context->sampling.cpu_ns_at_previous_sample : 0;
    cpu_delta = (cpu >= 0 && cpu_before >= 0 && cpu >= cpu_before) ? cpu - cpu_before : 0;
    cpu_delta = thread_context_deduct_gc_cpu(context, cpu_delta);
    context->sampling.cpu_ns_at_previous_sample = cpu;
    // From here its timer counts (a thread met at birth, charged up to
    // now), unless it is ending: what is left is charged at its end.
    if (cpu >= 0 && !at_end) arm_deferred_timer(run, context, cpu);
  }
  wall_split split = split_wall_time(context, info, clamp_delta(now, context->sampling.wall_ns_at_previous_sample));
  // GC runs holding the GVL: its time is part of "holding" where GVL times
  // tell that part apart, else of the state now.
  split.holding = thread_context_deduct_gc_wall(context, split.holding);
  int64_t *now_part = part_for_state(&split, info->state);
  *now_part = thread_context_deduct_gc_wall(context, *now_part);
  context->sampling.wall_ns_at_previous_sample = now;
  context->sampling.sampled = true;
  context->sampling.epoch_last_seen = pass->epoch;
  // The passes that deferred this sample (none credited a wait since): it
  // covers their time, and counts as their samples would have.
  int64_t wall_samples_now = 1 + (int64_t)context->sampling.passes_deferred;
  context->sampling.passes_deferred = 0;

  bool on_cpu = info->state == VM_THREAD_RUNNING;
  if (on_cpu) {
    *someone_on_cpu = true;
    gc_source_note_running_thread(run->gc, context->native_tid);
  }

  // One sample per part, all on the stack the thread has now. The sample
  // count goes with the state the thread is in now; pass-charged CPU time
  // with the part that held the GVL when there is one (threads burn CPU
  // there), else with the state now (C code burning CPU without the GVL).
  vm_thread_state off_state = info->has_gvl_times ? info->off_gvl_state : info->state;
  context->sampling.off_state_at_previous_sample = (uint8_t)off_state;
  int64_t *cpu_part = split.holding > 0 ? &split.holding : now_part;
  struct {
    vm_thread_state state;
    int64_t *wall;
  } parts[] = {
      {VM_THREAD_RUNNING, &split.holding},
      {VM_THREAD_WAITING_FOR_GVL, &split.waiting},
      {off_state, &split.off},
  };
  enum { PART_COUNT = sizeof(parts) / sizeof(parts[0]) };
  _Static_assert(PART_COUNT ==
                     sizeof(context->sampling.wall_sample_hints) / sizeof(context->sampling.wall_sample_hints[0]),
                 "one sample hint per part");
  // On the timeline the parts tile the time up to now, the part of the
  // state the thread is in now last: GVL times say how long each state
  // lasted, not when, and the state now is the one that lasts until now.
  int64_t ended_ns[PART_COUNT];
  int64_t tile_end = now - split.holding - split.waiting - split.off;
  for (size_t i = 0; i < PART_COUNT; i++) {
    if (parts[i].wall == now_part) continue;
    tile_end += *parts[i].wall;
    ended_ns[i] = tile_end;
  }
  for (size_t i = 0; i < PART_COUNT; i++) {
    if (parts[i].wall == now_part) ended_ns[i] = now;
  }
  for (size_t i = 0; i < PART_COUNT; i++) {
    bool is_now = parts[i].wall == now_part, is_cpu = cpu_from_pass && parts[i].wall == cpu_part;
    if (*parts[i].wall == 0 && !is_now && !is_cpu) continue;
    int64_t values[RECORDER_VALUE_COUNT] = {
        [RECORDER_CPU_TIME_NS] = is_cpu ? cpu_delta : 0,
        [RECORDER_CPU_SAMPLES] = cpu_from_pass && is_now && on_cpu ? 1 : 0,
        [RECORDER_WALL_TIME_NS] = *parts[i].wall,
        [RECORDER_WALL_SAMPLES] = is_now ? wall_samples_now : 0,
        [RECORDER_GVL_WAIT_NS] = info->has_gvl_times && parts[i].wall == &split.waiting ? split.waiting : 0,
    };
    recorder_context sample_context = {.thread_index = thread_index, .state = (uint8_t)parts[i].state,
                                       .label_set = label_set, .trace = trace, .at_ns = ended_ns[i]};
    if (recorder_add_hinted(rec, stack_id, &sample_context, values, &context->sampling.wall_sample_hints[i]) != 0) {
      pass->dropped_samples++;
      return;
    }
    if (values[RECORDER_CPU_SAMPLES]) pass->cpu_samples++;
  }
  pass->thread_samples += (uint64_t)wall_samples_now;
}

// ---------------------------------------------------------------------------
// Passes.

// A catch-up pass (flush, stop) runs on the thread that flushes or stops,
// whose stack is Sonde's own call: its time since a recent sample (the
// ticks came) is left for the next pass, as before a flush, rather than
// put on that call; after a long wait it is taken, up to now. A wait of
// its that passes deferred is credited first (up to its resume on 3.3+,
// else up to the last pass that found it waiting): what is left since is
// that call.
static bool leave_to_the_ticks(sonde_run *run, thread_context *context, const vm_thread_info *info, int64_t now) {
  if (run->pass->origin != PASS_CATCH_UP || info->state != VM_THREAD_RUNNING) return false;
  // A muted thread (a live capture's own request) records nothing: its
  // sample is skipped, and no wait is credited for it either.
  if (own_threads_contains(run->muted, info->thread)) return false;
  recorder *rec = recorder_slots_active(run->slots);
  credit_wait_until_resume(run, context, info, rec);
  credit_deferred_wait(run, context, info, rec);
  return now - context->sampling.wall_ns_at_previous_sample < CATCH_UP_AFTER_INTERVALS * run->settings.interval_ns;
}

// Where a thread's first wall sample starts: the previous pass, or its
// birth when it came after (3.3+: its GVL times count from its birth), so
// that a thread born while the trigger was parked is not sampled as older.
static int64_t wall_start_of(const sampling_pass *pass, const vm_thread_info *info, int64_t now, bool born_in_run) {
  if (!born_in_run || !info->has_gvl_times) return pass->previous_pass_ns;
  const vm_gvl_times *lived = &info->gvl_times;
  int64_t birth = now - lived->holding_gvl_ns - lived->waiting_for_gvl_ns - lived->off_gvl_ns;
  return birth > pass->previous_pass_ns ? birth : pass->previous_pass_ns;
}

static VALUE full_pass_protected(VALUE arg) {
  sonde_run *run = (sonde_run *)arg;
  sampling_pass *pass = run->pass;
  if (pass->fail_next) {
    pass->fail_next = false;
    rb_raise(rb_eRuntimeError, "sampling failure forced by Sonde::Native::Testing.fail_next_sample (a test hook)");
  }
  scheduler_restart_idle_helper_if_gone(run->scheduler);
  pass->epoch = vm_begin_pass();
  pass->resumes_at_start = vm_gvl_resumes_from_any_thread();
  pass->nothing_ran = true;
  pass->threads_deferred = 0;
  int64_t now = clocks_monotonic_ns();
  list_threads(run, now);
  thread_contexts_begin_pass(run->contexts);
  pass->forgot_while_meeting = false;
  // Where no thread-begin hook meets threads (vm_exits_count_unmet_threads),
  // a thread the pass meets for the first time was born in the run (the
  // baseline met those before it): counted from its birth, as the hook
  // would have.
  bool born_in_run = vm_exits_count_unmet_threads();
  for (size_t i = 0; i < pass->thread_count; i++) {
    const vm_thread_info *info = &pass->threads[i];
    pass->contexts[i] = meet_thread(run, info, wall_start_of(pass, info, now, born_in_run), born_in_run);
    if (pass->contexts[i] == NULL) pass->dropped_samples++;
    if (info->state == VM_THREAD_RUNNING) gc_source_note_running_thread(run->gc, info->native_tid);
  }
  // CPU samples first: the threads they name were just met, and they say
  // who ran (and so who ran the GC, where GC time is polled). The holder's
  // stack at the tick comes with them. Then the GC time, which the wall
  // samples below are cut by.
  pass->holder_tid = 0;
  uint64_t cpu_samples_before = pass->cpu_samples;
  drain_captures(run, DRAIN_IN_PASS);
  if (pass->cpu_samples != cpu_samples_before) pass->nothing_ran = false; // a thread burned CPU
  record_teardown_cpu(run);
  if (!gc_source_record_pending(run, true)) pass->dropped_samples++;
  bool someone_on_cpu = false;
  // Recording CPU and GC samples forgets no context: those met stand.
  for (size_t i = 0; i < pass->thread_count; i++) {
    const vm_thread_info *info = &pass->threads[i];
    thread_context *context = pass->forgot_while_meeting ? thread_contexts_find_by_handle(run->contexts, info->handle)
                                                         : pass->contexts[i];
    if (context != NULL && !leave_to_the_ticks(run, context, info, now)) {
      sample_wall_of_thread(run, context, info, now, &someone_on_cpu, false);
    }
  }
  pass->holder_tid = 0;
  thread_contexts_forget_unseen(run->contexts, disarm_timer_of, run);
  pass->previous_pass_ns = now;
  return Qnil;
}

// The application must not notice a failure of ours beyond this warning.
static void stop_after_failure(sonde_run *run) {
  VALUE exception = rb_errinfo();
  rb_set_errinfo(Qnil);
  run->pass->failure = exception;
  scheduler_request_stop(run->scheduler);
  if (run->timers != NULL) cpu_timers_disarm_all(run->timers);

  // Named from the exception's class and message fields: no method call
  // here either (see the top of the file).
  VALUE class_name = RB_SPECIAL_CONST_P(exception) ? Qnil : rb_class_name(rb_obj_class(exception));
  VALUE message = RB_SPECIAL_CONST_P(exception) ? Qnil : rb_attr_get(exception, rb_intern("mesg"));
  fprintf(stderr, "sonde: sampling failed, so profiling stopped (the application goes on): %.*s: %.*s\n",
          RB_TYPE_P(class_name, T_STRING) ? (int)RSTRING_LEN(class_name) : 7,
          RB_TYPE_P(class_name, T_STRING) ? RSTRING_PTR(class_name) : "unknown",
          RB_TYPE_P(message, T_STRING) ? (int)RSTRING_LEN(message) : 0,
          RB_TYPE_P(message, T_STRING) ? RSTRING_PTR(message) : "");
}

// Allocation samples are the alloc source's to record: outside any pass
// (a pass that called into Ruby may be under way on this thread), never
// charged to the overhead budget.
static void record_allocations(sonde_run *run, bool keep_unmet) {
  if (run->pass->in_progress || scheduler_stopping(run->scheduler)) return;
  alloc_source_record_captures(run, keep_unmet);
}

static void record_pass_time(sampling_pass *pass, int64_t elapsed) {
  pass->ns_total += elapsed;
  if (pass->ns_min == 0 || elapsed < pass->ns_min) pass->ns_min = elapsed;
  if (elapsed > pass->ns_max) pass->ns_max = elapsed;
  duration_histogram_add(&pass->pass_times, elapsed);
}

// A pass calls into Ruby (listing and naming threads), and Ruby runs pending
// interrupts on the way back from such calls: this very postponed job, or a
// switch to another thread whose job or the idle helper then samples. A
// pass started inside another would refill the thread list the outer pass
// is walking. The pass in progress covers that tick, so the second one
// returns at once.
void sampling_pass_run_with_gvl(sonde_run *run, pass_origin origin) {
  sampling_pass *pass = run->pass;
  if (scheduler_stopping(run->scheduler) || pass->in_progress) return;
  pass->in_progress = true;
  pacing *pace = scheduler_pacing(run->scheduler);
  // The CPU clock is a system call: read only for passes expected to be costly (pacing.h).
  bool timed_by_cpu = pacing_wants_cpu_time(pace);
  int64_t started_cpu = timed_by_cpu ? clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID) : -1;
  int64_t started = clocks_monotonic_ns();
  int raised = 0;
  pass->origin = origin;
  rb_protect(full_pass_protected, (VALUE)run, &raised);
  pass->in_progress = false;
  if (raised) stop_after_failure(run);
  int64_t cost = clocks_monotonic_ns() - started;
  int64_t cpu_cost = -1;
  if (timed_by_cpu && started_cpu >= 0) {
    int64_t ended_cpu = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    if (ended_cpu >= started_cpu) cpu_cost = ended_cpu - started_cpu;
  }
  record_pass_time(pass, cost);
  pacing_record_cost(pace, pacing_cost_to_charge(pace, cost, cpu_cost));
  pass->passes++;
  if (origin == PASS_FROM_IDLE_HELPER) pass->idle_passes++;
  if (origin == PASS_CATCH_UP) pass->catch_up_passes++;
  // Quiet: nobody held the GVL at the tick, and no thread ran since the
  // previous pass. The trigger may then park (or back off) until one does.
  bool quiet = origin == PASS_FROM_IDLE_HELPER && !raised && pass->nothing_ran;
  if (quiet) pass->quiet_passes++;
  if (origin != PASS_CATCH_UP) scheduler_note_pass_verdict(run->scheduler, quiet, pass->resumes_at_start);
  // A catch-up pass is no tick: the flush or stop that runs it records the
  // allocations and checks the heap itself, right after.
  if (origin == PASS_CATCH_UP) return;
  // Every living thread was just met: allocation samples still waiting are
  // of threads that ended. Recorded outside the pass's timing, so that
  // sampling allocations never slows the wall ticks down (pacing.h).
  record_allocations(run, false);
  if (!scheduler_stopping(run->scheduler)) alloc_source_after_tick(run);
}

static VALUE drain_protected(VALUE arg) {
  drain_captures((sonde_run *)arg, DRAIN_CPU_ONLY);
  return Qnil;
}

// CPU samples between ticks: recorded now, so the buffer does not fill up
// while a thread burns CPU and no tick comes (a paced-down rate).
static void drain_with_gvl(sonde_run *run) {
  sampling_pass *pass = run->pass;
  if (scheduler_stopping(run->scheduler) || pass->in_progress) return;
  pass->in_progress = true;
  int64_t started = clocks_monotonic_ns();
  int raised = 0;
  rb_protect(drain_protected, (VALUE)run, &raised);
  pass->in_progress = false;
  if (raised) stop_after_failure(run);
  pacing_record_extra_cost(scheduler_pacing(run->scheduler), clocks_monotonic_ns() - started);
}

// The one postponed job: the SIGPROF handler queues it on the thread that
// holds the GVL, which runs it at its next safe point (so does the
// allocation hook, for the samples it took).
//
// Ruby runs a postponed job on the thread whose handler triggered it, and
// a handler triggers it only on the main Ractor's GVL holder; should it run
// on another Ractor's thread anyway, that thread holds only its own
// Ractor's GVL while the main Ractor's threads run: it returns, and the
// tick and captures wait for the main Ractor's next pass.
static void sampling_job(void *unused) {
  sonde_run *run = run_active();
  if (run == NULL || !vm_on_main_ractor()) return;
  record_allocations(run, true);
  if (scheduler_take_tick(run->scheduler)) {
    sampling_pass_run_with_gvl(run, PASS_FROM_TICK);
  } else {
    drain_with_gvl(run);
  }
}

static VALUE end_thread_protected(VALUE arg) {
  sonde_run *run = (sonde_run *)arg;
  vm_thread_info info;
  if (!vm_current_thread_info(&info)) return Qnil;
  thread_context *context = thread_contexts_find_by_handle(run->contexts, info.handle);
  if (context == NULL && vm_exits_count_unmet_threads()) {
    // 3.3+: a thread no pass met, with a name, labels or a trace context
    // (sampling_pass_end_current_thread left the others to their EXITED):
    // met now, as at its birth, so that its CPU since then is recorded
    // below in its name and with its labels.
    context = meet_thread(run, &info, clocks_monotonic_ns(), true);
  }
  if (context == NULL || context->native_tid != info.native_tid) return Qnil;
  // Its CPU samples still waiting are recorded while it has its name, the
  // one it may have given itself since the last pass: info, read just now,
  // has it. (Ruby runs the hooks of one event latest-enabled first: this
  // one runs before the 3.3 backend's, which drops the thread from its
  // registry, names and all.)
  thread_contexts_refresh_name(context, &info);
  drain_captures(run, DRAIN_CPU_ONLY);
  // So is a GC it ran since the last pass: recorded later, its thread
  // would be known by its tid alone ("thread 9742").
  if (!gc_source_record_pending(run, true)) run->pass->dropped_samples++;
  // And its wall time since its previous sample, when the trigger parked
  // or backed off since (no pass will meet it again): its wait on the
  // stack it waited on (3.3+), the rest on the stack it ends on.
  int64_t now = clocks_monotonic_ns();
  if (now - context->sampling.wall_ns_at_previous_sample >= CATCH_UP_AFTER_INTERVALS * run->settings.interval_ns) {
    bool on_cpu;
    sample_wall_of_thread(run, context, &info, now, &on_cpu, true);
  }
  int64_t clock;
  record_uncovered_cpu(run, context, finish_cpu_of(run, context, true, &clock), true);
  // A signal that came during this hook (its timer is deleted now, and no
  // handler is still inside) left a capture whose stack is read at the
  // pass: the pass would no longer find its thread.
  drain_captures(run, DRAIN_CPU_ONLY);
  // Its teardown, still to come, is counted from here (3.3+).
  bool profiled = !own_threads_contains(run->own, context->thread) && !own_threads_contains(run->muted, context->thread);
  if (clock >= 0 && profiled) vm_note_current_thread_end_cpu(clock);
  thread_contexts_forget(run->contexts, context, NULL, NULL);
  run->pass->threads_ended++;
  return Qnil;
}

// Whether the calling thread carries something of its own that "(ended
// threads)" would lose: a name, labels, a trace context.
static bool current_thread_has_own_attribution(void) {
  VALUE thread = rb_thread_current();
  if (RB_TYPE_P(vm_current_thread_name(), T_STRING) || labels_of_thread(thread) != 0) return true;
  trace_context trace;
  labels_trace_of_thread(thread, &trace);
  return trace_context_is_set(&trace);
}

// 3.3+: a thread that no pass met and that has nothing of its own to keep
// needs nothing here: its EXITED counts its whole CPU (vm.h). Most threads
// of a churning program are such; the work below (a CPU clock read, a
// sample) was most of what Sonde added to each (issue 23).
static bool left_to_its_exit(sonde_run *run) {
  return vm_exits_count_unmet_threads() &&
         thread_contexts_find_by_handle(run->contexts, vm_current_thread_handle()) == NULL &&
         !current_thread_has_own_attribution();
}

void sampling_pass_end_current_thread(sonde_run *run) {
  sampling_pass *pass = run->pass;
  if (pass->in_progress || scheduler_stopping(run->scheduler) || left_to_its_exit(run)) return;
  pass->in_progress = true;
  int raised = 0;
  rb_protect(end_thread_protected, (VALUE)run, &raised);
  pass->in_progress = false;
  if (raised) stop_after_failure(run);
  // Not charged to the overhead budget, like the thread-begin hook: its
  // cost goes with the threads made, and stretching the ticks would not
  // lessen it (charged, 20,000 threads a second held passes off for 0.7 s).
}

void sampling_pass_run_from_idle_helper(sonde_run *run) { sampling_pass_run_with_gvl(run, PASS_FROM_IDLE_HELPER); }

void sampling_pass_prepare_job(void) {
  // A failure shows in Sonde.stats as jobs_not_queued: the profile stays empty, the app runs on.
  vm_postponed_job_prepare(sampling_job);
}

// Not when the ticks' last pass is recent (a pass costs what it costs, and
// the next tick covers the little time since). But after a rest, and also
// when the overhead budget paced the ticks down: with passes seconds apart,
// skipping this one left every thread's time since the last pass out of
// the profile (500 threads parked 100 deep, 4 s at a 1% budget: 0.04 s of
// wall time each, of 4.0). And whenever the latest pass deferred a
// thread's sample: that time is in no sample yet. One pass per flush or
// stop, charged like any.
void sampling_pass_catch_up_with_gvl(sonde_run *run) {
  if (scheduler_stopping(run->scheduler) || run->pass->in_progress) return;
  bool stale = clocks_monotonic_ns() - run->pass->previous_pass_ns >=
               CATCH_UP_AFTER_INTERVALS * run->settings.interval_ns;
  if (!stale && !scheduler_rested_since_busy_pass(run->scheduler) && run->pass->threads_deferred == 0) return;
  sampling_pass_run_with_gvl(run, PASS_CATCH_UP);
}

void sampling_pass_record_captures(sonde_run *run, bool final) {
  if (!gc_source_record_pending(run, false)) run->pass->dropped_samples++;
  drain_captures(run, final ? DRAIN_FINAL : DRAIN_CPU_ONLY);
  record_teardown_cpu(run);
  if (final) {
    alloc_source_close_window(run);
  } else {
    alloc_source_record_captures(run, true);
  }
}

// ---------------------------------------------------------------------------
// Stats.

void sampling_pass_add_stats(const sonde_run *run, VALUE stats) {
  const sampling_pass *pass = run->pass;
  stats_put_count(stats, "samples", pass->passes);
  stats_put_count(stats, "idle_samples", pass->idle_passes);
  stats_put_count(stats, "cpu_samples", pass->cpu_samples);
  stats_put_count(stats, "thread_samples", pass->thread_samples);
  stats_put_count(stats, "dropped_samples", pass->dropped_samples);
  stats_put_count(stats, "stacks_reused", pass->stacks_reused);
  stats_put_count(stats, "unattributed_cpu_samples", pass->unattributed);
  stats_put_signed(stats, "sampling_time_ns_total", pass->ns_total);
  stats_put_signed(stats, "sampling_time_ns_min", pass->ns_min);
  stats_put_signed(stats, "sampling_time_ns_max", pass->ns_max);
  stats_put_signed(stats, "sampling_time_ns_avg", pass->passes ? pass->ns_total / (int64_t)pass->passes : 0);
  stats_put_signed(stats, "sampling_time_ns_p50", duration_histogram_quantile(&pass->pass_times, 0.5));
  stats_put_signed(stats, "sampling_time_ns_p90", duration_histogram_quantile(&pass->pass_times, 0.9));
  stats_put_signed(stats, "sampling_time_ns_p99", duration_histogram_quantile(&pass->pass_times, 0.99));
  stats_put_count(stats, "threads_tracked", thread_contexts_count(run->contexts));
  stats_put_count(stats, "threads_ended", pass->threads_ended);
  stats_put_count(stats, "cpu_remainder_samples", pass->cpu_remainders);
  stats_put_signed(stats, "cpu_remainder_ns", pass->cpu_remainder_ns);
  stats_put_count(stats, "ended_threads_merged", pass->ended_threads_merged);
  stats_put_count(stats, "teardown_cpu_threads", pass->teardown_threads);
  stats_put_signed(stats, "teardown_cpu_ns", pass->teardown_cpu_ns);
  stats_put_signed(stats, "native_exit_cpu_ns", pass->native_exit_cpu_ns);
  stats_put_count(stats, "unmet_ended_threads", pass->unmet_ended_threads);
  stats_put_signed(stats, "unmet_ended_cpu_ns", pass->unmet_ended_cpu_ns);
  stats_put_count(stats, "quiet_samples", pass->quiet_passes);
  stats_put_count(stats, "waits_credited", pass->waits_credited);
  stats_put_count(stats, "catch_up_samples", pass->catch_up_passes);
  stats_put_count(stats, "wall_samples_deferred", pass->wall_samples_deferred);
}
