// signals.h: owns Sonde's SIGPROF disposition. It never clobbers another
// library's handler, and once it has installed one it never leaves SIGPROF
// without a handler again: a late signal with the default disposition would
// kill the process ("Profiling timer expired").
#ifndef SONDE_SIGNALS_H
#define SONDE_SIGNALS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

// Called from the SIGPROF handler with errno already saved; must be
// async-signal-safe.
typedef void (*signals_callback)(void);

// Installs the sampling handler, which calls on_signal. Refuses when another
// library's handler is installed: returns false and writes a sentence naming
// it into error. Also returns false (with the reason) if sigaction fails.
bool signals_install_sampling_handler(signals_callback on_signal, char *error, size_t error_size);

// Whether SIGPROF's handler is still Sonde's sampling handler. Once it is
// not (another library installed its own while Sonde ran, or reset SIGPROF
// to its default), returns false until the next install, without looking
// again: Sonde never takes SIGPROF back during a run. For the trigger
// thread, before each signal; a syscall, async-signal-safe.
bool signals_sampling_handler_in_place(void);

// True once signals_sampling_handler_in_place has found the handler gone,
// until the next install.
bool signals_sampling_handler_lost(void);

// Replaces the sampling handler by one that does nothing. Idempotent.
void signals_install_empty_handler(void);

// Blocks SIGPROF in the calling thread (the trigger thread must never take it).
void signals_block_in_current_thread(void);

// Sends SIGPROF to a thread. Returns false if it could not be sent.
bool signals_send_sigprof(pthread_t thread);

#endif
