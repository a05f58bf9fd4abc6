// own_threads.c: Sonde's own Ruby threads (see the header). With the GVL.
//
// The Thread.list filter is written in C, not Ruby, because the sampling
// pass calls Thread.list (vm_public.c): a Ruby method there would run Ruby
// code, and fire the application's TracePoints, inside a pass.
#include "own_threads.h"

#include "run.h"
#include "vm.h"

void own_threads_init(own_threads *own) {
  own->count = 0;
  for (int i = 0; i < MAX_OWN_THREADS; i++) {
    own->threads[i] = Qnil;
    own->tids[i] = 0;
  }
}

bool own_threads_add(own_threads *own, VALUE thread) {
  if (own_threads_contains(own, thread)) return true;
  if (own->count == MAX_OWN_THREADS) return false;
  vm_note_thread_accounted(thread); // left out of profiles, its end too
  own->tids[own->count] = 0; // looked up when first needed: a thread just made may have none yet
  own->threads[own->count++] = thread;
  return true;
}

void own_threads_remove(own_threads *own, VALUE thread) {
  for (int i = 0; i < own->count; i++) {
    if (own->threads[i] != thread) continue;
    own->count--;
    own->threads[i] = own->threads[own->count];
    own->tids[i] = own->tids[own->count];
    own->threads[own->count] = Qnil;
    own->tids[own->count] = 0;
    return;
  }
}

// A thread's tid does not change while it lives, so each is looked up once.
bool own_threads_has_tid(own_threads *own, int64_t tid) {
  if (tid <= 0) return false;
  for (int i = 0; i < own->count; i++) {
    if (own->tids[i] == 0) {
      vm_thread_info info;
      if (vm_thread_info_of(own->threads[i], &info)) own->tids[i] = info.native_tid;
    }
    if (own->tids[i] == tid) return true;
  }
  return false;
}

bool own_threads_contains(const own_threads *own, VALUE thread) {
  for (int i = 0; i < own->count; i++) {
    if (own->threads[i] == thread) return true;
  }
  return false;
}

void own_threads_mark(const own_threads *own) {
  for (int i = 0; i < own->count; i++) rb_gc_mark(own->threads[i]);
}

// Sonde's threads are the main Ractor's: another Ractor's list has none,
// and must not read the run's table while the main Ractor changes it.
static VALUE thread_list_without_sonde(VALUE self) {
  VALUE all = rb_call_super(0, NULL);
  sonde_run *run = run_active();
  if (run == NULL || run->own->count == 0 || !RB_TYPE_P(all, T_ARRAY) || !vm_on_main_ractor()) return all;
  VALUE kept = rb_ary_new_capa(RARRAY_LEN(all));
  for (long i = 0; i < RARRAY_LEN(all); i++) {
    VALUE thread = RARRAY_AREF(all, i);
    if (!own_threads_contains(run->own, thread)) rb_ary_push(kept, thread);
  }
  return kept;
}

void own_threads_install_thread_list_filter(void) {
  VALUE sonde = rb_const_get(rb_cObject, rb_intern("Sonde"));
  VALUE filter = rb_define_module_under(sonde, "ThreadListFilter");
  rb_define_method(filter, "list", thread_list_without_sonde, 0);
  rb_prepend_module(rb_singleton_class(rb_cThread), filter);
}
