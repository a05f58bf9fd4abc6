// signal_sampler.c: the body of the SIGPROF handler (see the header).
//
// Runs inside a signal handler, on whichever thread the signal reached: it
// reads the active run (run.h), the calling thread's CPU clock and stack
// (cpu_timers.h, vm.h: reads only, every frame checked), writes one slot of
// the capture buffer (atomics) and triggers Ruby's postponed job, which
// Ruby made for signal handlers. It takes no lock, allocates nothing,
// calls nothing that can raise. A sample it cannot take is counted, never
// waited for.
#include "signal_sampler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "capture_buffer.h"
#include "clocks.h"
#include "current_ids.h"
#include "cpu_timers.h"
#include "labels.h"
#include "run.h"
#include "scheduler.h"
#include "shared.h"
#include "stats.h"
#include "vm.h"

static uint64_t signals_received, cpu_signals, tick_signals, stale_timer_signals, wrong_thread_signals,
    foreign_signals, inconsistent_stacks, jobs_not_queued, cpu_samples_by_tick;
// Time inside this handler, all threads (monotonic clock: a handler
// preempted midway counts whole, so this bounds its cost from above).
static uint64_t handler_ns;

#define ADD(counter) shared_add_relaxed(&(counter), 1)

// Only the thread holding the GVL queues the job: Ruby runs it at that
// thread's next safe point. (A thread without the GVL would run it only
// once it gets the GVL back, and before Ruby 3.3 registering from it could
// race with the holder running the queue; its captures wait for the pass.)
static void queue_recording(void) {
  if (!vm_postponed_job_trigger_signal_safe()) ADD(jobs_not_queued);
}

// Fills a claimed slot with the calling thread's stack, or marks why not.
// Returns false when the stack failed a sanity check (the slot is dropped).
static bool read_own_stack(capture_buffer *buffer, capture *slot, const void *self_handle, bool holds_gvl) {
  if (vm_gc_running_signal_safe()) {
    // The GC runs on the GVL holder: if that is us, this CPU went to GC. On
    // another thread, the GC may be moving objects our frames point at, so
    // the stack is read at recording instead (a thread without the GVL
    // cannot change its Ruby stack meanwhile).
    slot->flags |= holds_gvl ? CAPTURE_IN_GC : CAPTURE_STACK_LATER;
    return true;
  }
  uint32_t total_depth = 0;
  int32_t kept = vm_capture_own_stack_signal_safe(self_handle, slot->frame_ids, slot->lines,
                                                  capture_buffer_frame_capacity(buffer), &total_depth);
  if (kept == VM_CAPTURE_INCONSISTENT) return false;
  // No frame at all (the VM between two frames: seen on 3.3 on the main
  // thread) says nothing: the stack is read at recording instead.
  if (kept == VM_CAPTURE_LATER || kept == 0) {
    slot->flags |= CAPTURE_STACK_LATER;
    return true;
  }
  slot->depth = (uint32_t)kept;
  slot->total_depth = total_depth;
  return true;
}

// Publishes a copy of a filled slot (same thread, same moment, same
// stack) as a capture of another kind. A full buffer loses only the copy.
static capture *publish_copy_signal_safe(sonde_run *run, const capture *original, capture_kind kind,
                                         int64_t cpu_ns) {
  capture *slot = capture_buffer_claim_signal_safe(run->captures);
  if (slot == NULL) return NULL;
  slot->kind = kind;
  slot->flags = original->flags;
  slot->tid = original->tid;
  slot->label_set = original->label_set;
  slot->trace = original->trace;
  slot->cpu_ns = cpu_ns;
  slot->at_ns = original->at_ns;
  slot->sequence = capture_buffer_next_sequence_signal_safe(run->captures);
  slot->depth = original->depth;
  slot->total_depth = original->total_depth;
  for (uint32_t i = 0; i < original->depth; i++) {
    slot->frame_ids[i] = original->frame_ids[i];
    slot->lines[i] = original->lines[i];
  }
  capture_buffer_publish_signal_safe(run->captures, slot);
  return slot;
}

// The trigger offered this tick to the GVL holder's CPU signal: the tick's
// capture is a copy of the CPU sample just read, and the pass runs as for
// a tick's own signal. Without the copy the pass reads the holder's stack
// itself.
static void take_offered_tick(sonde_run *run, const capture *cpu_slot) {
  publish_copy_signal_safe(run, cpu_slot, CAPTURE_WALL, 0);
  scheduler_note_tick_signal_safe(run->scheduler);
}

// The tick landed on a thread whose CPU timer is overdue (cpu_timers.h):
// the tick's stack is also its CPU sample, carrying the CPU since the last
// one. Not committed without the copy: the CPU then goes with a later one.
static void take_overdue_cpu_sample(sonde_run *run, const capture *tick_slot, const cpu_timer_hit *hit) {
  scheduler_note_cpu_signal_signal_safe(run->scheduler); // a thread burns CPU: full rate
  if (publish_copy_signal_safe(run, tick_slot, CAPTURE_CPU, hit->cpu_ns) == NULL) return;
  ADD(cpu_samples_by_tick);
  cpu_timers_commit_signal_safe(run->timers, hit);
}

// A sample that cannot be kept is not committed: its CPU time goes with
// the thread's next sample (cpu_timers.h).
static void capture_cpu_sample(sonde_run *run, const cpu_timer_hit *hit, int64_t at_ns) {
  ADD(cpu_signals);
  scheduler_note_cpu_signal_signal_safe(run->scheduler); // a thread burns CPU: full rate
  capture *slot = capture_buffer_claim_signal_safe(run->captures); // full: counted as a drop there
  if (slot == NULL) return;
  const void *holder = vm_gvl_holder_self_signal_safe();
  slot->kind = CAPTURE_CPU;
  slot->tid = hit->tid;
  slot->label_set = labels_current_signal_safe();
  labels_current_trace_signal_safe(&slot->trace);
  slot->cpu_ns = hit->cpu_ns;
  slot->at_ns = at_ns;
  slot->sequence = capture_buffer_next_sequence_signal_safe(run->captures);
  if (holder != NULL) slot->flags |= CAPTURE_HELD_GVL;
  if (!read_own_stack(run->captures, slot, hit->thread_handle, holder != NULL)) {
    capture_buffer_abandon_signal_safe(run->captures, slot);
    ADD(inconsistent_stacks);
    return;
  }
  cpu_timers_commit_signal_safe(run->timers, hit);
  // Read before publishing: once published, the pass may take the slot.
  if (holder != NULL && scheduler_take_offered_tick_signal_safe(run->scheduler)) take_offered_tick(run, slot);
  capture_buffer_publish_signal_safe(run->captures, slot);
  if (holder != NULL) queue_recording();
}

static void capture_tick(sonde_run *run, int64_t at_ns) {
  ADD(tick_signals);
  const void *holder = vm_gvl_holder_self_signal_safe();
  if (holder == NULL) {
    ADD(wrong_thread_signals); // it let go of the GVL since the trigger looked: that tick is lost
    return;
  }
  capture *slot = capture_buffer_claim_signal_safe(run->captures);
  if (slot != NULL) {
    slot->kind = CAPTURE_WALL;
    slot->flags = CAPTURE_HELD_GVL;
    slot->label_set = labels_current_signal_safe();
    labels_current_trace_signal_safe(&slot->trace);
    slot->tid = (int32_t)syscall(SYS_gettid);
    slot->at_ns = at_ns;
    slot->sequence = capture_buffer_next_sequence_signal_safe(run->captures);
    // A stack that cannot be read here is read by the pass: worse, not lost.
    if (!read_own_stack(run->captures, slot, holder, true)) {
      ADD(inconsistent_stacks);
      slot->flags |= CAPTURE_STACK_LATER;
    }
    // Copied before publishing: once published, the pass may take the slot.
    cpu_timer_hit hit;
    if (run->timers != NULL && cpu_timers_on_overdue_tick_signal_safe(run->timers, slot->tid, &hit)) {
      take_overdue_cpu_sample(run, slot, &hit);
    }
    capture_buffer_publish_signal_safe(run->captures, slot);
  }
  scheduler_note_tick_signal_safe(run->scheduler);
  queue_recording();
}

void signal_sampler_on_sigprof_inside_signal_handler(const siginfo_t *info) {
  sonde_run *run = run_active();
  if (run == NULL || run->captures == NULL || scheduler_stopping(run->scheduler)) return;
  int64_t entered = clocks_monotonic_ns();
  ADD(signals_received);
  cpu_timer_hit hit;
  if (run->timers != NULL && cpu_timers_on_signal_signal_safe(run->timers, info, &hit)) {
    capture_cpu_sample(run, &hit, entered);
  } else if (info != NULL && info->si_code == SI_TKILL && info->si_pid == current_pid_signal_safe()) {
    capture_tick(run, entered);
  } else if (info != NULL && info->si_code == SI_TIMER) {
    ADD(stale_timer_signals); // queued by a timer deleted since (its thread ended), or another library's timer
  } else {
    ADD(foreign_signals); // kill -PROF and the like: ignored
  }
  int64_t spent = clocks_monotonic_ns() - entered;
  if (spent > 0) shared_add_relaxed(&handler_ns, (uint64_t)spent);
}

void signal_sampler_reset_stats(void) {
  uint64_t *counters[] = {&signals_received, &cpu_signals,     &tick_signals,        &stale_timer_signals,
                          &wrong_thread_signals, &foreign_signals, &inconsistent_stacks, &jobs_not_queued,
                          &cpu_samples_by_tick, &handler_ns};
  for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) shared_store_relaxed(counters[i], 0);
}

#define LOAD(counter) shared_load_relaxed(&(counter))

void signal_sampler_add_stats(VALUE stats) {
  stats_put_count(stats, "signals_received", LOAD(signals_received));
  stats_put_count(stats, "cpu_signals", LOAD(cpu_signals));
  stats_put_count(stats, "tick_signals", LOAD(tick_signals));
  stats_put_count(stats, "stale_timer_signals", LOAD(stale_timer_signals));
  stats_put_count(stats, "wrong_thread_signals", LOAD(wrong_thread_signals));
  stats_put_count(stats, "foreign_signals", LOAD(foreign_signals));
  stats_put_count(stats, "inconsistent_stacks", LOAD(inconsistent_stacks));
  stats_put_count(stats, "jobs_not_queued", LOAD(jobs_not_queued));
  stats_put_count(stats, "cpu_samples_by_tick", LOAD(cpu_samples_by_tick));
  stats_put_number(stats, "signal_handler_seconds", (double)LOAD(handler_ns) / 1e9);
}
