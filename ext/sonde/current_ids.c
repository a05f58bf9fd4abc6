// current_ids.c: the cached thread and process ids (see the header). The
// thread id is a thread-local written only by its own thread, and by the
// atfork child handler, which runs on the one thread a child has. The
// process id is written at init and by that handler, and read anywhere.
#include "current_ids.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shared.h"

static __thread int32_t cached_tid __attribute__((tls_model("initial-exec")));
static pid_t cached_pid;

static void forget_in_child(void) {
  cached_tid = 0;
  shared_store_relaxed(&cached_pid, getpid());
}

void current_ids_init(void) {
  shared_store_relaxed(&cached_pid, getpid());
  pthread_atfork(NULL, NULL, forget_in_child);
}

int32_t current_tid_cached(void) {
  if (cached_tid == 0) cached_tid = (int32_t)syscall(SYS_gettid); // gettid() needs glibc 2.30
  return cached_tid;
}

pid_t current_pid_signal_safe(void) { return shared_load_relaxed(&cached_pid); }
