// signals.h: owns Sonde's SIGPROF disposition. It never clobbers another
// library's handler, and once it has installed one it never leaves SIGPROF
// without a handler again: a late signal with the default disposition would
// kill the process ("Profiling timer expired").
#ifndef SONDE_SIGNALS_H
#define SONDE_SIGNALS_H

#include <pthread.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stddef.h>

#include <signal.h>

#include "status.h"

// Called from the SIGPROF handler with errno already saved and the signal's
// siginfo (what sent it); must be async-signal-safe.
typedef void (*signals_callback)(const siginfo_t *info);

// Installs the sampling handler, which calls on_signal. Refuses when another
// library's handler is installed: returns SONDE_SIGNAL_CONFLICT and writes a
// sentence naming it into error; SONDE_SIGNAL_FAILED (with the reason) if
// sigaction fails.
sonde_status signals_install_sampling_handler(signals_callback on_signal, char *error, size_t error_size);

// Whether SIGPROF's handler is still Sonde's sampling handler. Once it is
// not (another library installed its own while Sonde ran, or reset SIGPROF
// to its default), returns false until the next install, without looking
// again: Sonde never takes SIGPROF back during a run. For the trigger
// thread, before each signal; a syscall, async-signal-safe.
bool signals_sampling_handler_in_place(void);

// True once signals_sampling_handler_in_place has found the handler gone,
// until the next install.
bool signals_sampling_handler_lost(void);

// Replaces the sampling handler by one that does nothing, and drops the
// callback (a handler already running may still be calling it). Idempotent.
void signals_install_empty_handler(void);

// Waits until no sampling handler is running on any thread. After
// signals_install_empty_handler, once this returns, the callback is never
// called again and what it read may be freed.
void signals_wait_for_running_handlers(void);

// Blocks SIGPROF in the calling thread (the trigger thread must never take it).
void signals_block_in_current_thread(void);

typedef enum { SIGNAL_SENT, SIGNAL_FAILED, SIGNAL_HANDLER_LOST } signal_send_result;

// Sends SIGPROF to a thread of this process, by its Linux thread id, if
// Sonde's handler is still in place, checking and sending under one lock
// that signals_give_up also takes: once signals_give_up has returned, no
// signal of Sonde's is on its way. For the trigger thread. A thread that
// has ended since its tid was read is SIGNAL_FAILED (see signals.c).
signal_send_result signals_send_sigprof_if_handler_in_place(pid_t tid);

// The application is about to install its own SIGPROF disposition (Ruby's
// trap("PROF")): Sonde stops sending first, so that a signal already decided
// on cannot reach the new disposition (SIG_DFL would kill the process). Not
// async-signal-safe; waits for a send in progress (microseconds).
void signals_give_up(void);

// Registers (once, at load) the fork handlers that hold the send lock
// across fork: no send of Sonde's is under way when a process forks.
// The child re-creates the lock (signals_reset_in_forked_child).
void signals_hold_sends_across_fork(void);

// The one-line warning for stderr when the handler is found gone or given up.
void signals_warn_handler_lost(void);

// In a forked child: the lock may have been held by the trigger thread,
// which the child does not have.
void signals_reset_in_forked_child(void);

#endif
