// current_tid.h: the calling thread's Linux thread id, cached in a
// thread-local, for the hooks that run on the thread itself (the GC hook
// during GC, the allocation hook inside an allocation), where a system
// call per event would cost more than the hook's own work.
//
// Reading it allocates nothing and takes no lock (initial-exec TLS); the
// first read on a thread makes one gettid system call. In a forked child
// the one surviving thread's cache is reset by an atfork handler, which
// current_tid_init registers (once, at load, with the GVL).
#ifndef SONDE_CURRENT_TID_H
#define SONDE_CURRENT_TID_H

#include <stdint.h>

void current_tid_init(void);

// Safe during GC and inside allocation hooks; not meant for signal
// handlers (they read the tid with a system call of their own).
int32_t current_tid_cached(void);

#endif
