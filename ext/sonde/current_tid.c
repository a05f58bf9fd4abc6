// current_tid.c: the cached thread id (see the header). The cache is a
// thread-local written only by its own thread, and by the atfork child
// handler, which runs on the one thread a child has.
#include "current_tid.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread int32_t cached_tid __attribute__((tls_model("initial-exec")));

static void forget_in_child(void) { cached_tid = 0; }

void current_tid_init(void) { pthread_atfork(NULL, NULL, forget_in_child); }

int32_t current_tid_cached(void) {
  if (cached_tid == 0) cached_tid = (int32_t)syscall(SYS_gettid); // gettid() needs glibc 2.30
  return cached_tid;
}
