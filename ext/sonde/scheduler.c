// scheduler.c: the trigger thread and the idle helper (see the header).
//
// Contexts:
// - trigger_loop_without_gvl runs on a native thread Sonde created with
//   pthread_create, SIGPROF blocked from birth. It never touches the GVL or
//   any Ruby object: it reads the GVL owner (vm.h, a racy read used as a
//   hint), sends signals (signals.h), wakes the idle helper, plans ticks
//   with pacing.h, and deletes the CPU timers if another library took
//   SIGPROF over. It sleeps on its own condition variable.
// - everything else runs with the GVL (start, stop, the idle helper's
//   passes, the restart of a killed helper), but forget_after_fork (a
//   forked child, before any Ruby code).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 // pthread_setname_np; the value Ruby's config.h gives it
#endif
#include "scheduler.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ruby/thread.h>

#include "clocks.h"
#include "cpu_timers.h"
#include "idle_helper.h"
#include "own_threads.h"
#include "shared.h"
#include "signals.h"
#include "stats.h"
#include "trigger_park.h"
#include "vm.h"

// Start waits this long for the idle helper's first wait (see start).
#define HELPER_START_TIMEOUT_NS (2 * NANOS_PER_SECOND)
// A small stack for a thread that only loops over a few calls.
#define TRIGGER_STACK_SIZE (256 * 1024)

struct scheduler {
  // Set once.
  int64_t interval_ns;
  bool use_signals;
  sonde_run *run; // at start
  // Shared, atomic.
  int stopping;
  int tick_pending;
  // A tick offered to the GVL holder's next CPU-timer signal (see
  // tick_from_trigger): set by the trigger, taken by a handler.
  int tick_offered;
  uint64_t signals_sent, signal_failures, idle_requests, idle_helper_missing, idle_helper_restarts, ticks_skipped,
      ticks_by_cpu_signal, trigger_wakeups, standing_periods, offers_taken_late;
  // A standing offer (see standing_check): while set, the GVL holder's
  // CPU-timer signals take a tick each once an interval has passed since
  // the last one taken, with no trigger wake-up per tick. Set and cleared
  // by the trigger; standing_last_ns is moved forward by the handler that
  // takes a tick (compare-and-swap), standing_taken counts them for the
  // trigger's check.
  int standing;
  int64_t standing_interval_ns;
  int64_t standing_last_ns;
  uint64_t standing_taken;
  // Idle (see wait_while_idle). Written by passes (GVL) and CPU-timer
  // signals, read by the trigger, atomic: consecutive quiet passes (0 once
  // anything ran), and the GVL acquisitions counted as the latest began.
  uint32_t quiet_passes;
  uint64_t resumes_at_quiet_pass;
  int64_t backoff_ns; // the trigger's: the current back-off (3.1/3.2), 0: none
  uint64_t parks, parked_ns, backoff_waits, backoff_ns_total; // stats, atomic
  int64_t parked_since_ns; // atomic: when the park under way began (0: none), for stats
  // Atomic: set when the trigger parks or backs off, cleared by the next
  // pass that was not quiet: the time since the last pass may then be
  // longer than an interval or two (see scheduler_rested_since_busy_pass).
  int rested;
  // The trigger thread's, and pacing's (see pacing.h for who writes what).
  pacing pace;
  pthread_t trigger;
  bool trigger_running; // with the GVL: start and stop
  pid_t tick_target; // the trigger's: the tid that got the last tick's signal
  // The trigger's: ticks to signal before offering again, and the current
  // backoff after untaken offers (0: none).
  uint32_t offer_ticks_to_wait, offer_backoff;
  bool offer_outstanding; // the trigger's last offer may still be taken
  uint32_t offers_taken_in_row; // the trigger's: consecutive offers taken, towards a standing offer
  pthread_mutex_t trigger_lock;
  pthread_cond_t trigger_wakeup;
  // The idle helper and what the GVL side knows of it; the pass it runs.
  idle_helper helper;
  scheduler_pass_fn idle_pass;
  bool helper_ready; // idle_helper_init succeeded
  bool restart_warned;
};

static bool init_trigger_locks(scheduler *sched) {
  pthread_condattr_t monotonic;
  if (pthread_condattr_init(&monotonic) != 0) return false;
  // Deadlines are on the monotonic clock: a wall-clock jump must not stall sampling.
  bool ok = pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC) == 0 &&
            pthread_mutex_init(&sched->trigger_lock, NULL) == 0 &&
            pthread_cond_init(&sched->trigger_wakeup, &monotonic) == 0;
  pthread_condattr_destroy(&monotonic);
  return ok;
}

scheduler *scheduler_new(const run_settings *settings, int64_t now_ns, scheduler_pass_fn idle_pass) {
  scheduler *sched = calloc(1, sizeof(*sched));
  if (sched == NULL) return NULL;
  sched->idle_pass = idle_pass;
  sched->interval_ns = settings->interval_ns;
  sched->use_signals = settings->use_signals;
  pacing_init(&sched->pace, settings->interval_ns, settings->overhead_target_percent, now_ns);
  if (!init_trigger_locks(sched)) {
    free(sched);
    return NULL;
  }
  sched->helper_ready = idle_helper_init(&sched->helper);
  if (!sched->helper_ready) {
    scheduler_free(sched);
    return NULL;
  }
  return sched;
}

void scheduler_free(scheduler *sched) {
  if (sched == NULL) return;
  pthread_cond_destroy(&sched->trigger_wakeup);
  pthread_mutex_destroy(&sched->trigger_lock);
  if (sched->helper_ready) idle_helper_destroy(&sched->helper);
  free(sched);
}

#define ADD(field) shared_add_relaxed(&sched->field, 1)
#define READ(field) shared_load_relaxed(&sched->field)

static void wake_trigger(scheduler *sched) {
  pthread_mutex_lock(&sched->trigger_lock);
  pthread_cond_signal(&sched->trigger_wakeup);
  pthread_mutex_unlock(&sched->trigger_lock);
}

void scheduler_request_stop(scheduler *sched) {
  shared_store_release(&sched->stopping, 1);
  wake_trigger(sched);
  trigger_park_wake_signal_safe();
  idle_helper_stop(&sched->helper);
}

bool scheduler_stopping(const scheduler *sched) { return shared_load_acquire(&sched->stopping) != 0; }

pacing *scheduler_pacing(scheduler *sched) { return &sched->pace; }

void scheduler_note_tick_signal_safe(scheduler *sched) { shared_store_release(&sched->tick_pending, 1); }

// A CPU-timer signal this much of an interval early still takes a standing
// tick: the kernel checks CPU timers at its own 4-ms tick, so a busy
// thread's signals come 8 or 12 ms apart at 100 Hz, not every 10.
#define STANDING_EARLY_DIVISOR 4

bool scheduler_take_offered_tick_signal_safe(scheduler *sched) {
  bool standing = shared_load_acquire(&sched->standing) != 0;
  if (shared_exchange_acq_rel(&sched->tick_offered, 0)) {
    if (standing) shared_store_release(&sched->standing_last_ns, clocks_monotonic_ns());
    ADD(ticks_by_cpu_signal);
    return true;
  }
  if (!standing) return false;
  int64_t now = clocks_monotonic_ns(); // clock_gettime: async-signal-safe
  int64_t last = shared_load_acquire(&sched->standing_last_ns);
  int64_t interval = shared_load_relaxed(&sched->standing_interval_ns);
  if (now - last < interval - interval / STANDING_EARLY_DIVISOR) return false;
  // Another thread's signal may take the same tick: one of them wins.
  if (!shared_cas_acq_rel(&sched->standing_last_ns, &last, now))
    return false;
  shared_add_relaxed(&sched->standing_taken, 1);
  ADD(ticks_by_cpu_signal);
  return true;
}

void scheduler_note_pass_verdict(scheduler *sched, bool quiet, uint64_t resumes_at_start) {
  if (quiet) {
    shared_store_seq(&sched->resumes_at_quiet_pass, resumes_at_start);
    shared_add_seq(&sched->quiet_passes, 1);
    return;
  }
  shared_store_relaxed(&sched->rested, 0);
  if (shared_load_relaxed(&sched->quiet_passes) == 0) return;
  shared_store_seq(&sched->quiet_passes, 0);
  trigger_park_wake_signal_safe(); // a backed-off trigger comes back now
}

bool scheduler_rested_since_busy_pass(const scheduler *sched) {
  return shared_load_relaxed(&sched->rested) != 0;
}

void scheduler_note_cpu_signal_signal_safe(scheduler *sched) {
  if (shared_load_relaxed(&sched->quiet_passes) == 0) return;
  shared_store_seq(&sched->quiet_passes, 0);
  trigger_park_wake_signal_safe();
}

bool scheduler_take_tick(scheduler *sched) { return shared_exchange_acq_rel(&sched->tick_pending, 0) != 0; }

bool scheduler_is_idle_helper(const scheduler *sched, VALUE thread) { return thread == idle_helper_thread(&sched->helper); }

// ---------------------------------------------------------------------------
// The trigger thread.

// Once the handler is gone (another library's, or given up to a
// trap("PROF")), the CPU timers must stop at once: their next signal would
// reach that handler, or kill the process if SIGPROF is reset to default.
static void give_up_signals_from_trigger(scheduler *sched) {
  signals_warn_handler_lost();
  if (sched->run->timers != NULL) cpu_timers_disarm_all(sched->run->timers);
}

// A GVL holder that burns CPU gets its CPU timer's signal about every
// interval anyway, and reads its stack in it: rather than a second signal
// for the wall tick, the tick is offered to that signal, whose handler
// takes it (a copy of the CPU sample's stack as the tick's, and the full
// pass; signal_sampler.c). An offer still untaken at the next tick (a
// holder blocked in a system call, or one without a timer) is taken back
// and the tick's signal sent as before; then ticks signal before offering
// again, 8 of them after the first untaken offer and twice as many after
// each further one (at most 64), so a holder whose offers go untaken loses
// at most one tick in 65 to them (its wall time is not lost: the next pass
// counts it). A busy thread's CPU-timer signals may come only right after
// a tick's own signal (the kernel checks a thread's CPU timers when it
// enters the kernel), and then none of its offers is ever taken: the
// backoff bounds what that costs.
//
// An offer still untaken at the next tick gets a grace of half an interval
// before it is taken back. The kernel checks CPU timers at its own tick
// (4 ms at 250 Hz), so at 100 Hz a busy thread's signals come 8 and 12 ms
// apart, in a phase fixed for the run: one interval window in two can hold
// no signal and the next two. Without the grace, in runs whose ticks fell
// in that phase every other offer went untaken, the backoff (an even
// number of ticks) brought each new offer back to an empty window, and all
// of a busy thread's ticks went by the trigger's signal (a trigger wake-up
// and a signal per tick for the same profile; issue 24). The grace moves
// the tick at most half an interval late; a tick's wall time is not lost.
// Returns true when the tick was offered (or an offer was taken
// meanwhile): a pass is on its way.
#define OFFER_BACKOFF_FIRST 8
#define OFFER_BACKOFF_MAX 64
// Only where a CPU-timer signal can come once per tick: the kernel checks
// CPU timers at its own tick (4 ms at 250 Hz), so above 125 Hz a busy
// holder's CPU signals are rarer than the ticks, and offered ticks would
// wait for them.
#define OFFER_MIN_INTERVAL_NS (8 * 1000 * 1000)

// After this many offers in a row taken, the offer stands (standing_check).
#define STANDING_AFTER_TAKEN 4

static void start_standing_offer(scheduler *sched) {
  shared_store_relaxed(&sched->standing_interval_ns, sched->interval_ns);
  shared_store_relaxed(&sched->standing_last_ns, clocks_monotonic_ns());
  shared_store_relaxed(&sched->standing_taken, 0);
  shared_store_release(&sched->standing, 1);
  ADD(standing_periods);
}

static bool sleep_until(scheduler *sched, int64_t deadline_ns);

// The last offer, still outstanding at this tick: true when a handler took
// it within the grace (the tick is then offered anew), false when it is
// taken back (or Sonde stops).
static bool offer_taken_within_grace(scheduler *sched) {
  if (!sleep_until(sched, clocks_monotonic_ns() + sched->interval_ns / 2)) return false;
  if (shared_load_acquire(&sched->tick_offered) != 0) return false;
  ADD(offers_taken_late);
  return true;
}

static bool offer_tick_to_cpu_signal(scheduler *sched) {
  if (sched->run->timers == NULL || sched->interval_ns < OFFER_MIN_INTERVAL_NS) return false;
  if (sched->offer_ticks_to_wait > 0) {
    sched->offer_ticks_to_wait--;
    return false;
  }
  bool outstanding = sched->offer_outstanding && shared_load_acquire(&sched->tick_offered) != 0;
  if (outstanding && offer_taken_within_grace(sched)) outstanding = false;
  if (!outstanding && shared_exchange_acq_rel(&sched->tick_offered, 1) == 0) {
    if (sched->offer_outstanding) { // the last offer was taken
      sched->offer_backoff = 0;
      if (++sched->offers_taken_in_row >= STANDING_AFTER_TAKEN) start_standing_offer(sched);
    }
    sched->offer_outstanding = true;
    return true;
  }
  // The last tick's offer: take it back, unless a handler takes it first.
  if (shared_exchange_acq_rel(&sched->tick_offered, 0) == 0) return true;
  sched->offer_outstanding = false;
  sched->offers_taken_in_row = 0;
  sched->offer_backoff = sched->offer_backoff == 0 ? OFFER_BACKOFF_FIRST
                         : sched->offer_backoff * 2 > OFFER_BACKOFF_MAX ? OFFER_BACKOFF_MAX
                                                                        : sched->offer_backoff * 2;
  sched->offer_ticks_to_wait = sched->offer_backoff;
  return false;
}

// One tick: the GVL holder reads its own stack in its SIGPROF handler and
// queues the pass; with no holder, the idle helper runs the pass. Returns
// whether a pass was asked for.
static bool tick_from_trigger(scheduler *sched) {
  pid_t owner;
  bool has_owner = vm_gvl_owner_tid_from_any_thread(&owner);
  if (shared_load_acquire(&sched->tick_pending)) {
    // The previous tick's pass has not run yet. While the thread that took
    // it still holds the GVL with no safe point (a long C call), another
    // signal would only add a capture no pass can take; the wall time is
    // not lost, the next pass covers it. Once it let the GVL go, it runs
    // the pass when it gets back: this tick goes ahead without it.
    if (has_owner && owner == sched->tick_target) {
      ADD(ticks_skipped);
      return false;
    }
    shared_store_release(&sched->tick_pending, 0);
  }
  if (sched->use_signals && !signals_sampling_handler_lost()) {
    if (has_owner) {
      sched->tick_target = owner;
      if (offer_tick_to_cpu_signal(sched)) return true;
      switch (signals_send_sigprof_if_handler_in_place(owner)) {
        case SIGNAL_SENT:
          ADD(signals_sent);
          return true;
        case SIGNAL_FAILED:
          ADD(signal_failures);
          return false;
        case SIGNAL_HANDLER_LOST:
          give_up_signals_from_trigger(sched);
          break;
      }
    } else if (!signals_sampling_handler_in_place()) {
      // Checked at idle ticks too: CPU timers fire whether or not anyone
      // holds the GVL now.
      give_up_signals_from_trigger(sched);
    }
  }
  if (idle_helper_request_from_trigger(&sched->helper)) {
    ADD(idle_requests);
    return true;
  }
  ADD(idle_helper_missing); // killed: the next pass on an application thread starts another
  return false;
}

// While an offer stands the trigger wakes only every STANDING_TICKS
// intervals, to check that the holder's signals took at least
// STANDING_MIN_TAKEN ticks meanwhile. A holder that stopped burning CPU
// (blocked, asleep) or stopped holding the GVL takes fewer: the offer is
// withdrawn and ticks go back to one wake-up each. Sampling then lags by at
// most STANDING_TICKS intervals, and loses no time: every sample counts
// the wall time since the thread's previous one. A trigger wake-up costs
// CPU (a timed wait, a context switch on the other core: about 0.3% of the
// process at 100 Hz here), which a busy single-thread process no longer
// pays per tick. The overhead budget is checked at each check as at each
// tick: an overdrawn budget withdraws the offer.
#define STANDING_TICKS 8
#define STANDING_MIN_TAKEN 6

static int64_t trigger_wait_ns(const scheduler *sched, int64_t interval_ns) {
  return shared_load_acquire(&sched->standing) ? STANDING_TICKS * interval_ns : interval_ns;
}

// At a wake-up: true when the offer stands for another period (no tick to
// give now), false when there was none or it was just withdrawn.
static bool standing_check(scheduler *sched, int64_t interval_ns) {
  if (!shared_load_acquire(&sched->standing)) return false;
  uint64_t taken = shared_exchange_acq_rel(&sched->standing_taken, 0);
  pacing_on_ticks(&sched->pace, taken); // their passes report to pacing like a tick's
  bool keep = taken >= STANDING_MIN_TAKEN && interval_ns == sched->interval_ns && !signals_sampling_handler_lost();
  if (keep) return true;
  shared_store_release(&sched->standing, 0);
  sched->offers_taken_in_row = 0;
  return false;
}

// Waiting costs nothing. After a quiet pass (nobody held the GVL at the
// tick, no thread ran since the pass before) another tick would find the
// same: every thread's wall time since its previous sample is counted by
// whichever pass comes next, on the stack it kept (sampling_pass.c), so
// the ticks may stop until a thread runs.
// - Ruby 3.3+ (vm_tells_resumes): the trigger parks, sending nothing and
//   waking nobody, until a RESUMED GVL event (any thread takes the GVL), a
//   CPU-timer signal (a thread burns CPU without it) or stop ends the park.
//   The thread that resumes has its wait credited up to that moment, to the
//   stack it waited on (credit_wait_until_resume). Parking is a handshake:
//   the park is entered first, then the GVL acquisitions are compared with
//   the quiet pass's count; a RESUMED counts before it looks for a park,
//   so one of the two sees the other. Every PARK_CHECK_NS the trigger looks
//   whether SIGPROF is still Sonde's (no pass, no sample).
// - Ruby 3.1/3.2 (no GVL hooks): the trigger backs off, each quiet pass
//   doubling the wait from two intervals up to IDLE_BACKOFF_CAP_NS, and
//   comes back to its full rate as soon as a pass finds that a thread ran
//   or a CPU-timer signal comes. Each back-off tick's pass still samples
//   every thread: a thread's wake is seen at most one back-off later, and
//   up to that much of its wait (at most IDLE_BACKOFF_CAP_NS) can go to the
//   stack it has when seen instead of the one it waited on.
// Not while an offer stands (a busy holder), nor in the first quiet pass's
// absence. Called at a tick, instead of it: returns true when it waited
// (3.1: the tick then goes out at the back-off's end; 3.3: the next tick
// comes an interval after the park ends), false to tick as usual.
#define PARK_CHECK_NS NANOS_PER_SECOND
#define IDLE_BACKOFF_CAP_NS (200 * 1000 * 1000)

static bool still_quiet(scheduler *sched) {
  pid_t owner;
  return shared_load_seq(&sched->quiet_passes) > 0 && !vm_gvl_owner_tid_from_any_thread(&owner);
}

static void give_up_signals_from_trigger(scheduler *sched);

static bool park_while_quiet(scheduler *sched) {
  trigger_park_enter();
  uint64_t quiet_resumes = shared_load_seq(&sched->resumes_at_quiet_pass);
  if (!still_quiet(sched) || vm_gvl_resumes_from_any_thread() != quiet_resumes) {
    trigger_park_leave();
    return false;
  }
  ADD(parks);
  shared_store_relaxed(&sched->rested, 1);
  int64_t parked_at = clocks_monotonic_ns();
  shared_store_relaxed(&sched->parked_since_ns, parked_at);
  while (!scheduler_stopping(sched)) {
    if (trigger_park_wait_until(clocks_monotonic_ns() + PARK_CHECK_NS)) break;
    if (sched->use_signals && !signals_sampling_handler_lost() && !signals_sampling_handler_in_place()) {
      give_up_signals_from_trigger(sched);
    }
    if (!still_quiet(sched) || vm_gvl_resumes_from_any_thread() != quiet_resumes) break;
  }
  trigger_park_leave();
  shared_store_relaxed(&sched->parked_since_ns, 0);
  shared_add_relaxed(&sched->parked_ns, (uint64_t)(clocks_monotonic_ns() - parked_at));
  return true;
}

// backoff_ns is the spacing of the back-off's ticks; the trigger has
// already waited one interval of it when it gets here.
static bool back_off_while_quiet(scheduler *sched, int64_t interval_ns) {
  int64_t cap = IDLE_BACKOFF_CAP_NS > 2 * interval_ns ? IDLE_BACKOFF_CAP_NS : 2 * interval_ns;
  sched->backoff_ns = sched->backoff_ns == 0 ? 2 * interval_ns : sched->backoff_ns * 2;
  if (sched->backoff_ns > cap) sched->backoff_ns = cap;
  trigger_park_enter();
  if (!still_quiet(sched)) {
    trigger_park_leave();
    sched->backoff_ns = 0;
    return false;
  }
  ADD(backoff_waits);
  shared_store_relaxed(&sched->rested, 1);
  int64_t started = clocks_monotonic_ns();
  // Woken early: something runs, back to the full rate.
  if (trigger_park_wait_until(started + sched->backoff_ns - interval_ns)) sched->backoff_ns = 0;
  trigger_park_leave();
  shared_add_relaxed(&sched->backoff_ns_total, (uint64_t)(clocks_monotonic_ns() - started));
  return true;
}

// Not in no-signals mode: no thread-end hook runs there (it comes with the
// CPU timers), so a thread that ended while the trigger rested would lose
// its time since its last sample; there the ticks go on at the rate.
static bool wait_while_idle(scheduler *sched, int64_t interval_ns) {
  if (!sched->use_signals || shared_load_acquire(&sched->standing) || !still_quiet(sched)) {
    sched->backoff_ns = 0;
    return false;
  }
  return vm_tells_resumes() ? park_while_quiet(sched) : back_off_while_quiet(sched, interval_ns);
}

static struct timespec timespec_from_ns(int64_t ns) {
  return (struct timespec){.tv_sec = ns / NANOS_PER_SECOND, .tv_nsec = ns % NANOS_PER_SECOND};
}

// Sleeps until the deadline or until stop; returns false on stop.
static bool sleep_until(scheduler *sched, int64_t deadline_ns) {
  struct timespec deadline = timespec_from_ns(deadline_ns);
  pthread_mutex_lock(&sched->trigger_lock);
  while (!scheduler_stopping(sched)) {
    if (pthread_cond_timedwait(&sched->trigger_wakeup, &sched->trigger_lock, &deadline) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&sched->trigger_lock);
  return !scheduler_stopping(sched);
}

static void *trigger_loop_without_gvl(void *arg) {
  scheduler *sched = arg;
  int64_t next_tick = clocks_monotonic_ns();
  for (;;) {
    // The overhead budget may stretch the interval (see pacing.h).
    int64_t now = clocks_monotonic_ns();
    int64_t interval = pacing_next_interval_ns(&sched->pace, now);
    next_tick += trigger_wait_ns(sched, interval);
    // Behind schedule (machine busy, process stopped): skip, never burst.
    if (next_tick < now) next_tick = now;
    if (!sleep_until(sched, next_tick)) break;
    ADD(trigger_wakeups);
    if (standing_check(sched, interval)) continue;
    // Decided at the tick, once the previous tick's pass has had its
    // interval to run and report (see wait_while_idle).
    if (wait_while_idle(sched, interval)) {
      if (scheduler_stopping(sched)) break;
      next_tick = clocks_monotonic_ns();
      if (vm_tells_resumes()) continue; // unparked: the next tick one interval from now
      // Backed off: this tick was only late.
    }
    if (tick_from_trigger(sched)) pacing_on_tick(&sched->pace);
  }
  return NULL;
}

// SIGPROF is blocked around pthread_create so that the trigger is born
// with it blocked: a process-directed SIGPROF must never land on it.
static int start_trigger_thread(scheduler *sched) {
  sigset_t prof, previous;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) return -1;
  pthread_attr_setstacksize(&attributes, TRIGGER_STACK_SIZE);
  pthread_sigmask(SIG_BLOCK, &prof, &previous);
  int err = pthread_create(&sched->trigger, &attributes, trigger_loop_without_gvl, sched);
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  pthread_attr_destroy(&attributes);
  if (err != 0) return err;
  pthread_setname_np(sched->trigger, "sonde-trigger");
  sched->trigger_running = true;
  return 0;
}

// ---------------------------------------------------------------------------
// The idle helper, seen from the GVL side.

static void pass_for_idle_helper(void *data) {
  scheduler *sched = data;
  sched->idle_pass(sched->run);
}

static VALUE start_idle_helper(VALUE arg) {
  scheduler *sched = (scheduler *)arg;
  idle_helper_start(&sched->helper, pass_for_idle_helper, sched);
  if (!own_threads_add(sched->run->own, idle_helper_thread(&sched->helper))) {
    rb_raise(rb_eRuntimeError, "sonde: too many threads of Sonde's own");
  }
  return Qnil;
}

static VALUE exception_message(VALUE exception) { return rb_funcall(exception, rb_intern("full_message"), 0); }

// A new Ruby thread needs the GVL once before it can wait without it: if
// the thread that started Sonde then blocked in C code holding the GVL,
// nothing would sample idle threads. So start waits, without the GVL, for
// the helper's first wait.
static void *wait_for_helper_without_gvl(void *arg) {
  scheduler *sched = arg;
  int64_t deadline = clocks_monotonic_ns() + HELPER_START_TIMEOUT_NS;
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 200000};
  while (!idle_helper_started(&sched->helper) && idle_helper_alive(&sched->helper) &&
         clocks_monotonic_ns() < deadline) {
    nanosleep(&pause, NULL);
  }
  return NULL;
}

void scheduler_restart_idle_helper_if_gone(scheduler *sched) {
  if (idle_helper_alive(&sched->helper) || scheduler_stopping(sched)) return;
  own_threads_remove(sched->run->own, idle_helper_thread(&sched->helper));
  int raised = 0;
  rb_protect(start_idle_helper, (VALUE)sched, &raised);
  if (raised) {
    rb_set_errinfo(Qnil); // tried again at the next pass
    return;
  }
  ADD(idle_helper_restarts);
  if (!sched->restart_warned) {
    sched->restart_warned = true;
    fprintf(stderr, "sonde: Sonde's idle-helper thread was killed (Thread#kill); a new one was started "
                    "(Sonde.stats[:idle_helper_restarts] counts them)\n");
  }
}

// ---------------------------------------------------------------------------
// The wall-tick source.

static VALUE join_thread(VALUE thread) { return rb_funcall(thread, rb_intern("join"), 0); }

static void join_ruby_thread_quietly(VALUE thread) {
  if (NIL_P(thread)) return;
  int raised = 0;
  rb_protect(join_thread, thread, &raised);
  if (raised) rb_set_errinfo(Qnil);
}

static void stop_wall_ticks(sonde_run *run) {
  scheduler *sched = run->scheduler;
  scheduler_request_stop(sched);
  if (sched->trigger_running) {
    // The trigger never waits for the GVL, so joining it while holding the
    // GVL cannot deadlock; it wakes from its condition variable at once.
    pthread_join(sched->trigger, NULL);
    sched->trigger_running = false;
  }
  join_ruby_thread_quietly(idle_helper_thread(&sched->helper));
}

static sonde_status start_wall_ticks(sonde_run *run, char *error, size_t error_size) {
  scheduler *sched = run->scheduler;
  sched->run = run;
  int raised = 0;
  rb_protect(start_idle_helper, (VALUE)sched, &raised);
  if (raised) {
    VALUE exception = rb_errinfo();
    rb_set_errinfo(Qnil);
    VALUE message = rb_protect(exception_message, exception, &raised);
    if (raised) rb_set_errinfo(Qnil);
    snprintf(error, error_size, "could not start Sonde's idle-helper thread: %s",
             !raised && RB_TYPE_P(message, T_STRING) ? StringValueCStr(message) : "unknown error");
    stop_wall_ticks(run);
    return SONDE_THREAD_FAILED;
  }
  int err = start_trigger_thread(sched);
  if (err != 0) {
    snprintf(error, error_size, "could not start Sonde's trigger thread: %s", strerror(err));
    stop_wall_ticks(run);
    return SONDE_THREAD_FAILED;
  }
  rb_thread_call_without_gvl(wait_for_helper_without_gvl, sched, NULL, NULL);
  return SONDE_OK;
}

static void mark_wall_ticks(const sonde_run *run) { rb_gc_mark(idle_helper_thread(&run->scheduler->helper)); }

static void add_wall_tick_stats(const sonde_run *run, VALUE stats) {
  scheduler *sched = run->scheduler;
  stats_put_count(stats, "signals_sent", READ(signals_sent));
  stats_put_count(stats, "signal_failures", READ(signal_failures));
  stats_put_count(stats, "idle_requests", READ(idle_requests));
  stats_put_count(stats, "idle_helper_restarts", READ(idle_helper_restarts));
  stats_put_count(stats, "idle_helper_missing", READ(idle_helper_missing));
  stats_put_count(stats, "ticks_skipped", READ(ticks_skipped));
  stats_put_count(stats, "ticks_by_cpu_signal", READ(ticks_by_cpu_signal));
  stats_put_count(stats, "trigger_wakeups", READ(trigger_wakeups));
  stats_put_count(stats, "standing_offers", READ(standing_periods));
  stats_put_count(stats, "offers_taken_late", READ(offers_taken_late));
  stats_put_count(stats, "trigger_parks", READ(parks));
  int64_t parked_since = READ(parked_since_ns);
  int64_t parking_now = parked_since > 0 ? clocks_monotonic_ns() - parked_since : 0;
  stats_put_count(stats, "trigger_parked_ns", READ(parked_ns) + (uint64_t)(parking_now > 0 ? parking_now : 0));
  stats_put_count(stats, "backoff_waits", READ(backoff_waits));
  stats_put_count(stats, "backoff_ns", READ(backoff_ns_total));
  stats_put_count(stats, "pacing_delayed_ticks", pacing_delayed_ticks(&sched->pace));
  stats_put_count(stats, "pacing_charged_ns_total", pacing_charged_ns(&sched->pace));
  rb_hash_aset(stats, ID2SYM(rb_intern("signal_handler_lost")),
               sched->use_signals && signals_sampling_handler_lost() ? Qtrue : Qfalse);
}

// Only the forking thread survives a fork: the trigger and the helper are
// gone, and a lock they held would stay locked.
static void forget_wall_ticks_after_fork(sonde_run *run) {
  scheduler *sched = run->scheduler;
  init_trigger_locks(sched);
  shared_store_release(&sched->stopping, 1);
  sched->trigger_running = false;
  idle_helper_forget_after_fork(&sched->helper);
}

const event_source wall_tick_source = {
    .name = "wall ticks",
    .start = start_wall_ticks,
    .stop = stop_wall_ticks,
    .mark = mark_wall_ticks,
    .add_stats = add_wall_tick_stats,
    .forget_after_fork = forget_wall_ticks_after_fork,
};
