// trigger_park.c: the trigger's parking place (see the header).
//
// Contexts: trigger_park_wake_signal_safe runs inside SIGPROF handlers and
// inside Ruby's GVL hooks (which hold Ruby's scheduler lock): it only
// exchanges an atomic flag and calls sem_post, which POSIX lists as
// async-signal-safe. The rest runs on the trigger thread, but init (at
// load, with the GVL; in a fork child, before any other thread exists).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 // sem_clockwait; the value Ruby's config.h gives it
#endif
#include "trigger_park.h"

#include <errno.h>
#include <semaphore.h>
#include <time.h>

#include "clocks.h"

static sem_t park_semaphore;
// 1 while the trigger is parked and no wake has been posted since.
static int parked;

bool trigger_park_init(void) {
  __atomic_store_n(&parked, 0, __ATOMIC_SEQ_CST);
  return sem_init(&park_semaphore, 0, 0) == 0;
}

void trigger_park_enter(void) {
  // A post left from an earlier park (a waker that saw that park just as
  // it ended) must not end this one at once: drained first.
  while (sem_trywait(&park_semaphore) == 0) {
  }
  __atomic_store_n(&parked, 1, __ATOMIC_SEQ_CST);
}

bool trigger_park_wait_until(int64_t deadline_ns) {
  struct timespec deadline = {.tv_sec = deadline_ns / NANOS_PER_SECOND, .tv_nsec = deadline_ns % NANOS_PER_SECOND};
  for (;;) {
    if (sem_clockwait(&park_semaphore, CLOCK_MONOTONIC, &deadline) == 0) return true;
    // EINTR: the trigger blocks SIGPROF, but not every signal; wait on.
    // Anything else (ETIMEDOUT, or an error) ends the wait as a deadline.
    if (errno != EINTR) return false;
  }
}

void trigger_park_leave(void) { __atomic_store_n(&parked, 0, __ATOMIC_SEQ_CST); }

void trigger_park_wake_signal_safe(void) {
  if (__atomic_load_n(&parked, __ATOMIC_SEQ_CST) == 0) return;
  if (__atomic_exchange_n(&parked, 0, __ATOMIC_SEQ_CST) == 1) {
    int saved = errno; // a handler's caller saves errno too; a hook's does not
    sem_post(&park_semaphore);
    errno = saved;
  }
}
