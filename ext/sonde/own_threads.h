// own_threads.h: Sonde's own Ruby threads (the idle helper, and those the
// Ruby side registers: the continuous-mode flusher, exporter threads). They
// are left out of profiles, and out of Thread.list while Sonde runs, so that
// code which kills or joins "every other thread" (test suites, shutdown
// code) neither hangs on them nor stops Sonde.
//
// With the GVL only.
#ifndef SONDE_OWN_THREADS_H
#define SONDE_OWN_THREADS_H

#include <stdbool.h>

#include <ruby.h>

#define MAX_OWN_THREADS 16

typedef struct own_threads {
  VALUE threads[MAX_OWN_THREADS];
  int64_t tids[MAX_OWN_THREADS]; // each one's tid once looked up, else 0
  int count;
} own_threads;

void own_threads_init(own_threads *own);

// Returns false when full (the thread then shows in profiles and Thread.list).
bool own_threads_add(own_threads *own, VALUE thread);
void own_threads_remove(own_threads *own, VALUE thread);
bool own_threads_contains(const own_threads *own, VALUE thread);
// Whether tid is one of these threads': a sample taken on a thread no pass
// has met carries only its tid, and Sonde's own threads are never met.
bool own_threads_has_tid(own_threads *own, int64_t tid);
void own_threads_mark(const own_threads *own);

// Once, at load: prepends to Thread's singleton class a Thread.list that
// leaves out the active run's own threads (the plain list when no run).
void own_threads_install_thread_list_filter(void);

#endif
