// idle_helper.c: the thread that samples on behalf of the trigger thread
// when nobody holds the GVL (and, in no-signals mode, always).
//
// Waits on a condition variable without the GVL; its unblocking function and
// stop both just signal that variable, so Thread#kill and Sonde.stop end it
// promptly. Sampling itself runs with the GVL, like a postponed job would.
#include "idle_helper.h"

#include <ruby/thread.h>

#include "worker.h"

static void *wait_for_request_without_gvl(void *arg) {
  sonde_profiler *profiler = arg;
  if (!profiler->idle_helper_waited) {
    profiler->idle_helper_waited = true;
    worker_thread_started(profiler);
  }
  pthread_mutex_lock(&profiler->idle_lock);
  while (!profiler->idle_requested && !profiler->stop_requested) {
    pthread_cond_wait(&profiler->idle_wakeup, &profiler->idle_lock);
  }
  profiler->idle_requested = false;
  pthread_mutex_unlock(&profiler->idle_lock);
  return NULL;
}

// Ruby calls this to interrupt the wait (Thread#kill, process exit).
static void unblock_helper(void *arg) {
  sonde_profiler *profiler = arg;
  pthread_mutex_lock(&profiler->idle_lock);
  profiler->stop_requested = true;
  pthread_cond_signal(&profiler->idle_wakeup);
  pthread_mutex_unlock(&profiler->idle_lock);
}

static VALUE helper_body(void *arg) {
  sonde_profiler *profiler = arg;
  while (!profiler->stop_requested) {
    rb_thread_call_without_gvl(wait_for_request_without_gvl, profiler, unblock_helper, profiler);
    if (profiler->stop_requested) break;
    worker_sample_with_gvl(profiler, true);
  }
  return Qnil;
}

VALUE idle_helper_start(sonde_profiler *profiler) {
  VALUE thread = rb_thread_create(helper_body, profiler);
  rb_funcall(thread, rb_intern("name="), 1, rb_str_new_cstr("sonde-idle-helper"));
  return thread;
}

void idle_helper_request_from_trigger(sonde_profiler *profiler) {
  pthread_mutex_lock(&profiler->idle_lock);
  profiler->idle_requested = true;
  pthread_cond_signal(&profiler->idle_wakeup);
  pthread_mutex_unlock(&profiler->idle_lock);
}

void idle_helper_wake_for_stop(sonde_profiler *profiler) { unblock_helper(profiler); }
