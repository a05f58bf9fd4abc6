// worker.c: the trigger thread, the SIGPROF callback, the postponed job and
// start/stop.
//
// Three contexts meet here, each with its own rules:
// - the trigger thread runs without the GVL and with SIGPROF blocked; it
//   never waits for the GVL, only sleeps on its own condition variable;
// - on_sigprof_from_signal_handler runs inside the signal handler: it only
//   reads memory, bumps atomics and triggers the postponed job (which Ruby
//   made for exactly this use; vm.h hides how each version wants it asked
//   for); no locks, no allocation, no Ruby calls;
// - sample_from_postponed_job and the idle helper run with the GVL and may
//   call Ruby, always under rb_protect: the profiler never raises into the
//   application.
#include "worker.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <ruby/debug.h>
#include <ruby/thread.h>

#include "clocks.h"
#include "idle_helper.h"
#include "signals.h"
#include "thread_context.h"
#include "vm.h"

// The one active profiler. Written only with the GVL, by worker_start (before
// the handler is installed and the trigger thread exists) and by worker_stop
// (after both are gone); read by the handler, the trigger thread and jobs.
static sonde_profiler *volatile active_profiler;

sonde_profiler *worker_active(void) { return active_profiler; }

bool worker_init_locks(sonde_profiler *profiler) {
  pthread_condattr_t monotonic;
  if (pthread_condattr_init(&monotonic) != 0) return false;
  // The trigger's deadlines are on the monotonic clock: a wall-clock jump must not stall sampling.
  bool ok = pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC) == 0 &&
            pthread_mutex_init(&profiler->trigger_lock, NULL) == 0 &&
            pthread_cond_init(&profiler->trigger_wakeup, &monotonic) == 0 &&
            pthread_mutex_init(&profiler->idle_lock, NULL) == 0 &&
            pthread_cond_init(&profiler->idle_wakeup, NULL) == 0;
  pthread_condattr_destroy(&monotonic);
  return ok;
}

// In a forked child only the forking thread survives: the trigger and the
// helper are gone, and a lock they held would stay locked forever. The child
// gets fresh locks and a profiler that is stopped, so stopping it never waits.
static void reset_in_forked_child(void) {
  signals_reset_in_forked_child();
  sonde_profiler *profiler = active_profiler;
  if (profiler == NULL) return;
  profiler->stop_requested = true;
  worker_init_locks(profiler);
}

static void sample_from_postponed_job(void *unused);

void worker_init_once(void) {
  pthread_atfork(NULL, NULL, reset_in_forked_child);
  // A failure shows in Sonde.stats as jobs_not_queued: the profile stays empty, the app runs on.
  vm_postponed_job_prepare(sample_from_postponed_job);
}

static void wake_trigger(sonde_profiler *profiler) {
  pthread_mutex_lock(&profiler->trigger_lock);
  pthread_cond_signal(&profiler->trigger_wakeup);
  pthread_mutex_unlock(&profiler->trigger_lock);
}

static VALUE exception_message(VALUE exception) { return rb_funcall(exception, rb_intern("full_message"), 0); }

// The application must not notice a failure of ours beyond this warning.
static void stop_after_failure(sonde_profiler *profiler) {
  VALUE exception = rb_errinfo();
  rb_set_errinfo(Qnil);
  profiler->failure = exception;
  profiler->stop_requested = true;
  wake_trigger(profiler);
  idle_helper_wake_for_stop(profiler);

  int raised = 0;
  VALUE message = rb_protect(exception_message, exception, &raised);
  if (raised) rb_set_errinfo(Qnil);
  fprintf(stderr, "sonde: sampling failed, so profiling stopped (the application goes on): %.*s\n",
          !raised && RB_TYPE_P(message, T_STRING) ? (int)RSTRING_LEN(message) : 7,
          !raised && RB_TYPE_P(message, T_STRING) ? RSTRING_PTR(message) : "unknown");
}

static VALUE sample_all_protected(VALUE arg) {
  sonde_profiler *profiler = (sonde_profiler *)arg;
  if (profiler->fail_next_sample) {
    profiler->fail_next_sample = false;
    rb_raise(rb_eRuntimeError, "sampling failure forced by Sonde::Native.fail_next_sample (a test hook)");
  }
  thread_contexts_sample_all(profiler);
  return Qnil;
}

static void record_sampling_time(sonde_profiler *profiler, int64_t elapsed) {
  sonde_stats *stats = &profiler->stats;
  stats->sampling_ns_total += elapsed;
  if (stats->sampling_ns_min == 0 || elapsed < stats->sampling_ns_min) stats->sampling_ns_min = elapsed;
  if (elapsed > stats->sampling_ns_max) stats->sampling_ns_max = elapsed;
}

// A pass calls into Ruby (listing and naming threads), and Ruby runs pending
// interrupts on the way back from such calls: this very postponed job, or a
// switch to another thread whose job or the idle helper then samples. A
// pass started inside another would refill the thread list the outer pass
// is walking. The pass in progress covers that tick, so the second one
// returns at once. (profiler->pass_in_progress: only with the GVL.)

void worker_sample_with_gvl(sonde_profiler *profiler, bool from_idle_helper) {
  if (profiler->stop_requested || profiler->pass_in_progress) return;
  profiler->pass_in_progress = true;
  // The CPU clock is a system call: read only for passes expected to be costly (pacing.h).
  bool timed_by_cpu = pacing_wants_cpu_time(&profiler->pace);
  int64_t started_cpu = timed_by_cpu ? clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID) : -1;
  int64_t started = clocks_monotonic_ns();
  int raised = 0;
  rb_protect(sample_all_protected, (VALUE)profiler, &raised);
  profiler->pass_in_progress = false;
  if (raised) stop_after_failure(profiler);
  int64_t cost = clocks_monotonic_ns() - started;
  int64_t cpu_cost = -1;
  if (timed_by_cpu && started_cpu >= 0) {
    int64_t ended_cpu = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    if (ended_cpu >= started_cpu) cpu_cost = ended_cpu - started_cpu;
  }
  record_sampling_time(profiler, cost);
  pacing_record_cost(&profiler->pace, pacing_cost_to_charge(&profiler->pace, cost, cpu_cost));
  if (from_idle_helper) profiler->stats.idle_samples++;
}

static void sample_from_postponed_job(void *unused) {
  sonde_profiler *profiler = active_profiler;
  if (profiler != NULL) worker_sample_with_gvl(profiler, false);
}

static void on_sigprof_from_signal_handler(void) {
  sonde_profiler *profiler = active_profiler;
  if (profiler == NULL || profiler->stop_requested) return;
  STATS_ADD(profiler, signals_received, 1);
  if (!vm_current_thread_holds_gvl_signal_safe()) {
    STATS_ADD(profiler, wrong_thread, 1);
    return;
  }
  if (!vm_postponed_job_trigger_signal_safe()) {
    STATS_ADD(profiler, jobs_not_queued, 1);
  }
}

// Another library may install its own SIGPROF handler while Sonde runs
// (StackProf.start, a trap("PROF")); our signals would then land in its
// handler, and once it resets SIGPROF to the default (trap("PROF",
// "DEFAULT")) the next one would kill the process. So the handler is checked
// before every signal, under the lock that Ruby's trap("PROF") takes first
// (lib/sonde/trap_guard.rb); once it is gone, Sonde goes on as in
// no-signals mode until it stops (Sonde.stats[:signal_handler_lost]). A C
// library calling sigaction between the check and pthread_kill, a window of
// microseconds, can still get one signal.
static void trigger_one_sample(sonde_profiler *profiler) {
  pthread_t owner;
  if (profiler->use_signals && !signals_sampling_handler_lost() && vm_gvl_owner_from_any_thread(&owner)) {
    switch (signals_send_sigprof_if_handler_in_place(owner)) {
      case SIGNAL_SENT:
        STATS_ADD(profiler, signals_sent, 1);
        return;
      case SIGNAL_FAILED:
        STATS_ADD(profiler, signal_failures, 1);
        return;
      case SIGNAL_HANDLER_LOST:
        signals_warn_handler_lost();
        break;
    }
  }
  STATS_ADD(profiler, idle_requests, 1);
  idle_helper_request_from_trigger(profiler);
}

static struct timespec timespec_from_ns(int64_t ns) {
  return (struct timespec){.tv_sec = ns / NANOS_PER_SECOND, .tv_nsec = ns % NANOS_PER_SECOND};
}

// Sleeps until the deadline or until stop; returns false on stop.
static bool sleep_until(sonde_profiler *profiler, int64_t deadline_ns) {
  struct timespec deadline = timespec_from_ns(deadline_ns);
  pthread_mutex_lock(&profiler->trigger_lock);
  while (!profiler->stop_requested) {
    if (pthread_cond_timedwait(&profiler->trigger_wakeup, &profiler->trigger_lock, &deadline) == ETIMEDOUT) break;
  }
  bool go_on = !profiler->stop_requested;
  pthread_mutex_unlock(&profiler->trigger_lock);
  return go_on;
}

void worker_thread_started(sonde_profiler *profiler) {
  pthread_mutex_lock(&profiler->trigger_lock);
  profiler->threads_started++;
  pthread_cond_broadcast(&profiler->trigger_wakeup);
  pthread_mutex_unlock(&profiler->trigger_lock);
}

static void *trigger_loop_without_gvl(void *arg) {
  sonde_profiler *profiler = arg;
  signals_block_in_current_thread();
  worker_thread_started(profiler);
  int64_t next_tick = clocks_monotonic_ns();
  for (;;) {
    // The overhead budget may stretch the interval (see pacing.h).
    int64_t now = clocks_monotonic_ns();
    next_tick += pacing_next_interval_ns(&profiler->pace, now);
    // Behind schedule (machine busy, process stopped): skip, never burst.
    if (next_tick < now) next_tick = now;
    if (!sleep_until(profiler, next_tick)) break;
    trigger_one_sample(profiler);
    pacing_on_tick(&profiler->pace);
  }
  return NULL;
}

// Ruby calls this to interrupt the loop (Thread#kill, process exit).
static void unblock_trigger(void *arg) {
  sonde_profiler *profiler = arg;
  profiler->stop_requested = true;
  wake_trigger(profiler);
}

static VALUE trigger_thread_body(void *arg) {
  rb_thread_call_without_gvl(trigger_loop_without_gvl, arg, unblock_trigger, arg);
  return Qnil;
}

static VALUE start_trigger_thread(sonde_profiler *profiler) {
  VALUE thread = rb_thread_create(trigger_thread_body, profiler);
  rb_funcall(thread, rb_intern("name="), 1, rb_str_new_cstr("sonde-trigger"));
  return thread;
}

static VALUE join_thread(VALUE thread) { return rb_funcall(thread, rb_intern("join"), 0); }

static void join_quietly(VALUE thread) {
  if (NIL_P(thread)) return;
  int raised = 0;
  rb_protect(join_thread, thread, &raised);
  if (raised) rb_set_errinfo(Qnil);
}

// The GC tracepoint runs inside GC: no allocation, no Ruby calls.
static void on_gc_event_no_alloc(VALUE tracepoint, void *data) {
  sonde_profiler *profiler = data;
  rb_trace_arg_t *arg = rb_tracearg_from_tracepoint(tracepoint);
  switch (rb_tracearg_event_flag(arg)) {
    case RUBY_INTERNAL_EVENT_GC_ENTER:
      thread_contexts_on_gc_enter_no_alloc(profiler);
      break;
    case RUBY_INTERNAL_EVENT_GC_EXIT:
      thread_contexts_on_gc_exit_no_alloc(profiler);
      break;
  }
}

static VALUE start_threads(VALUE arg) {
  sonde_profiler *profiler = (sonde_profiler *)arg;
  if (profiler->record_gc && vm_gc_hooks_slow_allocation()) {
    thread_contexts_start_polling_gc(profiler);
  } else if (profiler->record_gc) {
    profiler->gc_tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT,
                                                on_gc_event_no_alloc, profiler);
    rb_tracepoint_enable(profiler->gc_tracepoint);
  }
  // The helper first: the trigger may ask for it from its first tick.
  profiler->idle_thread = idle_helper_start(profiler);
  profiler->trigger_thread = start_trigger_thread(profiler);
  return Qnil;
}

// A new Ruby thread needs the GVL once before it can let go of it: if the
// thread that started Sonde then blocks in C code holding the GVL (a C
// library call, a long computation), the trigger would never run. So start
// waits, without the GVL, until both threads are up.
#define THREAD_START_TIMEOUT_NS (2 * NANOS_PER_SECOND)
#define SONDE_THREAD_COUNT 2

static void *wait_for_threads_without_gvl(void *arg) {
  sonde_profiler *profiler = arg;
  struct timespec deadline = timespec_from_ns(clocks_monotonic_ns() + THREAD_START_TIMEOUT_NS);
  pthread_mutex_lock(&profiler->trigger_lock);
  while (profiler->threads_started < SONDE_THREAD_COUNT && !profiler->stop_requested) {
    if (pthread_cond_timedwait(&profiler->trigger_wakeup, &profiler->trigger_lock, &deadline) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&profiler->trigger_lock);
  return NULL;
}

bool worker_start(sonde_profiler *profiler, char *error, size_t error_size) {
  active_profiler = profiler;
  if (profiler->use_signals && !signals_install_sampling_handler(on_sigprof_from_signal_handler, error, error_size)) {
    active_profiler = NULL;
    return false;
  }
  int raised = 0;
  rb_protect(start_threads, (VALUE)profiler, &raised);
  if (raised) {
    VALUE exception = rb_errinfo();
    rb_set_errinfo(Qnil);
    worker_stop(profiler);
    VALUE message = rb_protect(exception_message, exception, &raised);
    if (raised) rb_set_errinfo(Qnil);
    snprintf(error, error_size, "could not start the sampling threads: %s",
             !raised && RB_TYPE_P(message, T_STRING) ? StringValueCStr(message) : "unknown error");
    return false;
  }
  rb_thread_call_without_gvl(wait_for_threads_without_gvl, profiler, NULL, NULL);
  return true;
}

void worker_stop(sonde_profiler *profiler) {
  if (!NIL_P(profiler->gc_tracepoint)) {
    rb_tracepoint_disable(profiler->gc_tracepoint);
    thread_contexts_record_pending_gc(profiler);
  }
  profiler->stop_requested = true;
  wake_trigger(profiler);
  idle_helper_wake_for_stop(profiler);
  join_quietly(profiler->trigger_thread);
  join_quietly(profiler->idle_thread);
  if (profiler->use_signals) signals_install_empty_handler();
  active_profiler = NULL;
}
