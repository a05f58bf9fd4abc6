// trigger_park.h: where the trigger thread waits while no Ruby thread runs,
// and the one call that ends the wait. A parked trigger sends no signal,
// wakes no idle helper and runs no pass: an idle process costs nothing per
// tick. Whatever may mean that something runs again ends the park: a
// RESUMED GVL event (Ruby 3.3+, vm_public.c), a CPU-timer signal
// (signal_sampler.c), stop.
//
// The park is one semaphore and one flag, file statics that live as long
// as the process: a hook or a signal handler that comes late (after its run
// ended) posts into a semaphore that still exists, and wakes nobody. One
// trigger runs at a time (one run at a time), so one park is enough.
#ifndef SONDE_TRIGGER_PARK_H
#define SONDE_TRIGGER_PARK_H

#include <stdbool.h>
#include <stdint.h>

// At load, and in a forked child (whose copy may have been taken while the
// parent's trigger was waiting on it). Returns false when the semaphore
// cannot be made.
bool trigger_park_init(void);

// The trigger, before it waits: from here on trigger_park_wake_signal_safe
// ends the wait. Sequentially consistent: a waker that incremented a
// counter before calling wake is seen by a trigger that reads the counter
// after entering (or the waker sees the park and posts).
void trigger_park_enter(void);

// The trigger: waits until woken or until deadline_ns (monotonic). Returns
// true when woken, false at the deadline. The park stays entered either
// way; leave it with trigger_park_leave.
bool trigger_park_wait_until(int64_t deadline_ns);

// The trigger, after the wait: no wake is pending any more.
void trigger_park_leave(void);

// Async-signal-safe, lock-free, allocation-free: ends the park if the
// trigger is parked (one atomic exchange and, then only, sem_post); else
// one atomic load. From signal handlers, GVL hooks, any thread.
void trigger_park_wake_signal_safe(void);

#endif
