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

bool clocks_thread_cpu_clock(pthread_t thread, clockid_t *clock) { return pthread_getcpuclockid(thread, clock) == 0; }

int64_t clocks_cpu_ns(clockid_t clock) {
  struct timespec used;
  if (clock_gettime(clock, &used) != 0) return -1;
  return to_ns(&used);
}
