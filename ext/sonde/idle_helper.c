// idle_helper.c: the thread that samples when nobody holds the GVL (see
// the header).
//
// Waits on a condition variable without the GVL. Its unblocking function,
// which Ruby calls to deliver Thread#kill or an exception, only wakes it:
// Ruby then runs the interrupt as the wait returns, and the thread ends
// through the ensure that marks it gone. Stopping it is a flag under the
// same lock. The pass itself runs with the GVL, like a postponed job.
#include "idle_helper.h"

#include <stdlib.h>

#include <ruby/thread.h>

#include "shared.h"

typedef struct {
  idle_helper *helper;
  void (*on_request)(void *);
  void *data;
} helper_start;

bool idle_helper_init(idle_helper *helper) {
  helper->thread = Qnil;
  helper->requested = false;
  helper->stopping = false;
  helper->alive = 0;
  helper->started = 0;
  if (pthread_mutex_init(&helper->lock, NULL) != 0) return false;
  if (pthread_cond_init(&helper->wakeup, NULL) != 0) {
    pthread_mutex_destroy(&helper->lock);
    return false;
  }
  return true;
}

void idle_helper_destroy(idle_helper *helper) {
  pthread_cond_destroy(&helper->wakeup);
  pthread_mutex_destroy(&helper->lock);
}

typedef enum { WOKEN_FOR_PASS, WOKEN_FOR_STOP, WOKEN_BY_RUBY } wake_reason;

typedef struct {
  idle_helper *helper;
  wake_reason reason;
  bool ruby_wants_us; // set by the unblocking function
} helper_wait;

static void *wait_for_request_without_gvl(void *arg) {
  helper_wait *wait = arg;
  idle_helper *helper = wait->helper;
  shared_store_release(&helper->started, 1);
  pthread_mutex_lock(&helper->lock);
  while (!helper->requested && !helper->stopping && !wait->ruby_wants_us) {
    pthread_cond_wait(&helper->wakeup, &helper->lock);
  }
  wait->reason = helper->stopping ? WOKEN_FOR_STOP : helper->requested ? WOKEN_FOR_PASS : WOKEN_BY_RUBY;
  helper->requested = false;
  pthread_mutex_unlock(&helper->lock);
  return NULL;
}

// Ruby calls this to interrupt the wait (Thread#kill, Thread#raise, exit).
static void unblock_helper(void *arg) {
  helper_wait *wait = arg;
  pthread_mutex_lock(&wait->helper->lock);
  wait->ruby_wants_us = true;
  pthread_cond_broadcast(&wait->helper->wakeup);
  pthread_mutex_unlock(&wait->helper->lock);
}

static VALUE helper_loop(VALUE arg) {
  helper_start *start = (helper_start *)arg;
  // Named here, on its own thread: whoever started it may be a sampling
  // pass, which calls no Ruby method (sampling_pass.c).
  rb_funcall(rb_thread_current(), rb_intern("name="), 1, rb_str_new_cstr("sonde-idle-helper"));
  for (;;) {
    helper_wait wait = {.helper = start->helper};
    // An interrupt (kill) is run by Ruby as this returns: the thread then
    // unwinds through helper_ended.
    rb_thread_call_without_gvl(wait_for_request_without_gvl, &wait, unblock_helper, &wait);
    if (wait.reason == WOKEN_FOR_STOP) break;
    if (wait.reason == WOKEN_FOR_PASS) start->on_request(start->data);
  }
  return Qnil;
}

static VALUE helper_ended(VALUE arg) {
  helper_start *start = (helper_start *)arg;
  shared_store_release(&start->helper->alive, 0);
  free(start);
  return Qnil;
}

static VALUE helper_body(void *arg) { return rb_ensure(helper_loop, (VALUE)arg, helper_ended, (VALUE)arg); }

static VALUE create_helper_thread(VALUE start) { return rb_thread_create(helper_body, (void *)start); }

void idle_helper_start(idle_helper *helper, void (*on_request)(void *), void *data) {
  helper_start *start = malloc(sizeof(*start));
  if (start == NULL) rb_raise(rb_eNoMemError, "sonde: out of memory starting the idle helper");
  *start = (helper_start){.helper = helper, .on_request = on_request, .data = data};
  shared_store_release(&helper->started, 0);
  shared_store_release(&helper->alive, 1);
  int raised = 0;
  VALUE thread = rb_protect(create_helper_thread, (VALUE)start, &raised);
  if (raised) {
    // Never started: the thread that would have freed start does not exist.
    shared_store_release(&helper->alive, 0);
    free(start);
    rb_jump_tag(raised);
  }
  helper->thread = thread;
}

bool idle_helper_request_from_trigger(idle_helper *helper) {
  if (!idle_helper_alive(helper)) return false;
  pthread_mutex_lock(&helper->lock);
  helper->requested = true;
  pthread_cond_signal(&helper->wakeup);
  pthread_mutex_unlock(&helper->lock);
  return true;
}

void idle_helper_stop(idle_helper *helper) {
  pthread_mutex_lock(&helper->lock);
  helper->stopping = true;
  pthread_cond_broadcast(&helper->wakeup);
  pthread_mutex_unlock(&helper->lock);
}

bool idle_helper_alive(const idle_helper *helper) { return shared_load_acquire(&helper->alive) != 0; }

VALUE idle_helper_thread(const idle_helper *helper) { return helper->thread; }

bool idle_helper_started(const idle_helper *helper) { return shared_load_acquire(&helper->started) != 0; }

void idle_helper_forget_after_fork(idle_helper *helper) {
  pthread_mutex_init(&helper->lock, NULL);
  pthread_cond_init(&helper->wakeup, NULL);
  helper->stopping = true;
  helper->requested = false;
  shared_store_release(&helper->alive, 0);
}
