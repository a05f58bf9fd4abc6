// current_ids.h: the calling thread's Linux thread id and this process's
// id, cached, for the code that runs on every event: the GC hook during
// GC, the allocation hook inside an allocation, the SIGPROF handler and
// the thread event hooks, where a system call per event would cost more
// than the event's own work (glibc caches neither).
//
// Reading either allocates nothing and takes no lock. The thread id lives
// in an initial-exec thread-local; the first read on a thread makes one
// gettid system call. The process id is read once at init. In a forked
// child an atfork handler resets both before any other of Sonde's child
// handlers run: current_ids_init registers it (once, at load, with the
// GVL) before the profiler registers its own.
#ifndef SONDE_CURRENT_IDS_H
#define SONDE_CURRENT_IDS_H

#include <stdint.h>
#include <sys/types.h>

void current_ids_init(void);

// Safe during GC and inside allocation hooks; not meant for signal
// handlers (they read the tid with a system call of their own).
int32_t current_tid_cached(void);

// Safe anywhere, signal handlers included (one relaxed load).
pid_t current_pid_signal_safe(void);

#endif
