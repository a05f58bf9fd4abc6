// thread_contexts.h: what Sonde keeps about each Ruby thread between two
// samples: its name and thread id, its CPU timer, where its previous sample
// left its clocks, and the stack it was recorded with (reused while the
// thread has not run since). The table owns the contexts and writes their
// fields, through the functions below for the other modules; the one
// exception is `sampling` (thread_sampling.h), the sampling pass's own.
//
// With the GVL only (the sampling pass, the thread-begin hook, flush and
// stop). Calls no Ruby method (see vm_begin_run).
#ifndef SONDE_THREAD_CONTEXTS_H
#define SONDE_THREAD_CONTEXTS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <ruby.h>

#include "cpu_timers.h"
#include "run.h"
#include "thread_sampling.h"
#include "vm.h"

#define THREAD_NAME_SIZE 128

typedef struct thread_context {
  const void *handle; // the VM's, as vm_thread_info gives it
  VALUE thread;       // the Thread object (marked: kept until the context is forgotten)
  int64_t native_tid;
  clockid_t cpu_clock;
  bool has_cpu_clock;
  VALUE name_source; // the Thread#name the cached name was made from
  char name[THREAD_NAME_SIZE];
  bool named_by_tid; // the name is only "thread <tid>": the thread has none of its own
  uint64_t last_seen_pass;

  // CPU time. With a timer (the usual case) CPU samples come from the
  // thread's own signals; without one (no-signals mode, a refused timer)
  // each pass charges the CPU used since the previous pass. Armed and
  // finished through thread_context_arm_timer/finish_timer.
  cpu_timer_ref timer;
  bool timer_tried; // armed once, or refused: not tried again
  // Met at its birth, its timer put off to the first pass that meets it
  // (thread_context_defer_timer): until then it is charged as a thread
  // without a timer, its CPU counted from where its count started (the
  // sampling record's cpu_ns_at_previous_sample). A thread that ends before
  // any pass never needs a timer: three system calls less for each.
  bool timer_deferred;

  // GC time already charged to "Garbage Collection", to take off this
  // thread's next wall (and, without a timer, CPU) sample: added by
  // thread_context_charge_gc, taken by thread_context_deduct_gc_*.
  int64_t gc_cpu_ns_to_deduct;
  int64_t gc_wall_ns_to_deduct;

  // The backend's memo of the thread's previous read (NULL: none).
  vm_frames_memo *frames_memo;
  // The sampling pass's own record of the thread (thread_sampling.h).
  thread_sampling sampling;

  // The recorder's index for (tid, name), valid for the noted generation.
  uint64_t thread_generation;
  uint32_t thread_index;
} thread_context;

// Returns NULL when out of memory.
thread_contexts *thread_contexts_new(void);

// Called for each context forgotten, before it is freed (to delete its
// timer, and charge what CPU it still has). clock_is_its_own is false when
// its tid has been taken by a newer thread met since: its CPU clock then
// counts that thread's time.
typedef void (*thread_context_forget_fn)(thread_context *context, void *data, bool clock_is_its_own);

// Calls on_forget for each context first (to delete its timer).
void thread_contexts_free(thread_contexts *contexts, thread_context_forget_fn on_forget, void *data);

// The context of a thread the VM describes, created (and named) if new:
// *is_new says so. A VM thread struct reused by a new thread (same handle,
// new tid) gets a fresh context; the old one goes through on_forget, as
// does a context of an ended thread whose tid the new thread has.
// Returns NULL when out of memory. Marks the context seen in this pass.
thread_context *thread_contexts_meet(thread_contexts *contexts, const vm_thread_info *info, bool *is_new,
                                     thread_context_forget_fn on_forget, void *data);

// Forgets one context now (its thread ends); on_forget may be NULL.
void thread_contexts_forget(thread_contexts *contexts, thread_context *context, thread_context_forget_fn on_forget,
                            void *data);

thread_context *thread_contexts_find_by_tid(const thread_contexts *contexts, int64_t tid);
thread_context *thread_contexts_find_by_handle(const thread_contexts *contexts, const void *handle);

// A pass starts: contexts not met during it are forgotten by forget_unseen.
void thread_contexts_begin_pass(thread_contexts *contexts);
void thread_contexts_forget_unseen(thread_contexts *contexts, thread_context_forget_fn on_forget,
                                   void *data);

// The name of a thread known only by its tid ("thread 1234"): one that
// ended before a pass met it, one of Sonde's own, one Ruby gives no name.
void thread_contexts_name_of_unmet(int64_t tid, char *name, size_t size);

// Renames the context if the thread's name changed since.
// thread_contexts_refresh_name_now reads the thread's name itself (a
// thread names itself after it starts, maybe after the pass that met it).
void thread_contexts_refresh_name(thread_context *context, const vm_thread_info *info);
void thread_contexts_refresh_name_now(thread_context *context);

// The recorder's index for this thread (tid and current name), interned
// once per recorder generation. Returns false when out of memory.
bool thread_context_recorder_index(thread_context *context, recorder *rec, uint32_t *index);

// Where a native thread's CPU clock stood when its Ruby thread's CPU was
// last counted, as that thread ended or was forgotten: the next thread Ruby
// runs on it (Ruby 3.1's thread cache) counts its CPU from there, so the
// first thread's teardown and the next one's start are charged once. Take
// removes the entry; the pass drops those of native threads gone since.
void thread_contexts_note_end_clock(thread_contexts *contexts, int64_t tid, int64_t cpu_ns);
bool thread_contexts_take_end_clock(thread_contexts *contexts, int64_t tid, int64_t *cpu_ns);

size_t thread_contexts_count(const thread_contexts *contexts);

// Arms the thread's CPU timer, once: a refused timer is not asked for
// again. *result: what cpu_timers_arm said; false when it was not asked
// (tried before, or the thread has no CPU clock).
bool thread_context_arm_timer(thread_context *context, cpu_timers *timers, int64_t count_from_ns,
                              cpu_timer_result *result);

// Puts off the thread's timer until thread_context_arm_deferred_timer (the
// caller notes where its CPU count starts meanwhile). False when no timer
// would be armed (tried before, or no CPU clock).
bool thread_context_defer_timer(thread_context *context);

// Arms a timer put off, counting from count_from_ns (the clock reading the
// thread was last charged to). False when none was put off; else as
// thread_context_arm_timer.
bool thread_context_arm_deferred_timer(thread_context *context, cpu_timers *timers, int64_t count_from_ns,
                                       cpu_timer_result *result);

// Deletes the thread's CPU timer, if it has one, and returns what its
// signals did not cover up to cpu_now_ns (cpu_timers_finish); -1 when it
// had none.
int64_t thread_context_finish_timer(thread_context *context, cpu_timers *timers, int64_t cpu_now_ns);

// GC time the thread ran, charged to "Garbage Collection": taken off its
// next samples (cpu_ns only when it has no timer to sample GC itself).
void thread_context_charge_gc(thread_context *context, int64_t wall_ns, int64_t cpu_ns);

// delta less the GC time charged and not yet taken off (which shrinks by
// what it took).
int64_t thread_context_deduct_gc_wall(thread_context *context, int64_t delta);
int64_t thread_context_deduct_gc_cpu(thread_context *context, int64_t delta);

// For the GC mark phase.
void thread_contexts_mark(const thread_contexts *contexts);

// In a forked child: only the forking thread survives, and timers are not
// inherited. Every context's timer is forgotten (no deletion).
void thread_contexts_forget_timers_after_fork(thread_contexts *contexts);

#endif
