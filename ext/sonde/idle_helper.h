// idle_helper.h: the Ruby thread that runs a sampling pass when nobody
// holds the GVL (everyone asleep or in IO), and at every tick in no-signals
// mode. It waits without the GVL; asked by the trigger thread, it takes the
// GVL like any thread and runs the pass.
//
// Killed by the application (Thread#kill through a reference, or at exit),
// it ends like any thread and says so (idle_helper_alive); the sampling
// pass then starts a new one. It never stops sampling by itself.
#ifndef SONDE_IDLE_HELPER_H
#define SONDE_IDLE_HELPER_H

#include <pthread.h>
#include <stdbool.h>

#include <ruby.h>

typedef struct {
  VALUE thread; // with the GVL
  pthread_mutex_t lock;
  pthread_cond_t wakeup;
  bool requested;    // under lock
  bool stopping;     // under lock: the helper's loop ends
  int alive;         // atomic: the thread is between its start and its end
  int started;       // atomic: it has waited once (start waits for this)
} idle_helper;

// Returns false when a lock cannot be made.
bool idle_helper_init(idle_helper *helper);
void idle_helper_destroy(idle_helper *helper);

// Starts the thread (with the GVL; may raise; calls no Ruby method).
// on_request runs a pass, with the GVL, each time the helper is asked.
void idle_helper_start(idle_helper *helper, void (*on_request)(void *), void *data);

// From the trigger thread (no GVL): asks for one pass. Returns false when
// the helper is not alive to hear it.
bool idle_helper_request_from_trigger(idle_helper *helper);

// Ends the helper's loop (stop). Any thread; the caller joins the thread.
void idle_helper_stop(idle_helper *helper);

bool idle_helper_alive(const idle_helper *helper);
// The helper's Ruby thread (Qnil before its first start), for the owner
// to mark, join and leave out of profiles.
VALUE idle_helper_thread(const idle_helper *helper);
bool idle_helper_started(const idle_helper *helper);

// In a forked child: the helper did not survive; new locks.
void idle_helper_forget_after_fork(idle_helper *helper);

#endif
