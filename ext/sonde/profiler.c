// profiler.c: the Ruby-facing side of the core: Sonde::Native's start,
// stop, flush, stats. Builds a run out of its parts (run.h), starts its
// event sources in order, and takes it apart again at stop, turning what
// the recorder gathered into a profile.
//
// Runs with the GVL, on application threads that call Sonde's API (and at
// process exit, from an end proc). Every argument is validated by the Ruby
// side; this file checks types again only where a wrong one could crash,
// and allocates native memory only after everything that can raise has
// been fetched.
#include "profiler.h"

#include <stdio.h>
#include <string.h>

#include "alloc_source.h"
#include "capture_buffer.h"
#include "clocks.h"
#include "cpu_timer_source.h"
#include "cpu_timers.h"
#include "event_source.h"
#include "exit_cpu.h"
#include "gc_source.h"
#include "own_threads.h"
#include "profile_export.h"
#include "ractor_accounting.h"
#include "recorder_slots.h"
#include "run.h"
#include "sample_constants.h"
#include "sampling_pass.h"
#include "scheduler.h"
#include "signal_sampler.h"
#include "signals.h"
#include "stacks.h"
#include "stats.h"
#include "thread_contexts.h"
#include "trigger_park.h"
#include "vm.h"

#define ERROR_SIZE 1024

// The event sources, in start order; they stop in reverse. The wall ticks
// come last: they start sampling, so everything else must be ready.
static const event_source *const SOURCES[] = {&gc_event_source, &cpu_timer_source, &alloc_event_source,
                                              &wall_tick_source};
#define SOURCE_COUNT (sizeof(SOURCES) / sizeof(SOURCES[0]))

// What the signal handler may buffer: this many captures of max_frames
// frames each, within a memory budget (a buffer drained at every pass
// holds a few; pages never written cost nothing).
#define CAPTURE_SLOTS_MAX 128
#define CAPTURE_SLOTS_MIN 16
#define CAPTURE_BUDGET_BYTES (4 * 1024 * 1024)

// The timeline's bound per period and recorder: 40-byte entries, so at
// most 10 MB each. A thread busy at 100 Hz logs about 200 to 400 entries
// a second (a CPU sample and one to three wall parts per tick), 0.5 to
// 1 MB a minute; an idle one, a wall sample per pass it is seen in.
// Past the bound the oldest entries give way (stats: timeline_dropped).
#define TIMELINE_ENTRIES_PER_PERIOD 250000

typedef struct {
  sonde_run run;
  own_threads own;
  own_threads muted;
  size_t sources_started;
  bool handler_installed;
  bool vm_run_begun;
  bool halted; // sampling is over (stop, or process exit); the profile is still to be taken
  ractor_accounting ractors; // what the profile leaves out of other Ractors
} profiler_state;

// Holds the running profiler so that the GC marks what it refers to: the
// frames in the recorders and the capture buffer (kept from being freed or
// moved), Sonde's threads, the failure. Only the one in the registered
// global is ever live.
static VALUE profiler_holder = Qnil;

static void mark_frame(uint64_t frame_id, void *unused) { stacks_mark(frame_id); }

static void mark_object_class(uint64_t object_class) {
  if (object_class > SAMPLE_CLASS_LAST_SENTINEL) rb_gc_mark((VALUE)object_class);
}

static void mark_profiler(void *data) {
  profiler_state *state = data;
  if (state == NULL) return;
  sonde_run *run = &state->run;
  recorder_slots_each_frame(run->slots, stacks_mark);
  // Only allocation and heap samples have classes: other runs skip the walk.
  if (run->alloc != NULL) recorder_slots_each_object_class(run->slots, mark_object_class);
  if (run->captures != NULL) capture_buffer_each_published_frame(run->captures, mark_frame, NULL);
  thread_contexts_mark(run->contexts);
  own_threads_mark(run->own);
  own_threads_mark(run->muted);
  sampling_pass_mark(run->pass);
  for (size_t i = 0; i < SOURCE_COUNT; i++) SOURCES[i]->mark(run);
}

static void disarm_forgotten(thread_context *context, void *data, bool clock_is_its_own) {
  cpu_timers *timers = data;
  if (timers != NULL && context->timer != 0) cpu_timers_disarm(timers, context->timer);
}

// Only once sampling is halted: no handler, hook or thread of the run is left.
static void free_profiler(profiler_state *state) {
  if (state == NULL) return;
  sonde_run *run = &state->run;
  thread_contexts_free(run->contexts, disarm_forgotten, run->timers);
  recorder_slots_free(run->slots);
  sampling_pass_free(run->pass);
  gc_source_free(run->gc);
  alloc_source_free(run->alloc);
  exit_cpu_free(run->exits);
  scheduler_free(run->scheduler);
  cpu_timers_free(run->timers);
  capture_buffer_free(run->captures);
  free(state);
}

static void free_holder(void *data) {
  // Never free a profiler that may still be sampling (the holder is only
  // collected at exit, or after stop detached it).
  profiler_state *state = data;
  if (state != NULL && !state->halted) return;
  free_profiler(state);
}

static const rb_data_type_t holder_type = {
    .wrap_struct_name = "Sonde::Native::Profiler",
    .function = {.dmark = mark_profiler, .dfree = free_holder},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static profiler_state *current_state(void) {
  return NIL_P(profiler_holder) ? NULL : RTYPEDDATA_DATA(profiler_holder);
}

static VALUE error_class(const char *name) {
  return rb_const_get(rb_const_get(rb_cObject, rb_intern("Sonde")), rb_intern(name));
}

static uint32_t capture_slot_count(uint32_t max_frames) {
  size_t slot_bytes = (size_t)max_frames * (sizeof(uint64_t) + sizeof(int32_t));
  size_t slots = CAPTURE_BUDGET_BYTES / (slot_bytes ? slot_bytes : 1);
  if (slots > CAPTURE_SLOTS_MAX) slots = CAPTURE_SLOTS_MAX;
  if (slots < CAPTURE_SLOTS_MIN) slots = CAPTURE_SLOTS_MIN;
  return (uint32_t)slots;
}

static profiler_state *allocate_profiler(const run_settings *settings) {
  profiler_state *state = calloc(1, sizeof(*state));
  if (state == NULL) return NULL;
  sonde_run *run = &state->run;
  run->settings = *settings;
  run->start_monotonic_ns = clocks_monotonic_ns();
  run->start_epoch_ns = clocks_epoch_ns();
  own_threads_init(&state->own);
  run->own = &state->own;
  own_threads_init(&state->muted);
  run->muted = &state->muted;
  run->slots = recorder_slots_new(run->start_monotonic_ns, run->start_epoch_ns);
  run->contexts = thread_contexts_new();
  run->pass = sampling_pass_new(settings->max_frames);
  run->gc = gc_source_new(settings->record_gc);
  run->scheduler = scheduler_new(settings, run->start_monotonic_ns, sampling_pass_run_from_idle_helper);
  bool ok = run->slots && run->contexts && run->pass && run->gc && run->scheduler;
  if (settings->timeline && run->slots) ok = ok && recorder_slots_enable_timeline(run->slots, TIMELINE_ENTRIES_PER_PERIOD) == 0;
  if (settings->alloc_interval > 0) {
    run->alloc = alloc_source_new(settings);
    ok = ok && run->alloc;
  }
  if (settings->use_signals) {
    run->timers = cpu_timers_new(settings->interval_ns, (uint64_t)run->start_epoch_ns ^ (uint64_t)(uintptr_t)state);
    run->captures = capture_buffer_new(capture_slot_count(settings->max_frames), settings->max_frames);
    ok = ok && run->timers && run->captures;
  }
  if (!ok) {
    state->halted = true;
    free_profiler(state);
    return NULL;
  }
  return state;
}

// Testing.burn_at_stop's: CPU burnt on the calling thread's clock.
static void burn_for_testing(int64_t ns) {
  if (ns <= 0) return;
  int64_t until = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
  while (clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID) < until) {
  }
}

// Ends sampling, in the reverse order of start: sources stop (the trigger
// joined, every CPU timer deleted, hooks off), the handler is emptied and
// waited for, and the captures still buffered are recorded. After it, no
// thread, signal or hook touches the run. Idempotent.
static void halt_sampling(profiler_state *state) {
  if (state->halted) return;
  sonde_run *run = &state->run;
  sampling_pass_record_native_exit_cpu(run);
  scheduler_request_stop(run->scheduler);
  while (state->sources_started > 0) SOURCES[--state->sources_started]->stop(run);
  if (state->handler_installed) {
    signals_install_empty_handler();
    signals_wait_for_running_handlers();
    state->handler_installed = false;
  }
  sampling_pass_record_captures(run, true);
  if (state->vm_run_begun) vm_end_run();
  state->vm_run_begun = false;
  state->halted = true;
}

// Installs the handler, meets the threads, starts the sources. A failure of
// Sonde's own is a status, with why in error; a Ruby exception (or a
// Thread#kill) on the way unwinds through native_start, which cleans up.
static sonde_status start_sampling(profiler_state *state, char *error, size_t error_size) {
  sonde_run *run = &state->run;
  signal_sampler_reset_stats();
  ractor_accounting_start(&state->ractors);
  alloc_source_set_other_ractors(run, ractor_accounting_others_alive());
  vm_begin_run();
  state->vm_run_begun = true;
  run->exits = exit_cpu_start(); // NULL (nothing counted) on 3.1, or without /proc
  if (run->settings.use_signals) {
    // Before any CPU timer is armed: a timer's signal with no handler of
    // ours would kill the process.
    sonde_status status =
        signals_install_sampling_handler(signal_sampler_on_sigprof_inside_signal_handler, error, error_size);
    if (status != SONDE_OK) return status;
    state->handler_installed = true;
  }
  // The profile's period starts where the threads' wall time does: on a
  // loaded machine the setup above took up to 250 ms (3.3, 100 threads,
  // two busy cores), time no thread's samples cover.
  recorder_slots_move_first_start(run->slots, sampling_pass_baseline(run));
  for (size_t i = 0; i < SOURCE_COUNT; i++) {
    sonde_status status = SOURCES[i]->start(run, error, error_size);
    if (status != SONDE_OK) return status;
    state->sources_started = i + 1;
  }
  return SONDE_OK;
}

static const char *error_class_for(sonde_status status) {
  return status == SONDE_SIGNAL_CONFLICT ? "SignalConflictError" : "Error";
}

typedef struct {
  profiler_state *state;
  sonde_status status;
  char error[ERROR_SIZE];
} start_run;

static VALUE start_protected(VALUE arg) {
  start_run *start = (start_run *)arg;
  start->status = start_sampling(start->state, start->error, sizeof(start->error));
  return Qnil;
}

// settings[key], or ArgumentError naming the key: Options#native_settings
// always gives every key, so a missing one is a bug on the Ruby side.
static VALUE setting(VALUE settings, const char *key) {
  VALUE value = rb_hash_lookup2(settings, ID2SYM(rb_intern(key)), Qundef);
  if (value == Qundef) rb_raise(rb_eArgError, "sonde: Native.start settings lack :%s", key);
  return value;
}

static bool boolean_setting(VALUE settings, const char *key) {
  VALUE value = setting(settings, key);
  if (value != Qtrue && value != Qfalse) rb_raise(rb_eTypeError, "sonde: Native.start setting :%s must be true or false", key);
  return value == Qtrue;
}

// Native.start(settings) -> true. settings: the frozen Hash of
// Options#native_settings: {rate:, max_frames:, signals:, overhead_target:,
// gc:, alloc_interval: (0: allocations not sampled), heap:, alloc_duty:,
// timeline:},
// and optionally muted_thread: a Thread muted from the start (a live
// capture's request thread, which waits for the GVL inside this call).
static VALUE native_start(VALUE self, VALUE settings_hash) {
  Check_Type(settings_hash, T_HASH);
  if (!RB_OBJ_FROZEN(settings_hash)) rb_raise(rb_eArgError, "sonde: Native.start takes a frozen settings Hash");
  long rate_hz = NUM2LONG(setting(settings_hash, "rate"));
  long frames = NUM2LONG(setting(settings_hash, "max_frames"));
  double target = NUM2DBL(setting(settings_hash, "overhead_target"));
  bool use_signals = boolean_setting(settings_hash, "signals");
  bool record_gc = boolean_setting(settings_hash, "gc");
  long alloc_interval = NUM2LONG(setting(settings_hash, "alloc_interval"));
  bool heap = boolean_setting(settings_hash, "heap");
  double alloc_duty = NUM2DBL(setting(settings_hash, "alloc_duty"));
  bool timeline = boolean_setting(settings_hash, "timeline");
  if (rate_hz <= 0 || rate_hz > NANOS_PER_SECOND) rb_raise(rb_eArgError, "rate out of range");
  if (frames <= 0 || frames > UINT32_MAX - 1) rb_raise(rb_eArgError, "max_frames out of range: %ld", frames);
  if (!(target > 0 && target <= 100)) rb_raise(rb_eArgError, "overhead_target out of range");
  if (alloc_interval < 0 || alloc_interval > UINT32_MAX) rb_raise(rb_eArgError, "alloc_interval out of range");
  if (heap && alloc_interval == 0) rb_raise(rb_eArgError, "heap needs alloc_interval > 0");
  if (!(alloc_duty > 0 && alloc_duty <= 1)) rb_raise(rb_eArgError, "alloc_duty out of range");
  VALUE muted_thread = rb_hash_lookup2(settings_hash, ID2SYM(rb_intern("muted_thread")), Qnil);
  if (!NIL_P(muted_thread) && !rb_obj_is_kind_of(muted_thread, rb_cThread)) {
    rb_raise(rb_eTypeError, "sonde: Native.start setting :muted_thread must be a Thread or nil");
  }
  if (current_state() != NULL) rb_raise(error_class("StateError"), "Sonde is already running");
  run_settings settings = {
      .interval_ns = NANOS_PER_SECOND / rate_hz,
      .max_frames = (uint32_t)frames,
      .use_signals = use_signals,
      .record_gc = record_gc,
      .overhead_target_percent = target,
      .alloc_interval = (uint32_t)alloc_interval,
      .heap = heap,
      .alloc_duty = alloc_duty,
      .timeline = timeline,
  };

  VALUE holder = TypedData_Wrap_Struct(rb_cObject, &holder_type, NULL);
  profiler_state *state = allocate_profiler(&settings);
  if (state == NULL) rb_raise(rb_eNoMemError, "sonde: out of memory while starting");
  RTYPEDDATA_DATA(holder) = state;
  profiler_holder = holder;
  if (!NIL_P(muted_thread)) own_threads_add(&state->muted, muted_thread);
  run_set_active(&state->run);

  start_run start = {.state = state, .status = SONDE_OK};
  int raised = 0;
  rb_protect(start_protected, (VALUE)&start, &raised);
  if (raised || start.status != SONDE_OK) {
    halt_sampling(state);
    run_set_active(NULL);
    profiler_holder = Qnil;
    RTYPEDDATA_DATA(holder) = NULL;
    free_profiler(state);
    if (raised) rb_jump_tag(raised); // whatever it was (an exception, a Thread#kill) goes on
    rb_raise(error_class(error_class_for(start.status)), "%s", start.error);
  }
  return Qtrue;
}

static VALUE stats_hash(const profiler_state *state) {
  const sonde_run *run = &state->run;
  VALUE hash = rb_hash_new();
  sampling_pass_add_stats(run, hash);
  signal_sampler_add_stats(hash);
  for (size_t i = 0; i < SOURCE_COUNT; i++) SOURCES[i]->add_stats(run, hash);
  rb_hash_aset(hash, ID2SYM(rb_intern("flushes")), ULL2NUM(recorder_slots_flushes(run->slots)));
  rb_hash_aset(hash, ID2SYM(rb_intern("rate_hz")), LL2NUM(NANOS_PER_SECOND / run->settings.interval_ns));
  rb_hash_aset(hash, ID2SYM(rb_intern("max_frames")), ULONG2NUM(run->settings.max_frames));
  rb_hash_aset(hash, ID2SYM(rb_intern("signals")), run->settings.use_signals ? Qtrue : Qfalse);
  rb_hash_aset(hash, ID2SYM(rb_intern("gc")), run->settings.record_gc ? Qtrue : Qfalse);
  rb_hash_aset(hash, ID2SYM(rb_intern("overhead_target")), DBL2NUM(run->settings.overhead_target_percent));
  uint64_t timeline_logged, timeline_dropped;
  recorder_slots_timeline_counts(run->slots, &timeline_logged, &timeline_dropped);
  stats_put_count(hash, "timeline_samples", timeline_logged);
  stats_put_count(hash, "timeline_dropped", timeline_dropped);
  ractor_accounting_add_stats(&state->ractors, recorder_slots_active(run->slots), hash);
  return hash;
}

static VALUE period_result(profiler_state *state, const recorder_period *period, bool export, VALUE comments,
                           VALUE label_sets, bool final) {
  comments = ractor_accounting_end_period(&state->ractors, period->rec, comments, final);
  char alloc_note[320];
  if (alloc_source_end_profile(&state->run, recorder_total(period->rec, RECORDER_ALLOC_SAMPLES) > 0, alloc_note,
                               sizeof(alloc_note))) {
    comments = NIL_P(comments) ? rb_ary_new() : rb_ary_dup(comments);
    rb_ary_push(comments, rb_str_new_cstr(alloc_note));
  }
  profile_export_times times = {
      .start_epoch_ns = period->start_epoch_ns,
      .duration_ns = period->duration_ns,
      .period_ns = state->run.settings.interval_ns,
      .monotonic_to_epoch_ns = state->run.start_epoch_ns - state->run.start_monotonic_ns,
      .allocations = alloc_source_samples_allocations(&state->run),
      .heap = alloc_source_tracks_heap(&state->run),
  };
  VALUE result = rb_hash_new();
  rb_hash_aset(result, ID2SYM(rb_intern("stats")), stats_hash(state));
  rb_hash_aset(result, ID2SYM(rb_intern("failure")), sampling_pass_failure(state->run.pass));
  rb_hash_aset(result, ID2SYM(rb_intern("start_epoch_ns")), LL2NUM(times.start_epoch_ns));
  rb_hash_aset(result, ID2SYM(rb_intern("duration_ns")), LL2NUM(times.duration_ns));
  rb_hash_aset(result, ID2SYM(rb_intern("pprof")), export ? profile_export_pprof(period->rec, &times, comments, label_sets) : Qnil);
  return result;
}

// Native.stop(export, comments = nil, label_sets = nil) -> {pprof:, start_epoch_ns:, duration_ns:, stats:, failure:}
// The profile covers the time since the last flush (or the start). With
// export false, pprof is nil: the samples are dropped unencoded (a forked
// child discarding what it inherited from its parent). comments: nil or an
// Array of Strings, written into the profile's comments. label_sets: the
// Ruby side's label-set table (Sonde::Labels.table), or nil.
static VALUE native_stop(int argc, VALUE *argv, VALUE self) {
  VALUE export, comments, label_sets;
  rb_scan_args(argc, argv, "12", &export, &comments, &label_sets);
  profile_export_check_comments(comments); // before anything is halted
  profiler_state *state = current_state();
  if (state == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  // The heap as of the stop, checked while the source still runs (not for
  // a profile that is dropped unencoded: a forked child's).
  if (!state->halted && RTEST(export)) {
    // Every thread's time up to the stop, when the trigger parked or backed off.
    sampling_pass_catch_up_with_gvl(&state->run);
    alloc_source_set_other_ractors(&state->run, ractor_accounting_others_alive());
    alloc_source_record_heap(&state->run);
  }
  // The period ends where the threads' wall time does, before the
  // teardown (every CPU timer deleted, the trigger joined), which no
  // sample covers and which a loaded machine stretches.
  int64_t end = clocks_monotonic_ns();
  burn_for_testing(state->run.stop_burn_ns_for_testing);
  halt_sampling(state);
  run_set_active(NULL);
  // The halt records what came in meanwhile (a signal taken before the
  // handler went, the CPU of threads that ended): the period covers every
  // moment it holds, its end past the latest (OTLP's span excludes its end).
  int64_t latest = recorder_latest_moment_ns(recorder_slots_active(state->run.slots));
  if (latest >= end) end = latest + 1;

  // From here the run is ours alone: nothing samples into it.
  VALUE holder = profiler_holder;
  profiler_holder = Qnil;
  recorder_period period = recorder_slots_final_period(state->run.slots, end);
  VALUE result = period_result(state, &period, RTEST(export), comments, label_sets, true);
  // Free now rather than at the holder's collection: a profile can be large.
  RTYPEDDATA_DATA(holder) = NULL;
  free_profiler(state);
  RB_GC_GUARD(holder); // kept the frames marked until they were named
  return result;
}

typedef struct {
  profiler_state *state;
  recorder_period period;
  VALUE comments, label_sets;
} flush_run;

static VALUE export_flushed_period(VALUE arg) {
  flush_run *run = (flush_run *)arg;
  return period_result(run->state, &run->period, true, run->comments, run->label_sets, false);
}

static VALUE finish_flush(VALUE arg) {
  flush_run *run = (flush_run *)arg;
  recorder_slots_finish_flush(run->state->run.slots, run->period.rec);
  return Qnil;
}

// Native.flush(comments = nil, label_sets = nil) -> same as stop, for the period since the
// previous flush, while sampling goes on into the other recorder. The
// encoding runs with the GVL released (see profile_export.c).
static VALUE native_flush(int argc, VALUE *argv, VALUE self) {
  VALUE comments, label_sets;
  rb_scan_args(argc, argv, "02", &comments, &label_sets);
  profile_export_check_comments(comments);
  profiler_state *state = current_state();
  if (state == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  // The CPU samples captured so far belong to the period that ends now,
  // and so does every thread's time up to now (a parked trigger's included).
  if (!state->halted) {
    sampling_pass_catch_up_with_gvl(&state->run);
    sampling_pass_record_captures(&state->run, false);
    sampling_pass_record_native_exit_cpu(&state->run);
    // The allocations since the latest close are this period's: a period
    // spans windows until it heard enough, and must not leak into the
    // next profile (nor leave this one without any).
    alloc_source_close_window(&state->run);
    alloc_source_set_other_ractors(&state->run, ractor_accounting_others_alive());
    alloc_source_record_heap(&state->run);
  }
  // We hold the GVL, and every pass runs with it: no pass is half-way
  // through the recorder we take away.
  flush_run run = {.state = state, .comments = comments, .label_sets = label_sets};
  if (!recorder_slots_begin_flush(state->run.slots, clocks_monotonic_ns(), &run.period)) {
    rb_raise(error_class("StateError"), "a flush is already in progress");
  }
  return rb_ensure(export_flushed_period, (VALUE)&run, finish_flush, (VALUE)&run);
}

// Native.ractor_created: Ractor.new is about to run on the main Ractor
// (lib/sonde/ractor_guard.rb); counted for the stats and the profile's note.
static VALUE native_ractor_created(VALUE self) {
  profiler_state *state = current_state();
  if (state != NULL && !state->halted) {
    ractor_accounting_note_created(&state->ractors);
    alloc_source_set_other_ractors(&state->run, true);
  }
  return Qnil;
}

// Native.turn_off_allocations -> true when allocation sampling was on and
// is now off for the rest of the run (alloc_source_turn_off), else false.
static VALUE native_turn_off_allocations(VALUE self) {
  profiler_state *state = current_state();
  if (state == NULL || state->halted) return Qfalse;
  return alloc_source_turn_off(&state->run) ? Qtrue : Qfalse;
}

// Native.give_up_signals: the application is about to set its own SIGPROF
// disposition (trap("PROF")); no signal of Sonde's may reach it. Sampling
// goes on as in no-signals mode. A no-op when not sampling with signals.
static VALUE native_give_up_signals(VALUE self) {
  profiler_state *state = current_state();
  if (state == NULL || state->halted || !state->run.settings.use_signals ||
      scheduler_stopping(state->run.scheduler) || signals_sampling_handler_lost()) {
    return Qnil;
  }
  signals_give_up();
  // The CPU timers signal on their own: they go before this returns.
  if (state->run.timers != NULL) cpu_timers_disarm_all(state->run.timers);
  signals_warn_handler_lost();
  return Qnil;
}

// Native.ignore_thread(thread): one of Sonde's own threads, left out of
// profiles and of Thread.list.
static VALUE native_ignore_thread(VALUE self, VALUE thread) {
  profiler_state *state = current_state();
  if (state == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  if (!rb_obj_is_kind_of(thread, rb_cThread)) rb_raise(rb_eTypeError, "expected a Thread");
  return own_threads_add(&state->own, thread) ? Qtrue : Qfalse;
}

// Native.mute_thread(thread, muted): while muted, none of the thread's
// samples are recorded: wall, CPU, the GCs it runs, its allocations (its
// baselines still move on, so nothing is charged later). For the request thread of a live capture, which would otherwise
// be in the profile it answers, asleep under its own endpoint.
static VALUE native_mute_thread(VALUE self, VALUE thread, VALUE muted) {
  profiler_state *state = current_state();
  if (state == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  if (!rb_obj_is_kind_of(thread, rb_cThread)) rb_raise(rb_eTypeError, "expected a Thread");
  if (!RTEST(muted)) {
    own_threads_remove(&state->muted, thread);
    return Qtrue;
  }
  return own_threads_add(&state->muted, thread) ? Qtrue : Qfalse;
}

// Native.own_threads -> Sonde's own Ruby threads of the current run (the
// idle helper, the flusher, exporter threads): those Thread.list leaves out.
static VALUE native_own_threads(VALUE self) {
  profiler_state *state = current_state();
  VALUE threads = rb_ary_new();
  if (state == NULL) return threads;
  for (int i = 0; i < state->own.count; i++) rb_ary_push(threads, state->own.threads[i]);
  return threads;
}

// Native.running? -> true while sampling (false after stop or a failure)
static VALUE native_running_p(VALUE self) {
  profiler_state *state = current_state();
  return state != NULL && !state->halted && !scheduler_stopping(state->run.scheduler) ? Qtrue : Qfalse;
}

// Native.active? -> true from start to stop, failure or not
static VALUE native_active_p(VALUE self) { return current_state() != NULL ? Qtrue : Qfalse; }

// Native.stats -> Hash, or nil when not started
static VALUE native_stats(VALUE self) {
  profiler_state *state = current_state();
  return state == NULL ? Qnil : stats_hash(state);
}

// Native.failure -> the exception that stopped sampling, or nil
static VALUE native_failure(VALUE self) {
  profiler_state *state = current_state();
  return state == NULL ? Qnil : sampling_pass_failure(state->run.pass);
}

// At process exit, after the application's at_exit handlers (this end proc
// is registered when the core loads, before any of Sonde's Ruby at_exit
// handlers, so it runs after them): sampling ends while the VM is whole.
// The profile stays for a Sonde.stop that may still come.
static void halt_at_exit(VALUE unused) {
  profiler_state *state = current_state();
  if (state != NULL) halt_sampling(state);
}

// In a forked child (pthread_atfork, before any Ruby code): only the
// forking thread survives. Each source forgets what it had in other
// threads and in the kernel; Process._fork's hook then drops the run.
static void forget_run_after_fork(void) {
  signals_reset_in_forked_child();
  trigger_park_init(); // the parent's trigger may have been waiting on it
  vm_forget_after_fork();
  profiler_state *state = current_state();
  if (state == NULL) return;
  // Every source, started or not: the fork may have come while another
  // thread was inside start or stop, with a source's threads already (or
  // still) running but not counted. Their stop stays safe to call: the
  // child's Process._fork hook stops the run, which disables the hooks the
  // child's Ruby still has.
  for (size_t i = 0; i < SOURCE_COUNT; i++) SOURCES[i]->forget_after_fork(&state->run);
  scheduler_request_stop(state->run.scheduler);
}

void profiler_define_methods(VALUE native) {
  rb_gc_register_address(&profiler_holder);
  if (!trigger_park_init()) rb_raise(rb_eRuntimeError, "sonde: could not make the trigger's semaphore");
  pthread_atfork(NULL, NULL, forget_run_after_fork);
  signals_hold_sends_across_fork();
  rb_set_end_proc(halt_at_exit, Qnil);
  rb_define_module_function(native, "start", native_start, 1);
  rb_define_module_function(native, "stop", native_stop, -1);
  rb_define_module_function(native, "flush", native_flush, -1);
  rb_define_module_function(native, "ignore_thread", native_ignore_thread, 1);
  rb_define_module_function(native, "own_threads", native_own_threads, 0);
  rb_define_module_function(native, "mute_thread", native_mute_thread, 2);
  rb_define_module_function(native, "running?", native_running_p, 0);
  rb_define_module_function(native, "active?", native_active_p, 0);
  rb_define_module_function(native, "stats", native_stats, 0);
  rb_define_module_function(native, "failure", native_failure, 0);
  rb_define_module_function(native, "give_up_signals", native_give_up_signals, 0);
  rb_define_module_function(native, "turn_off_allocations", native_turn_off_allocations, 0);
  rb_define_module_function(native, "ractor_created", native_ractor_created, 0);
  // The sample-type, unit and label names profiles carry (profile_names.h).
  rb_define_const(native, "PROFILE_NAMES", profile_export_names());
}
