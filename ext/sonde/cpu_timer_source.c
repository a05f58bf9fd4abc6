// cpu_timer_source.c: the CPU-timer event source (see the header).
//
// With the GVL: start, stop, stats, and the thread-begin and thread-end
// hooks, which Ruby runs on the thread as it starts and as it ends
// (RUBY_EVENT_THREAD_BEGIN and _END: event hooks for threads only, which
// cost nothing elsewhere; no per-line or per-call event is enabled). forget_after_fork runs in a forked child.
#include "cpu_timer_source.h"

#include <ruby/debug.h>

#include "capture_buffer.h"
#include "cpu_timers.h"
#include "sampling_pass.h"
#include "stats.h"
#include "thread_contexts.h"
#include "vm.h"

// The active run's thread-begin hook (a TracePoint), or Qnil (also on
// 3.3+, which needs none). Set by start, cleared by stop, with the GVL;
// registered with the GC at load.
static VALUE thread_begin_hook = Qnil;
// And its thread-end hook: RUBY_EVENT_THREAD_END, on the ending thread, for
// a thread whose block returned (Ruby fires none for one killed or ended
// by an exception: that one is forgotten at the next pass, or when its
// native thread runs the next thread, on 3.1).
static VALUE thread_end_hook = Qnil;

// A TracePoint of the main Ractor: it fires for the main Ractor's threads
// only (checked anyway: another Ractor's thread is never met).
static void on_thread_begin(VALUE tracepoint, void *unused) {
  sonde_run *run = run_active();
  if (run != NULL && run->timers != NULL && vm_on_main_ractor()) sampling_pass_meet_current_thread(run);
}

static void on_thread_end(VALUE tracepoint, void *unused) {
  sonde_run *run = run_active();
  if (run != NULL && run->timers != NULL && vm_on_main_ractor()) sampling_pass_end_current_thread(run);
}

static sonde_status start_cpu_timers(sonde_run *run, char *error, size_t error_size) {
  if (run->timers == NULL) return SONDE_OK; // no-signals mode
  static bool registered;
  if (!registered) {
    rb_gc_register_address(&thread_begin_hook);
    rb_gc_register_address(&thread_end_hook);
    registered = true;
  }
  // 3.3+ meets a thread at its first pass, counting from its birth, and
  // counts one that ends before any at its EXITED (vm.h): no hook at birth.
  if (!vm_exits_count_unmet_threads()) {
    thread_begin_hook = rb_tracepoint_new(0, RUBY_EVENT_THREAD_BEGIN, on_thread_begin, NULL);
    rb_tracepoint_enable(thread_begin_hook);
  }
  thread_end_hook = rb_tracepoint_new(0, RUBY_EVENT_THREAD_END, on_thread_end, NULL);
  rb_tracepoint_enable(thread_end_hook);
  return SONDE_OK;
}

static void stop_cpu_timers(sonde_run *run) {
  if (!NIL_P(thread_begin_hook)) {
    rb_tracepoint_disable(thread_begin_hook);
    thread_begin_hook = Qnil;
  }
  if (!NIL_P(thread_end_hook)) {
    rb_tracepoint_disable(thread_end_hook);
    thread_end_hook = Qnil;
  }
  if (run->timers != NULL) cpu_timers_disarm_all(run->timers);
}

// The hook is a registered global (start): nothing else to mark.
static void mark_cpu_timers(const sonde_run *run) {}

static void add_cpu_timer_stats(const sonde_run *run, VALUE stats) {
  if (run->timers == NULL) {
    stats_put_flag(stats, "cpu_timers", false);
    return;
  }
  cpu_timer_stats timers = cpu_timers_stats(run->timers);
  stats_put_flag(stats, "cpu_timers", !timers.unavailable);
  stats_put_count(stats, "cpu_timer_threads", timers.live);
  stats_put_count(stats, "cpu_timer_signals", timers.signals);
  stats_put_count(stats, "cpu_timer_failures", timers.failures);
  // What rate the kernel really delivered: at most its tick, whatever was asked.
  double seconds = (double)timers.sampled_cpu_ns / 1e9;
  stats_put_number(stats, "cpu_sample_rate_hz", seconds > 0 ? (double)timers.committed / seconds : 0.0);
  stats_put_count(stats, "captures_dropped", capture_buffer_drops(run->captures));
}

// Timers are not inherited by a forked child, nor are the other threads
// whose captures may sit in the buffer.
// The thread-begin hook is Ruby's, and survives the fork: the child's stop
// disables it like any other run's.
static void forget_cpu_timers_after_fork(sonde_run *run) {
  if (run->timers == NULL) return;
  cpu_timers_forget_after_fork(run->timers);
  thread_contexts_forget_timers_after_fork(run->contexts);
  capture_buffer_reset(run->captures);
}

const event_source cpu_timer_source = {
    .name = "cpu timers",
    .start = start_cpu_timers,
    .stop = stop_cpu_timers,
    .mark = mark_cpu_timers,
    .add_stats = add_cpu_timer_stats,
    .forget_after_fork = forget_cpu_timers_after_fork,
};
