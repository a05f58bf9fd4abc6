// clocks.c: monotonic, epoch and per-thread CPU clocks, in nanoseconds.
// Safe anywhere: in a signal handler, without the GVL, during GC.
#include "clocks.h"

#include <errno.h>

static int64_t to_ns(const struct timespec *time) { return (int64_t)time->tv_sec * NANOS_PER_SECOND + time->tv_nsec; }

int64_t clocks_monotonic_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now); // cannot fail for CLOCK_MONOTONIC and a valid pointer
  return to_ns(&now);
}

int64_t clocks_epoch_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return to_ns(&now);
}

// Linux encodes a thread's CPU clock as the complement of its tid, shifted
// left by three, with the "per thread" bit (4) and the "sched" clock type
// (2): see CPUCLOCK_* in the kernel's posix-timers.h. glibc's
// pthread_getcpuclockid builds the same number from the thread's tid.
#define THREAD_CPU_CLOCK_FLAGS 6

bool clocks_thread_cpu_clock(int64_t tid, clockid_t *clock) {
  if (tid <= 0 || tid > INT32_MAX) return false;
  *clock = (clockid_t)((~(uint32_t)tid << 3) | THREAD_CPU_CLOCK_FLAGS); // two's complement, as the kernel reads it
  return true;
}

int64_t clocks_cpu_ns(clockid_t clock) {
  struct timespec used;
  if (clock_gettime(clock, &used) != 0) return -1;
  return to_ns(&used);
}
