// modules: cpu_timers.c clocks.c
//
// cpu_timers_test.c: per-thread CPU timers against the thread's own clock.
// A thread that burns CPU gets one SIGPROF per interval of its CPU time,
// delivered to it (not to the process); the CPU times the signals carry add
// up to what its clock says; a thread that sleeps gets none; a deleted
// timer's signals are recognised as stale; a tick finds its own thread's
// overdue timer; a refused timer_create is
// reported as the kernel said it. Pure C with real timers and signals, run
// under AddressSanitizer and UBSan.
#define _GNU_SOURCE
#include "cpu_timers.h"
#include "test_harness.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"

#define INTERVAL_NS (4 * 1000 * 1000) // one kernel tick at 250 Hz
#define BURN_NS (400 * 1000 * 1000)

static cpu_timers *timers;
static volatile sig_atomic_t hits, stale, wrong_thread;
static volatile int64_t carried_ns;
static pid_t expected_tid;

static void on_sigprof(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  (void)context;
  int saved = errno;
  cpu_timer_hit hit;
  if (cpu_timers_on_signal_signal_safe(timers, info, &hit)) {
    if (syscall(SYS_gettid) != expected_tid || hit.tid != expected_tid) wrong_thread++;
    cpu_timers_commit_signal_safe(timers, &hit);
    hits++;
    carried_ns += hit.cpu_ns;
  } else {
    stale++;
  }
  errno = saved;
}

static void install_handler(void) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  action.sa_sigaction = on_sigprof;
  sigaction(SIGPROF, &action, NULL);
}

// Set by test/stress/valgrind_test.rb, which runs this binary under memcheck.
static int signals_are_delayed(void) { return getenv("SONDE_TEST_UNDER_VALGRIND") != NULL; }

static int64_t own_cpu_ns(void) { return clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID); }

static volatile uint64_t burned;

static void burn(int64_t ns) {
  int64_t until = own_cpu_ns() + ns;
  while (own_cpu_ns() < until) burned = burned + 1;
}

static void reset_counts(void) {
  hits = stale = wrong_thread = 0;
  carried_ns = 0;
}

static void test_a_burning_thread_is_signalled_after_its_own_cpu_time(void) {
  reset_counts();
  expected_tid = (pid_t)syscall(SYS_gettid);
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(timers, expected_tid, (const void *)0x1, -1, &ref), CPU_TIMER_ARMED);
  CHECK(ref != 0);
  int64_t before = own_cpu_ns();
  burn(BURN_NS);
  int64_t used = own_cpu_ns() - before;
  cpu_timers_disarm(timers, ref);

  // About used / interval signals: the kernel checks at its tick, so at most
  // one per tick whatever the interval, and the first falls at a random
  // point of the first interval. Under valgrind, which hands a signal to the
  // program only when it next schedules the thread, expirations that pile up
  // meanwhile merge into one (the timer's overrun), so only the upper bound
  // and a looser carried total hold there.
  CHECK(hits >= (signals_are_delayed() ? 1 : used / INTERVAL_NS / 2));
  CHECK(hits <= used / INTERVAL_NS + 2);
  CHECK_EQ_INT(wrong_thread, 0);
  // The CPU the signals carried is the thread's CPU, to within one interval
  // at each end (the first signal counts from the arming; what ran after
  // the last one is not carried: cpu_timers_finish tells it).
  int64_t error = carried_ns - used;
  if (error < 0) error = -error;
  CHECK(error <= (signals_are_delayed() ? used / 2 : 2 * INTERVAL_NS));
  cpu_timer_stats stats = cpu_timers_stats(timers);
  CHECK_EQ_INT(stats.live, 0);
  CHECK(stats.committed >= (uint64_t)hits);
}

static void test_a_disarmed_timer_sends_nothing_more(void) {
  reset_counts();
  expected_tid = (pid_t)syscall(SYS_gettid);
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(timers, expected_tid, NULL, -1, &ref), CPU_TIMER_ARMED);
  burn(BURN_NS / 4);
  cpu_timers_disarm(timers, ref);
  cpu_timers_disarm(timers, ref); // twice: a no-op
  int seen = hits;
  burn(BURN_NS / 4);
  // A signal queued before the deletion may still come: it is stale.
  CHECK(hits == seen);
}

// Every nanosecond since count_from is carried by a signal or told by
// cpu_timers_finish, which deletes the timer: a thread's whole CPU, short
// ones included (the kernel signals only at its tick).
static void test_finish_tells_the_cpu_no_signal_covered(void) {
  reset_counts();
  expected_tid = (pid_t)syscall(SYS_gettid);
  int64_t start = own_cpu_ns();
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(timers, expected_tid, NULL, start, &ref), CPU_TIMER_ARMED);
  burn(BURN_NS / 4);
  int64_t now = own_cpu_ns();
  int64_t uncovered = cpu_timers_finish(timers, ref, now);
  CHECK(uncovered >= 0);
  int64_t error = carried_ns + uncovered - (now - start);
  if (error < 0) error = -error;
  CHECK(error <= 100 * 1000); // what the handler's own clock reads cost
  CHECK_EQ_INT(cpu_timers_finish(timers, ref, now), -1); // its timer is gone
  int seen = hits;
  burn(BURN_NS / 8);
  CHECK(hits == seen);
  CHECK_EQ_INT(cpu_timers_stats(timers).live, 0);
  // A count_from after now (a stale reading) counts from the arming.
  CHECK_EQ_INT(cpu_timers_arm(timers, expected_tid, NULL, own_cpu_ns() + BURN_NS, &ref), CPU_TIMER_ARMED);
  CHECK(cpu_timers_finish(timers, ref, own_cpu_ns()) < BURN_NS);
}

// A tick stands in for a timer the kernel did not fire (its tick never
// found the thread running): with SIGPROF blocked, as it is inside the
// handler of the tick, nothing else commits, so the lookup sees the CPU
// since the arming, and only once it is 2 intervals or more.
static void test_an_overdue_timer_is_found_by_the_threads_tick(void) {
  reset_counts();
  expected_tid = (pid_t)syscall(SYS_gettid);
  sigset_t prof, saved;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, &saved);
  int64_t start = own_cpu_ns();
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(timers, expected_tid, (const void *)0x2, start, &ref), CPU_TIMER_ARMED);
  cpu_timer_hit hit;
  CHECK(!cpu_timers_on_overdue_tick_signal_safe(timers, expected_tid, &hit)); // not 2 intervals yet
  burn(3 * INTERVAL_NS);
  CHECK(!cpu_timers_on_overdue_tick_signal_safe(timers, expected_tid + 1, &hit)); // another thread's tick
  CHECK(cpu_timers_on_overdue_tick_signal_safe(timers, expected_tid, &hit));
  CHECK(hit.tid == expected_tid && hit.thread_handle == (const void *)0x2);
  CHECK(hit.cpu_ns >= 3 * INTERVAL_NS && hit.cpu_ns <= own_cpu_ns() - start);
  uint64_t committed = cpu_timers_stats(timers).committed;
  cpu_timers_commit_signal_safe(timers, &hit);
  CHECK(!cpu_timers_on_overdue_tick_signal_safe(timers, expected_tid, &hit)); // committed: counts from there
  CHECK_EQ_INT(cpu_timers_stats(timers).committed, committed + 1);
  cpu_timers_disarm(timers, ref);
  burn(3 * INTERVAL_NS);
  CHECK(!cpu_timers_on_overdue_tick_signal_safe(timers, expected_tid, &hit)); // no live timer
  // The kernel's signal, queued while blocked, is now stale.
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  CHECK(hits == 0);
}

typedef struct {
  pid_t tid;
  volatile int stop;
} sleeper;

static void *sleep_until_told(void *arg) {
  sleeper *s = arg;
  s->tid = (pid_t)syscall(SYS_gettid);
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
  while (!s->stop) nanosleep(&pause, NULL);
  return NULL;
}

static void test_an_idle_thread_gets_no_signal(void) {
  reset_counts();
  sleeper s = {0, 0};
  pthread_t thread;
  CHECK_EQ_INT(pthread_create(&thread, NULL, sleep_until_told, &s), 0);
  while (__atomic_load_n(&s.tid, __ATOMIC_ACQUIRE) == 0) sched_yield();
  expected_tid = s.tid;
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(timers, s.tid, NULL, -1, &ref), CPU_TIMER_ARMED);
  // This thread burns; the sleeper's clock barely moves: its timer is silent.
  burn(BURN_NS / 4);
  CHECK(hits <= 1);
  s.stop = 1;
  pthread_join(thread, NULL);
  cpu_timers_disarm(timers, ref);
}

static void test_a_gone_thread_and_a_refusing_kernel(void) {
  cpu_timer_ref ref = 1;
  // No such thread: its clock cannot be made.
  CHECK_EQ_INT(cpu_timers_arm(timers, 0x7ffffff0, NULL, -1, &ref), CPU_TIMER_THREAD_GONE);
  CHECK(ref == 0);
  // Counted from birth, the clock is not read first: the kernel refuses the timer.
  CHECK_EQ_INT(cpu_timers_arm(timers, 0x7ffffff0, NULL, 0, &ref), CPU_TIMER_THREAD_GONE);
  CHECK(ref == 0);
  cpu_timers *refusing = cpu_timers_new(INTERVAL_NS, 42);
  cpu_timers_fail_creation_for_testing(refusing, EAGAIN);
  CHECK_EQ_INT(cpu_timers_arm(refusing, (pid_t)syscall(SYS_gettid), NULL, -1, &ref), CPU_TIMER_REFUSED);
  CHECK(!cpu_timers_stats(refusing).unavailable);
  cpu_timers_fail_creation_for_testing(refusing, EPERM); // seccomp's answer
  CHECK_EQ_INT(cpu_timers_arm(refusing, (pid_t)syscall(SYS_gettid), NULL, -1, &ref), CPU_TIMER_UNAVAILABLE);
  cpu_timer_stats stats = cpu_timers_stats(refusing);
  CHECK(stats.unavailable);
  CHECK_EQ_INT(stats.unavailable_errno, EPERM);
  CHECK_EQ_INT(stats.failures, 2);
  // Remembered: no third attempt reaches the kernel, nor counts.
  cpu_timers_fail_creation_for_testing(refusing, 0);
  CHECK_EQ_INT(cpu_timers_arm(refusing, (pid_t)syscall(SYS_gettid), NULL, -1, &ref), CPU_TIMER_UNAVAILABLE);
  CHECK_EQ_INT(cpu_timers_stats(refusing).failures, 2);
  cpu_timers_free(refusing);
}

static void test_disarm_all_closes(void) {
  cpu_timers *closing = cpu_timers_new(INTERVAL_NS, 7);
  cpu_timer_ref refs[3];
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(cpu_timers_arm(closing, (pid_t)syscall(SYS_gettid), NULL, -1, &refs[i]), CPU_TIMER_ARMED);
  CHECK_EQ_INT(cpu_timers_stats(closing).live, 3);
  cpu_timers_disarm_all(closing);
  CHECK_EQ_INT(cpu_timers_stats(closing).live, 0);
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(closing, (pid_t)syscall(SYS_gettid), NULL, -1, &ref), CPU_TIMER_REFUSED);
  // Forgetting after a fork drops records without deleting (nothing left here to delete).
  cpu_timers_forget_after_fork(closing);
  CHECK_EQ_INT(cpu_timers_stats(closing).live, 0);
  cpu_timers_free(closing);
}

// Records are found from a cursor rather than from the first one (thread
// churn retires most of them between two recyclings); records recycled
// below the cursor must be found again rather than a chunk added.
static void test_retired_records_are_reused(void) {
  cpu_timers *churning = cpu_timers_new(INTERVAL_NS, 9);
  pid_t tid = (pid_t)syscall(SYS_gettid);
  enum { CHUNK = 256 }; // cpu_timers.c's CHUNK_SIZE
  cpu_timer_ref refs[CHUNK];
  for (int i = 0; i < CHUNK; i++) CHECK_EQ_INT(cpu_timers_arm(churning, tid, NULL, -1, &refs[i]), CPU_TIMER_ARMED);
  CHECK_EQ_INT(refs[CHUNK - 1] >> 32, CHUNK - 1);
  for (int i = 0; i < CHUNK; i++) cpu_timers_disarm(churning, refs[i]);
  // The first chunk is all retired: they are recycled, the first one taken.
  cpu_timer_ref ref;
  CHECK_EQ_INT(cpu_timers_arm(churning, tid, NULL, -1, &ref), CPU_TIMER_ARMED);
  CHECK_EQ_INT(ref >> 32, 0);
  CHECK_EQ_INT(cpu_timers_arm(churning, tid, NULL, -1, &refs[0]), CPU_TIMER_ARMED);
  CHECK_EQ_INT(refs[0] >> 32, 1);
  cpu_timers_disarm_all(churning);
  cpu_timers_free(churning);
}

static void test_a_signal_from_elsewhere_is_not_ours(void) {
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  cpu_timer_hit hit;
  info.si_code = SI_TKILL; // pthread_kill
  CHECK(!cpu_timers_on_signal_signal_safe(timers, &info, &hit));
  info.si_code = SI_TIMER; // a timer's, with a value that names no live record
  info.si_value.sival_ptr = (void *)(uintptr_t)((UINT64_C(5) << 32) | 12345);
  CHECK(!cpu_timers_on_signal_signal_safe(timers, &info, &hit));
  info.si_value.sival_ptr = (void *)(uintptr_t)(UINT64_C(1) << 60); // index far out of range
  CHECK(!cpu_timers_on_signal_signal_safe(timers, &info, &hit));
  CHECK(!cpu_timers_on_signal_signal_safe(timers, NULL, &hit));
}

int main(void) {
  install_handler();
  timers = cpu_timers_new(INTERVAL_NS, 1234);
  CHECK(timers != NULL);
  CHECK(cpu_timers_new(0, 1) == NULL);
  test_a_burning_thread_is_signalled_after_its_own_cpu_time();
  test_a_disarmed_timer_sends_nothing_more();
  test_finish_tells_the_cpu_no_signal_covered();
  test_an_overdue_timer_is_found_by_the_threads_tick();
  test_an_idle_thread_gets_no_signal();
  test_a_gone_thread_and_a_refusing_kernel();
  test_disarm_all_closes();
  test_retired_records_are_reused();
  test_a_signal_from_elsewhere_is_not_ours();
  cpu_timers_disarm_all(timers);
  // A queued signal of a deleted timer may still arrive: let it, then free.
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
  cpu_timers_free(timers);
  return test_summary("cpu_timers");
}
