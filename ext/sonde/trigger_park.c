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
#include "shared.h"

static sem_t park_semaphore;
// 1 while the trigger is parked and no wake has been posted since.
static int parked;

bool trigger_park_init(void) {
  shared_store_seq(&parked, 0);
  return sem_init(&park_semaphore, 0, 0) == 0;
}

void trigger_park_enter(void) {
  // A post left from an earlier park (a waker that saw that park just as
  // it ended) must not end this one at once: drained first.
  while (sem_trywait(&park_semaphore) == 0) {
  }
  shared_store_seq(&parked, 1);
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

void trigger_park_leave(void) { shared_store_seq(&parked, 0); }

void trigger_park_wake_signal_safe(void) {
  if (shared_load_seq(&parked) == 0) return;
  if (shared_exchange_seq(&parked, 0) == 1) {
    int saved = errno; // a handler's caller saves errno too; a hook's does not
    sem_post(&park_semaphore);
    errno = saved;
  }
}
