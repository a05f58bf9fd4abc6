// cpu_timers.c: per-thread CPU timers (see the header).
//
// Two contexts:
// - everything but the signal function runs under this module's mutex, from
//   threads with the GVL (the pass, the thread-begin hook, stop) or without
//   (the trigger thread, when another library took SIGPROF over). It may
//   allocate and make system calls; it never calls Ruby.
// - cpu_timers_on_signal_signal_safe runs inside the SIGPROF handler: atomic
//   loads and stores, one clock read, no lock, no allocation.
//
// The handler finds its thread's record from the signal alone: the timer's
// sigev_value holds (record index << 32 | generation). Records live in
// chunks that are never moved or freed while timers may fire, and a record
// whose timer was deleted gets generation 0 first, so a signal that was
// already queued (the kernel keeps a queued timer signal pending after
// timer_delete) finds a generation that no longer matches. A retired
// record is reused only once no handler has been seen inside this module
// after it was retired, so a handler that passed the generation check just
// before never sees its record change under it.
#define _GNU_SOURCE
#include "cpu_timers.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "shared.h"
#include "xorshift.h"

// Records per chunk and chunks at most: 16384 threads timed at once. A
// thread beyond that goes without a timer (counted as a failure).
// glibc before 2.35 spells the SIGEV_THREAD_ID target only as a union member.
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define CHUNK_SHIFT 8
#define CHUNK_SIZE (1u << CHUNK_SHIFT)
#define MAX_CHUNKS 64

#define GENERATION_BITS 32
#define GENERATION_MASK ((UINT64_C(1) << GENERATION_BITS) - 1)

enum { RECORD_FREE, RECORD_LIVE, RECORD_RETIRED };

typedef struct {
  uint32_t generation; // atomic; 0 while not live
  int32_t tid;
  const void *thread_handle;
  int64_t last_cpu_ns; // written at arming, then only by the thread's own handler
  timer_t timer;
  uint8_t state; // under the lock
} timer_record;

struct cpu_timers {
  int64_t interval_ns;
  pthread_mutex_t lock;
  timer_record *chunks[MAX_CHUNKS]; // published with release, read by handlers with acquire
  uint32_t chunk_count;
  uint32_t retired; // records waiting for quiescence
  // No record below it is free: arming scans from here, not from 0. Under
  // thread churn most records are retired between two recyclings, and a
  // scan from 0 walked past all of them at every thread's start.
  uint32_t scan_from;
  uint32_t next_generation;
  uint64_t random_state;
  bool closed; // disarm_all was called: arm refuses
  bool unavailable;
  int unavailable_errno;
  int fail_creation_with; // tests
  // Shared with handlers, atomic:
  uint32_t handlers_inside;
  uint64_t live, signals, committed, failures;
  int64_t sampled_cpu_ns;
};

// A wall tick stands in for a thread's CPU signal once the thread has
// used this many intervals of CPU since its last sample (see the header).
#define OVERDUE_INTERVALS 2

cpu_timers *cpu_timers_new(int64_t interval_ns, uint64_t seed) {
  if (interval_ns <= 0) return NULL;
  cpu_timers *timers = calloc(1, sizeof(*timers));
  if (timers == NULL) return NULL;
  if (pthread_mutex_init(&timers->lock, NULL) != 0) {
    free(timers);
    return NULL;
  }
  timers->interval_ns = interval_ns;
  timers->random_state = seed ? seed : UINT64_C(0x2545f4914f6cdd1d);
  // Generations never repeat within a process, across runs too: a stale
  // signal from a previous run cannot match a record of this one.
  static uint32_t generations;
  timers->next_generation = shared_add_then_load_relaxed(&generations, 1u << 20);
  return timers;
}

void cpu_timers_free(cpu_timers *timers) {
  if (timers == NULL) return;
  for (uint32_t i = 0; i < timers->chunk_count; i++) free(timers->chunks[i]);
  pthread_mutex_destroy(&timers->lock);
  free(timers);
}

static uint32_t take_generation(cpu_timers *timers) {
  uint32_t generation = ++timers->next_generation;
  if (generation == 0) generation = ++timers->next_generation;
  return generation;
}

static timer_record *record_at(const cpu_timers *timers, uint32_t index) {
  timer_record *chunk = shared_load_acquire(&timers->chunks[index >> CHUNK_SHIFT]);
  return chunk ? &chunk[index & (CHUNK_SIZE - 1)] : NULL;
}

// Retired records become free once no handler is inside this module: any
// handler that could have read one before it was retired has left.
static void recycle_retired_if_quiet(cpu_timers *timers) {
  if (timers->retired == 0 || shared_load_seq(&timers->handlers_inside) != 0) return;
  for (uint32_t i = 0; i < timers->chunk_count * CHUNK_SIZE; i++) {
    timer_record *record = record_at(timers, i);
    if (record->state == RECORD_RETIRED) record->state = RECORD_FREE;
  }
  timers->retired = 0;
  timers->scan_from = 0;
}

static bool find_free_record(cpu_timers *timers, uint32_t *index) {
  for (int attempt = 0; attempt < 2; attempt++) {
    for (uint32_t i = timers->scan_from; i < timers->chunk_count * CHUNK_SIZE; i++) {
      if (record_at(timers, i)->state == RECORD_FREE) {
        *index = i;
        timers->scan_from = i + 1;
        return true;
      }
    }
    timers->scan_from = timers->chunk_count * CHUNK_SIZE;
    if (attempt == 0) recycle_retired_if_quiet(timers);
  }
  if (timers->chunk_count == MAX_CHUNKS) return false;
  timer_record *chunk = calloc(CHUNK_SIZE, sizeof(timer_record));
  if (chunk == NULL) return false;
  *index = timers->chunk_count * CHUNK_SIZE;
  timers->scan_from = *index + 1;
  shared_store_release(&timers->chunks[timers->chunk_count++], chunk);
  return true;
}

static bool is_policy_refusal(int err) { return err == EPERM || err == ENOSYS || err == ENOTSUP || err == EACCES; }

static cpu_timer_result create_timer(cpu_timers *timers, clockid_t clock, int64_t tid, uint64_t value,
                                     timer_t *timer) {
  struct sigevent event;
  memset(&event, 0, sizeof(event));
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGPROF;
  event.sigev_value.sival_ptr = (void *)(uintptr_t)value;
  event.sigev_notify_thread_id = (pid_t)tid; // the thread the kernel signals
  int err = 0;
  if (timers->fail_creation_with != 0) {
    err = timers->fail_creation_with;
  } else if (timer_create(clock, &event, timer) != 0) {
    err = errno;
  }
  if (err == 0) return CPU_TIMER_ARMED;
  if (is_policy_refusal(err)) {
    timers->unavailable = true;
    timers->unavailable_errno = err;
    return CPU_TIMER_UNAVAILABLE;
  }
  // EINVAL: the clock's thread is gone; EAGAIN: a kernel limit on timers or queued signals.
  return err == EINVAL ? CPU_TIMER_THREAD_GONE : CPU_TIMER_REFUSED;
}

static struct timespec timespec_of(int64_t ns) {
  return (struct timespec){.tv_sec = ns / NANOS_PER_SECOND, .tv_nsec = ns % NANOS_PER_SECOND};
}

cpu_timer_result cpu_timers_arm(cpu_timers *timers, int64_t tid, const void *thread_handle, int64_t count_from_ns,
                                cpu_timer_ref *ref) {
  *ref = 0;
  clockid_t clock;
  if (!clocks_thread_cpu_clock(tid, &clock)) return CPU_TIMER_THREAD_GONE;
  pthread_mutex_lock(&timers->lock);
  cpu_timer_result result = CPU_TIMER_REFUSED;
  uint32_t index;
  if (timers->unavailable) {
    result = CPU_TIMER_UNAVAILABLE;
  } else if (timers->closed) {
    result = CPU_TIMER_REFUSED;
  } else if (!find_free_record(timers, &index)) {
    result = CPU_TIMER_REFUSED; // 16384 threads timed at once, or out of memory
    shared_add_relaxed(&timers->failures, 1);
  } else {
    // Counted from the thread's birth (0: the thread-begin hook on 3.3+),
    // the clock need not be read: no thread's clock is below 0, and a gone
    // thread is told by timer_create. A system call less for each thread.
    int64_t cpu_now = count_from_ns == 0 ? 0 : clocks_cpu_ns(clock);
    if (cpu_now < 0) {
      result = CPU_TIMER_THREAD_GONE;
    } else {
      timer_record *record = record_at(timers, index);
      uint32_t generation = take_generation(timers);
      uint64_t value = ((uint64_t)index << GENERATION_BITS) | generation;
      int64_t first_expiry = 1 + (int64_t)(xorshift_next(&timers->random_state) % (uint64_t)timers->interval_ns);
      result = create_timer(timers, clock, tid, value, &record->timer);
      if (result == CPU_TIMER_REFUSED || result == CPU_TIMER_UNAVAILABLE) {
        shared_add_relaxed(&timers->failures, 1);
      }
      if (result == CPU_TIMER_ARMED) {
        record->tid = (int32_t)tid;
        record->thread_handle = thread_handle;
        record->last_cpu_ns = count_from_ns >= 0 && count_from_ns <= cpu_now ? count_from_ns : cpu_now;
        record->state = RECORD_LIVE;
        // Published before the timer can fire: its first signal must find it.
        shared_store_release(&record->generation, generation);
        struct itimerspec spec = {.it_interval = timespec_of(timers->interval_ns), .it_value = timespec_of(first_expiry)};
        if (timer_settime(record->timer, 0, &spec, NULL) != 0) {
          shared_store_seq(&record->generation, 0);
          timer_delete(record->timer);
          record->state = RECORD_RETIRED;
          timers->retired++;
          result = CPU_TIMER_REFUSED;
          shared_add_relaxed(&timers->failures, 1);
        } else {
          *ref = value;
          shared_add_relaxed(&timers->live, 1);
        }
      }
    }
  }
  pthread_mutex_unlock(&timers->lock);
  return result;
}

// Under the lock.
// The generation is cleared before the handlers are counted (seq_cst on
// both sides): a handler either counted itself in first, and holds off the
// recycling, or it reads generation 0.
static void retire(cpu_timers *timers, timer_record *record) {
  shared_store_seq(&record->generation, 0);
  timer_delete(record->timer);
  record->state = RECORD_RETIRED;
  timers->retired++;
  shared_sub_relaxed(&timers->live, 1);
}

void cpu_timers_disarm(cpu_timers *timers, cpu_timer_ref ref) {
  if (ref == 0) return;
  uint32_t index = (uint32_t)(ref >> GENERATION_BITS), generation = (uint32_t)(ref & GENERATION_MASK);
  pthread_mutex_lock(&timers->lock);
  if (index < timers->chunk_count * CHUNK_SIZE) {
    timer_record *record = record_at(timers, index);
    if (record->state == RECORD_LIVE && shared_load_relaxed(&record->generation) == generation) {
      retire(timers, record);
    }
  }
  pthread_mutex_unlock(&timers->lock);
}

// After the record's generation is cleared, a handler that passed the
// check before may still be about to commit: it is inside until it has.
// Handlers run a few dozen instructions; yielding covers one preempted.
static void wait_for_handlers_to_leave(cpu_timers *timers) {
  for (int spins = 0; spins < 1000 && shared_load_seq(&timers->handlers_inside) != 0; spins++) {
    sched_yield();
  }
}

int64_t cpu_timers_finish(cpu_timers *timers, cpu_timer_ref ref, int64_t cpu_now_ns) {
  if (ref == 0) return -1;
  uint32_t index = (uint32_t)(ref >> GENERATION_BITS), generation = (uint32_t)(ref & GENERATION_MASK);
  int64_t uncovered = -1;
  pthread_mutex_lock(&timers->lock);
  if (index < timers->chunk_count * CHUNK_SIZE) {
    timer_record *record = record_at(timers, index);
    if (record->state == RECORD_LIVE && shared_load_relaxed(&record->generation) == generation) {
      retire(timers, record);
      wait_for_handlers_to_leave(timers);
      int64_t covered = shared_load_acquire(&record->last_cpu_ns);
      uncovered = cpu_now_ns > covered ? cpu_now_ns - covered : 0;
    }
  }
  pthread_mutex_unlock(&timers->lock);
  return uncovered;
}

void cpu_timers_disarm_all(cpu_timers *timers) {
  pthread_mutex_lock(&timers->lock);
  timers->closed = true;
  for (uint32_t i = 0; i < timers->chunk_count * CHUNK_SIZE; i++) {
    timer_record *record = record_at(timers, i);
    if (record->state == RECORD_LIVE) retire(timers, record);
  }
  pthread_mutex_unlock(&timers->lock);
}

void cpu_timers_forget_after_fork(cpu_timers *timers) {
  pthread_mutex_init(&timers->lock, NULL);
  for (uint32_t i = 0; i < timers->chunk_count * CHUNK_SIZE; i++) {
    timer_record *record = record_at(timers, i);
    shared_store_relaxed(&record->generation, 0);
    record->state = RECORD_FREE;
  }
  timers->closed = true; // the child's own run makes its own timers
  timers->retired = 0;
  timers->scan_from = 0;
  shared_store_relaxed(&timers->live, 0);
  shared_store_relaxed(&timers->handlers_inside, 0);
}

// The calling thread's hit on its live record: the CPU since its last
// committed sample, read from its clock now. Inside the handler.
static cpu_timer_hit hit_now_signal_safe(const timer_record *record, uint32_t index, uint32_t generation) {
  int64_t now = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  int64_t before = shared_load_relaxed(&record->last_cpu_ns);
  return (cpu_timer_hit){
      .tid = record->tid,
      .thread_handle = record->thread_handle,
      .cpu_ns = now > before ? now - before : 0,
      .index = index,
      .generation = generation,
      .clock_ns = now,
  };
}

bool cpu_timers_on_signal_signal_safe(cpu_timers *timers, const siginfo_t *info, cpu_timer_hit *hit) {
  if (info == NULL || info->si_code != SI_TIMER) return false;
  uint64_t value = (uint64_t)(uintptr_t)info->si_value.sival_ptr;
  uint32_t index = (uint32_t)(value >> GENERATION_BITS), generation = (uint32_t)(value & GENERATION_MASK);
  if (generation == 0 || index >= MAX_CHUNKS * CHUNK_SIZE) return false;
  shared_add_seq(&timers->handlers_inside, 1);
  bool ours = false;
  timer_record *record = record_at(timers, index);
  if (record != NULL && shared_load_seq(&record->generation) == generation) {
    *hit = hit_now_signal_safe(record, index, generation);
    shared_add_relaxed(&timers->signals, 1);
    ours = true;
  }
  shared_sub_release(&timers->handlers_inside, 1);
  return ours;
}

// The calling thread's record, as its last lookup found it (index << 32 |
// generation; 0: none yet). Initial-exec: read first inside a handler.
static __thread uint64_t own_record_ref __attribute__((tls_model("initial-exec")));

// Inside the handler, counted in handlers_inside: retired records are not
// recycled meanwhile, so a record's tid cannot change under the reading.
// The live record of thread tid (its index and generation set), or NULL.
static const timer_record *own_live_record_signal_safe(cpu_timers *timers, int32_t tid, uint32_t *index,
                                                       uint32_t *generation) {
  uint64_t cached = own_record_ref;
  if (cached != 0) {
    uint32_t at = (uint32_t)(cached >> GENERATION_BITS), expected = (uint32_t)(cached & GENERATION_MASK);
    const timer_record *record = record_at(timers, at);
    if (record != NULL && shared_load_seq(&record->generation) == expected && record->tid == tid) {
      *index = at;
      *generation = expected;
      return record;
    }
  }
  for (uint32_t chunk = 0; chunk < MAX_CHUNKS; chunk++) {
    if (shared_load_acquire(&timers->chunks[chunk]) == NULL) break;
    for (uint32_t slot = 0; slot < CHUNK_SIZE; slot++) {
      uint32_t at = (chunk << CHUNK_SHIFT) | slot;
      const timer_record *record = record_at(timers, at);
      uint32_t live = shared_load_seq(&record->generation);
      if (live == 0 || record->tid != tid) continue;
      own_record_ref = ((uint64_t)at << GENERATION_BITS) | live;
      *index = at;
      *generation = live;
      return record;
    }
  }
  return NULL;
}

bool cpu_timers_on_overdue_tick_signal_safe(cpu_timers *timers, int32_t tid, cpu_timer_hit *hit) {
  shared_add_seq(&timers->handlers_inside, 1);
  bool overdue = false;
  uint32_t index, generation;
  const timer_record *record = own_live_record_signal_safe(timers, tid, &index, &generation);
  if (record != NULL) {
    *hit = hit_now_signal_safe(record, index, generation);
    overdue = hit->cpu_ns >= OVERDUE_INTERVALS * timers->interval_ns;
  }
  shared_sub_release(&timers->handlers_inside, 1);
  return overdue;
}

void cpu_timers_commit_signal_safe(cpu_timers *timers, const cpu_timer_hit *hit) {
  if (hit->clock_ns < 0) return;
  shared_add_seq(&timers->handlers_inside, 1);
  timer_record *record = record_at(timers, hit->index);
  // Only the thread's own handler writes last_cpu_ns, one signal at a time
  // (SIGPROF is blocked while its handler runs).
  if (record != NULL && shared_load_seq(&record->generation) == hit->generation) {
    shared_store_relaxed(&record->last_cpu_ns, hit->clock_ns);
    shared_add_relaxed(&timers->sampled_cpu_ns, hit->cpu_ns);
    shared_add_relaxed(&timers->committed, 1);
  }
  shared_sub_release(&timers->handlers_inside, 1);
}

cpu_timer_stats cpu_timers_stats(cpu_timers *timers) {
  cpu_timer_stats stats = {
      .live = shared_load_relaxed(&timers->live),
      .signals = shared_load_relaxed(&timers->signals),
      .committed = shared_load_relaxed(&timers->committed),
      .failures = shared_load_relaxed(&timers->failures),
      .sampled_cpu_ns = shared_load_relaxed(&timers->sampled_cpu_ns),
  };
  pthread_mutex_lock(&timers->lock);
  stats.unavailable = timers->unavailable;
  stats.unavailable_errno = timers->unavailable_errno;
  pthread_mutex_unlock(&timers->lock);
  return stats;
}

bool cpu_timers_any_refused(cpu_timers *timers) { return shared_load_relaxed(&timers->failures) != 0; }

void cpu_timers_fail_creation_for_testing(cpu_timers *timers, int err) {
  pthread_mutex_lock(&timers->lock);
  timers->fail_creation_with = err;
  pthread_mutex_unlock(&timers->lock);
}
