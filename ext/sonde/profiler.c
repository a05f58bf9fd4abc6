// profiler.c: the Ruby-facing side of the core: Sonde::Native's start, stop,
// stats and test hooks. Builds a profiler, hands it to the worker, and turns
// what the recorder gathered into a profile at stop.
//
// Runs with the GVL, on application threads that call Sonde's API. Every
// argument is validated by the Ruby side; this file checks types again only
// where a wrong one could crash, and allocates native memory only after
// everything that can raise has been fetched.
#include "profiler.h"

#include <stdio.h>
#include <string.h>

#include "clocks.h"
#include "profile_export.h"
#include "signals.h"
#include "stacks.h"
#include "thread_context.h"
#include "worker.h"

#define ERROR_SIZE 1024

// Holds the running profiler so that the GC marks what it refers to: the
// frames in the recorder (kept from being freed or moved), the profiler's
// threads, the failure. Only the one in the registered global is ever live.
static VALUE profiler_holder = Qnil;

static void mark_recorded_frames(const recorder *rec) {
  size_t count = recorder_location_count(rec);
  for (size_t i = 0; i < count; i++) stacks_mark(recorder_location(rec, i).frame_id);
}

static void mark_profiler(void *data) {
  sonde_profiler *profiler = data;
  if (profiler == NULL) return;
  // Both slots: the one being flushed still needs its frames named.
  for (int slot = 0; slot < RECORDER_SLOTS; slot++) {
    if (profiler->recorders[slot]) mark_recorded_frames(profiler->recorders[slot]);
  }
  thread_contexts_mark(profiler->contexts);
  rb_gc_mark(profiler->trigger_thread);
  rb_gc_mark(profiler->idle_thread);
  rb_gc_mark(profiler->failure);
  rb_gc_mark(profiler->gc_tracepoint);
  for (int i = 0; i < profiler->ignored_thread_count; i++) rb_gc_mark(profiler->ignored_threads[i]);
}

static void free_profiler(sonde_profiler *profiler) {
  if (profiler == NULL) return;
  for (int slot = 0; slot < RECORDER_SLOTS; slot++) recorder_free(profiler->recorders[slot]);
  thread_contexts_free(profiler->contexts);
  free(profiler->frame_buffer);
  free(profiler);
}

static void free_holder(void *data) {
  // Never free a profiler that may still be sampling (the holder is only
  // collected at exit, or after stop detached it).
  if (data != NULL && worker_active() == data) return;
  free_profiler(data);
}

static const rb_data_type_t holder_type = {
    .wrap_struct_name = "Sonde::Native::Profiler",
    .function = {.dmark = mark_profiler, .dfree = free_holder},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static sonde_profiler *current_profiler(void) {
  return NIL_P(profiler_holder) ? NULL : RTYPEDDATA_DATA(profiler_holder);
}

static VALUE error_class(const char *name) {
  return rb_const_get(rb_const_get(rb_cObject, rb_intern("Sonde")), rb_intern(name));
}

typedef struct {
  int64_t rate_hz;
  uint32_t max_frames;
  bool use_signals;
  double overhead_target_percent;
  bool record_gc;
} start_options;

static sonde_profiler *allocate_profiler(const start_options *options) {
  sonde_profiler *profiler = calloc(1, sizeof(*profiler));
  if (profiler == NULL) return NULL;
  profiler->interval_ns = NANOS_PER_SECOND / options->rate_hz;
  profiler->max_frames = options->max_frames;
  profiler->use_signals = options->use_signals;
  profiler->record_gc = options->record_gc;
  profiler->trigger_thread = Qnil;
  profiler->idle_thread = Qnil;
  profiler->failure = Qnil;
  profiler->gc_tracepoint = Qnil;
  bool recorders_ok = true;
  for (int slot = 0; slot < RECORDER_SLOTS; slot++) {
    profiler->recorders[slot] = recorder_new();
    recorders_ok = recorders_ok && profiler->recorders[slot] != NULL;
  }
  profiler->contexts = thread_contexts_new();
  profiler->frame_buffer = calloc((size_t)options->max_frames + 1, sizeof(recorder_frame));
  if (!recorders_ok || profiler->contexts == NULL || profiler->frame_buffer == NULL ||
      !worker_init_locks(profiler)) {
    free_profiler(profiler);
    return NULL;
  }
  return profiler;
}

// Native.start(rate_hz, max_frames, use_signals, overhead_target_percent, record_gc) -> true
static VALUE native_start(VALUE self, VALUE rate, VALUE max_frames, VALUE use_signals, VALUE overhead_target,
                          VALUE record_gc) {
  start_options options = {
      .rate_hz = NUM2LONG(rate),
      .use_signals = RTEST(use_signals),
      .overhead_target_percent = NUM2DBL(overhead_target),
      .record_gc = RTEST(record_gc),
  };
  long frames = NUM2LONG(max_frames);
  if (options.rate_hz <= 0 || options.rate_hz > NANOS_PER_SECOND) rb_raise(rb_eArgError, "rate out of range");
  if (frames <= 0 || frames > UINT32_MAX - 1) rb_raise(rb_eArgError, "max_frames out of range: %ld", frames);
  if (!(options.overhead_target_percent > 0 && options.overhead_target_percent <= 100)) {
    rb_raise(rb_eArgError, "overhead_target out of range");
  }
  options.max_frames = (uint32_t)frames;
  if (current_profiler() != NULL) rb_raise(error_class("StateError"), "Sonde is already running");

  VALUE holder = TypedData_Wrap_Struct(rb_cObject, &holder_type, NULL);
  sonde_profiler *profiler = allocate_profiler(&options);
  if (profiler == NULL) rb_raise(rb_eNoMemError, "sonde: out of memory while starting");
  RTYPEDDATA_DATA(holder) = profiler;
  profiler_holder = holder;

  profiler->start_monotonic_ns = clocks_monotonic_ns();
  profiler->start_epoch_ns = clocks_epoch_ns();
  profiler->period_start_monotonic_ns = profiler->start_monotonic_ns;
  profiler->period_start_epoch_ns = profiler->start_epoch_ns;
  pacing_init(&profiler->pace, profiler->interval_ns, options.overhead_target_percent, profiler->start_monotonic_ns);
  thread_contexts_baseline(profiler);

  char error[ERROR_SIZE] = "";
  if (!worker_start(profiler, error, sizeof(error))) {
    profiler_holder = Qnil;
    RTYPEDDATA_DATA(holder) = NULL;
    free_profiler(profiler);
    rb_raise(error_class(strstr(error, "SIGPROF handler is installed") ? "SignalConflictError" : "Error"), "%s",
             error);
  }
  return Qtrue;
}

static VALUE stats_hash(const sonde_profiler *profiler) {
  const sonde_stats *stats = &profiler->stats;
  VALUE hash = rb_hash_new();
#define PUT(key, value) rb_hash_aset(hash, ID2SYM(rb_intern(key)), LL2NUM((long long)(value)))
  PUT("samples", stats->samples);
  PUT("cpu_samples", stats->cpu_samples);
  PUT("idle_samples", stats->idle_samples);
  PUT("thread_samples", stats->thread_samples);
  PUT("dropped_samples", stats->dropped_samples);
  PUT("signals_sent", STATS_READ(profiler, signals_sent));
  PUT("signal_failures", STATS_READ(profiler, signal_failures));
  PUT("signals_received", STATS_READ(profiler, signals_received));
  PUT("wrong_thread_signals", STATS_READ(profiler, wrong_thread));
  PUT("jobs_not_queued", STATS_READ(profiler, jobs_not_queued));
  PUT("idle_requests", STATS_READ(profiler, idle_requests));
  PUT("sampling_time_ns_total", stats->sampling_ns_total);
  PUT("sampling_time_ns_min", stats->sampling_ns_min);
  PUT("sampling_time_ns_max", stats->sampling_ns_max);
  PUT("sampling_time_ns_avg", stats->samples ? stats->sampling_ns_total / (int64_t)stats->samples : 0);
  PUT("threads_tracked", profiler->contexts ? thread_contexts_count(profiler->contexts) : 0);
  PUT("pacing_delayed_ticks", pacing_delayed_ticks(&profiler->pace));
  PUT("pacing_charged_ns_total", pacing_charged_ns(&profiler->pace));
  PUT("gc_events", stats->gc_events);
  PUT("gc_samples", stats->gc_samples);
  PUT("flushes", stats->flushes);
  PUT("rate_hz", NANOS_PER_SECOND / profiler->interval_ns);
  PUT("max_frames", profiler->max_frames);
#undef PUT
  rb_hash_aset(hash, ID2SYM(rb_intern("signals")), profiler->use_signals ? Qtrue : Qfalse);
  rb_hash_aset(hash, ID2SYM(rb_intern("signal_handler_lost")),
               profiler->use_signals && signals_sampling_handler_lost() ? Qtrue : Qfalse);
  rb_hash_aset(hash, ID2SYM(rb_intern("gc")), profiler->record_gc ? Qtrue : Qfalse);
  rb_hash_aset(hash, ID2SYM(rb_intern("overhead_target")), DBL2NUM(profiler->pace.target_share * 100.0));
  return hash;
}

static VALUE period_result(sonde_profiler *profiler, recorder *rec, bool export, int64_t end_monotonic_ns) {
  profile_export_times times = {
      .start_epoch_ns = profiler->period_start_epoch_ns,
      .duration_ns = end_monotonic_ns - profiler->period_start_monotonic_ns,
      .period_ns = profiler->interval_ns,
  };
  VALUE result = rb_hash_new();
  rb_hash_aset(result, ID2SYM(rb_intern("stats")), stats_hash(profiler));
  rb_hash_aset(result, ID2SYM(rb_intern("failure")), profiler->failure);
  rb_hash_aset(result, ID2SYM(rb_intern("start_epoch_ns")), LL2NUM(times.start_epoch_ns));
  rb_hash_aset(result, ID2SYM(rb_intern("duration_ns")), LL2NUM(times.duration_ns));
  rb_hash_aset(result, ID2SYM(rb_intern("pprof")), export ? profile_export_pprof(rec, &times) : Qnil);
  return result;
}

// Native.stop(export) -> {pprof:, start_epoch_ns:, duration_ns:, stats:, failure:}
// The profile covers the time since the last flush (or the start). With
// export false, pprof is nil: the samples are dropped unencoded (a forked
// child discarding what it inherited from its parent).
static VALUE native_stop(VALUE self, VALUE export) {
  sonde_profiler *profiler = current_profiler();
  if (profiler == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  worker_stop(profiler);
  int64_t end = clocks_monotonic_ns();

  // From here the profiler is ours alone: no thread samples into it.
  VALUE holder = profiler_holder;
  profiler_holder = Qnil;
  VALUE result = period_result(profiler, profiler_active_recorder(profiler), RTEST(export), end);
  // Free now rather than at the holder's collection: a profile can be large.
  RTYPEDDATA_DATA(holder) = NULL;
  free_profiler(profiler);
  RB_GC_GUARD(holder); // kept the frames marked until they were named
  return result;
}

typedef struct {
  sonde_profiler *profiler;
  int slot;
  int64_t end;
} flush_run;

static VALUE export_flushed_slot(VALUE arg) {
  flush_run *run = (flush_run *)arg;
  return period_result(run->profiler, run->profiler->recorders[run->slot], true, run->end);
}

static VALUE finish_flush(VALUE arg) {
  flush_run *run = (flush_run *)arg;
  recorder_clear(run->profiler->recorders[run->slot]);
  run->profiler->flushing = false;
  return Qnil;
}

// Native.flush -> same as stop, for the period since the previous flush,
// while sampling goes on into the other recorder. The encoding runs with
// the GVL released (see profile_export.c).
static VALUE native_flush(VALUE self) {
  sonde_profiler *profiler = current_profiler();
  if (profiler == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  if (profiler->flushing) rb_raise(error_class("StateError"), "a flush is already in progress");
  thread_contexts_record_pending_gc(profiler);
  // We hold the GVL, and every pass runs with it: no pass is half-way
  // through the recorder we take away.
  flush_run run = {.profiler = profiler, .slot = profiler->active_recorder, .end = clocks_monotonic_ns()};
  // A period's end in epoch time is its start plus its monotonic length, as
  // profiles say (time + duration); the next one starts exactly there.
  int64_t end_epoch = profiler->period_start_epoch_ns + (run.end - profiler->period_start_monotonic_ns);
  profiler->active_recorder = (run.slot + 1) % RECORDER_SLOTS;
  profiler->flushing = true;
  profiler->stats.flushes++;
  VALUE result = rb_ensure(export_flushed_slot, (VALUE)&run, finish_flush, (VALUE)&run);
  // The next period starts where this one ended: no gap, no overlap.
  profiler->period_start_monotonic_ns = run.end;
  profiler->period_start_epoch_ns = end_epoch;
  return result;
}

// Native.give_up_signals: the application is about to set its own SIGPROF
// disposition (trap("PROF")); no signal of Sonde's may reach it. Sampling
// goes on as in no-signals mode. A no-op when not sampling with signals.
static VALUE native_give_up_signals(VALUE self) {
  sonde_profiler *profiler = current_profiler();
  if (profiler == NULL || !profiler->use_signals || profiler->stop_requested || signals_sampling_handler_lost()) {
    return Qnil;
  }
  signals_give_up();
  signals_warn_handler_lost();
  return Qnil;
}

// Native.ignore_thread(thread): leave one of Sonde's own threads out of profiles.
static VALUE native_ignore_thread(VALUE self, VALUE thread) {
  sonde_profiler *profiler = current_profiler();
  if (profiler == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  if (!rb_obj_is_kind_of(thread, rb_cThread)) rb_raise(rb_eTypeError, "expected a Thread");
  if (profiler->ignored_thread_count == MAX_IGNORED_THREADS) return Qfalse;
  profiler->ignored_threads[profiler->ignored_thread_count++] = thread;
  return Qtrue;
}

// Native.running? -> true while sampling (false after stop or a failure)
static VALUE native_running_p(VALUE self) {
  sonde_profiler *profiler = current_profiler();
  return profiler != NULL && !profiler->stop_requested ? Qtrue : Qfalse;
}

// Native.active? -> true from start to stop, failure or not
static VALUE native_active_p(VALUE self) { return current_profiler() != NULL ? Qtrue : Qfalse; }

// Native.stats -> Hash, or nil when not started
static VALUE native_stats(VALUE self) {
  sonde_profiler *profiler = current_profiler();
  return profiler == NULL ? Qnil : stats_hash(profiler);
}

// Native.failure -> the exception that stopped sampling, or nil
static VALUE native_failure(VALUE self) {
  sonde_profiler *profiler = current_profiler();
  return profiler == NULL ? Qnil : profiler->failure;
}

// Native.fail_next_sample -> makes the next sampling pass raise (tests only)
static VALUE native_fail_next_sample(VALUE self) {
  sonde_profiler *profiler = current_profiler();
  if (profiler == NULL) rb_raise(error_class("StateError"), "Sonde is not running");
  profiler->fail_next_sample = true;
  return Qnil;
}

void profiler_define_methods(VALUE native) {
  rb_gc_register_address(&profiler_holder);
  rb_define_module_function(native, "start", native_start, 5);
  rb_define_module_function(native, "stop", native_stop, 1);
  rb_define_module_function(native, "flush", native_flush, 0);
  rb_define_module_function(native, "ignore_thread", native_ignore_thread, 1);
  rb_define_module_function(native, "running?", native_running_p, 0);
  rb_define_module_function(native, "active?", native_active_p, 0);
  rb_define_module_function(native, "stats", native_stats, 0);
  rb_define_module_function(native, "failure", native_failure, 0);
  rb_define_module_function(native, "fail_next_sample", native_fail_next_sample, 0);
  rb_define_module_function(native, "give_up_signals", native_give_up_signals, 0);
}
