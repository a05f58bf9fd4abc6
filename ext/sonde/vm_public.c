// vm_public.c: VM access for Ruby 3.3 and later, through public APIs only
// (save one word of a method entry on 3.3, to name frames right: see
// singleton_by_mistake): rb_profile_thread_frames for any thread's frames, the GVL instrumentation
// hooks (rb_internal_thread_add_event_hook) for who holds the GVL and what
// each thread is doing, thread-specific storage to keep what the hooks learn,
// and Thread.list for the threads of the main Ractor.
//
// Constraints, by context:
// - The hooks: READY, SUSPENDED and EXITED run WITHOUT the GVL, RESUMED
//   with it, all of them inside Ruby's scheduler lock, and only RESUMED is
//   sure to run on the thread the event is about (Ruby's 1:1 threads, the
//   main Ractor's default; M:N threads there are refused at init, see
//   refuse_mn_threads; other Ractors' threads, M:N or not, are never
//   sampled, see "Ractors" below). They
//   only read and write this file's per-thread records with atomics and
//   allocate or free a record (malloc, never Ruby), and RESUMED counts
//   itself and ends the trigger's park (trigger_park.h: an atomic and
//   sem_post). They never call Ruby.
// - Functions marked signal-safe only read atomics and call pthread_self.
// - Everything else runs with the GVL (a sampling pass), which is what keeps
//   other threads' frames still and stops threads from dying while we read.
//
// What a thread record knows, and since when: its tid and pthread from its
// first GVL switch (RESUMED runs on the thread itself). Records are made
// during runs only (see run_active): a thread that existed before Sonde
// loaded, or started while no run was active, gets its record when a run
// begins (vm_begin_run), from Thread#native_thread_id; its CPU clock comes
// from the tid, so it is sampled from then on.
//
// GVL times: each record keeps what its thread's events say it did, and
// since when: time holding the GVL, waiting for it, and off it. A hook
// writes them, a sampling pass reads them from another thread, so they sit
// behind a sequence counter (odd while a hook writes; a reader that sees it
// move reads again). Only the thread's own events write its record, and
// Ruby sends one thread's events one after another, so there is one writer.
//
// Ractors: the GVL hooks fire for the threads of every Ractor, each Ractor
// having its own GVL, while Sonde samples the main Ractor's threads only
// (TracePoints, Thread.list and the registry are the main Ractor's). A
// record says whether its thread is known to be of the main Ractor, which
// only code running on the main Ractor can tell (vm_begin_run, the
// thread-begin hook, a pass): until then its RESUMED never makes it the GVL
// owner, so no tick and no postponed job goes to another Ractor's thread.
#include <ruby.h>
#include <ruby/debug.h>
#include <ruby/ractor.h>
#include <ruby/st.h>
#include <ruby/thread.h>
#include <ruby/version.h>

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "clocks.h"
#include "current_ids.h"
#include "shared.h"
#include "trigger_park.h"
#include "vm.h"

// The GVL owner is kept as one word so that hooks, the trigger thread and
// the signal handler can read and write it atomically. 0 means "nobody":
// glibc's pthread_t is the address of the thread's descriptor, never 0.
_Static_assert(sizeof(pthread_t) == sizeof(uintptr_t), "pthread_t must fit an atomic word");
#define NO_GVL_OWNER ((uintptr_t)0)

static uintptr_t gvl_owner = NO_GVL_OWNER;
// And its Linux thread id (0: nobody), which the trigger signals: written
// with gvl_owner (not as one word with it: a reader may see one before the
// other, and then signals a thread that no longer holds the GVL, whose
// handler finds so and drops the tick).
static pid_t gvl_owner_tid;

// The last GVL event a thread reported; also indexes thread_record.total_ns.
typedef enum {
  GVL_EVENT_READY,     // asked for the GVL: waiting for it
  GVL_EVENT_RESUMED,   // holds it
  GVL_EVENT_SUSPENDED, // let go of it: blocked, sleeping, or about to be READY again
  GVL_EVENT_COUNT
} gvl_event;

typedef struct {
  pthread_t pthread; // 0 until the thread's first RESUMED since Sonde met it
  pid_t tid;
  pid_t pid; // the process the record was made in: after fork only the forking thread's is true
  // Written by the thread's own hooks, read by sampling passes, all atomic:
  unsigned sequence;            // odd while a hook writes the three fields below
  int last_event;               // a gvl_event
  int64_t since_ns;             // when last_event happened (monotonic)
  int64_t total_ns[GVL_EVENT_COUNT]; // time spent after each event, up to since_ns
  // The first RESUMED since the pass of this epoch began (0: none yet), when
  // it came and total_ns as of then (vm_thread_info.first_resume_epoch).
  uint64_t first_resume_epoch;
  int64_t first_resume_ns;
  int64_t total_ns_at_first_resume[GVL_EVENT_COUNT];
  uint64_t acquisitions;        // RESUMED events since Sonde met the thread (atomic)
  // Set (atomic, once) by code on the main Ractor that met the thread there;
  // only then do its RESUMED events make it the GVL owner.
  int of_main_ractor;
  // The thread's CPU clock as its thread-end hook counted it (0: not
  // counted), for its EXITED hook (see vm_note_current_thread_end_cpu).
  int64_t end_cpu_ns;
  // The run (run_serial) that met the thread (vm_note_thread_accounted), atomic:
  // written with the GVL, read by its EXITED hook. A record outlives runs,
  // so a flag alone would hold an earlier run's meeting.
  uint64_t met_in_run;
  // Where the thread's pair sits in the registry, plus one (0: nowhere).
  // With the GVL only, on the main Ractor (see the registry below).
  long registry_slot;
  // Whether the thread's leaf is a sleep (leaf_is_a_sleep), as judged when
  // acquisitions read leaf_judged_at - 1 (0: never judged). A thread's leaf
  // changes only while it holds the GVL, so the verdict holds until its
  // next RESUMED. With the GVL only, on the main Ractor.
  uint64_t leaf_judged_at;
  bool leaf_sleeps;
} thread_record;

// The epoch of the latest sampling pass that began (vm_begin_pass), read by
// RESUMED hooks; and how many RESUMED events any thread had since load
// (the trigger parks while it does not move). Atomic.
static uint64_t pass_epoch;
static uint64_t gvl_resumes;

// What ended threads' EXITED hooks found on their CPU clocks past where
// their thread-end hooks counted, waiting for vm_take_cpu_after_end_ns.
// Atomic: hooks of several threads add, a pass takes.
static int64_t cpu_after_end_ns;
static uint64_t threads_after_end;
// Every ended thread's CPU clock at its EXITED event, summed (atomic).
static int64_t exited_clock_total_ns;
// The part of it from threads of the main Ractor that no context of the
// run met, waiting for vm_take_unmet_exit_cpu_ns; and how many (atomic).
static int64_t unmet_exit_cpu_ns;
static uint64_t unmet_exit_threads;
// The tids of the latest threads to pass EXITED, a ring that hooks write
// (atomic slot, atomic store): such a thread may still be listed in
// /proc/self/task while its native thread exits, and its clock, already
// in exited_clock_total_ns, must not count as a live thread's too.
#define RECENT_EXITS 256
static pid_t recent_exits[RECENT_EXITS];
static uint64_t recent_exit_count;
// Set (atomic) from vm_begin_run to vm_end_run. A program that loaded
// Sonde without starting it pays the hooks' dispatch and nothing more for
// a thread that starts and ends then: no record is made for it (a run
// meets it late, from Thread#native_thread_id), no tid asked for and no
// EXITED clock read (system calls; exit_cpu.h takes its baseline after the
// run began). Records made during a run keep their times between runs.
static int run_active;
// Which run is active: vm_begin_run counts it up (with the GVL), so that a
// record met in an earlier run does not read as met in this one (atomic).
static uint64_t run_serial;

// Thread-specific storage for thread_record pointers; created at init.
static rb_internal_thread_specific_key_t record_key;

// This process's id, which records carry to tell this process's from a
// forked parent's: cached (current_ids.h), not asked for with getpid(), a
// system call each time, about six times for each thread that starts and
// ends.
static pid_t this_process(void) { return current_pid_signal_safe(); }

static thread_record *new_record(pthread_t pthread, pid_t tid, gvl_event event) {
  thread_record *record = calloc(1, sizeof(*record));
  if (record == NULL) return NULL;
  record->pthread = pthread;
  record->tid = tid;
  record->pid = this_process();
  record->last_event = event;
  record->since_ns = clocks_monotonic_ns();
  return record;
}

static thread_record *new_record_for_current_thread(void) {
  return new_record(pthread_self(), (pid_t)syscall(SYS_gettid), GVL_EVENT_RESUMED); // gettid() needs glibc 2.30
}

// The writer's half of the sequence counter: closes the time since the
// previous event and opens the next one's.
static void record_event(thread_record *record, gvl_event event) {
  int64_t now = clocks_monotonic_ns();
  unsigned sequence = shared_load_relaxed(&record->sequence);
  shared_store_relaxed(&record->sequence, sequence + 1);
  shared_fence_release();
  int previous = shared_load_relaxed(&record->last_event);
  int64_t since = shared_load_relaxed(&record->since_ns);
  if (now > since) {
    int64_t total = shared_load_relaxed(&record->total_ns[previous]);
    shared_store_relaxed(&record->total_ns[previous], total + (now - since));
  }
  shared_store_relaxed(&record->since_ns, now);
  shared_store_relaxed(&record->last_event, (int)event);
  uint64_t epoch = shared_load_relaxed(&pass_epoch);
  if (event == GVL_EVENT_RESUMED && shared_load_relaxed(&record->first_resume_epoch) != epoch) {
    shared_store_relaxed(&record->first_resume_epoch, epoch);
    shared_store_relaxed(&record->first_resume_ns, now);
    for (int i = 0; i < GVL_EVENT_COUNT; i++) {
      int64_t total = shared_load_relaxed(&record->total_ns[i]);
      shared_store_relaxed(&record->total_ns_at_first_resume[i], total);
    }
  }
  shared_store_release(&record->sequence, sequence + 2);
}

static void times_from_totals(const int64_t totals[GVL_EVENT_COUNT], vm_gvl_times *times) {
  times->holding_gvl_ns = totals[GVL_EVENT_RESUMED];
  times->waiting_for_gvl_ns = totals[GVL_EVENT_READY];
  times->off_gvl_ns = totals[GVL_EVENT_SUSPENDED];
}

// The reader's half: a consistent copy of the times as of now_ns. A hook
// writes a handful of words, so a retry is rare and short.
static void read_times(const thread_record *record, int64_t now_ns, int *last_event, vm_thread_info *info) {
  int64_t totals[GVL_EVENT_COUNT], at_resume[GVL_EVENT_COUNT], since, resume_ns;
  uint64_t resume_epoch;
  int event;
  for (;;) {
    unsigned before = shared_load_acquire(&record->sequence);
    if (before & 1) continue;
    event = shared_load_relaxed(&record->last_event);
    since = shared_load_relaxed(&record->since_ns);
    for (int i = 0; i < GVL_EVENT_COUNT; i++) totals[i] = shared_load_relaxed(&record->total_ns[i]);
    resume_epoch = shared_load_relaxed(&record->first_resume_epoch);
    resume_ns = shared_load_relaxed(&record->first_resume_ns);
    for (int i = 0; i < GVL_EVENT_COUNT; i++) {
      at_resume[i] = shared_load_relaxed(&record->total_ns_at_first_resume[i]);
    }
    shared_fence_acquire();
    if (shared_load_relaxed(&record->sequence) == before) break;
  }
  if (now_ns > since) totals[event] += now_ns - since;
  *last_event = event;
  times_from_totals(totals, &info->gvl_times);
  info->first_resume_epoch = resume_epoch;
  info->first_resume_ns = resume_ns;
  times_from_totals(at_resume, &info->gvl_times_at_first_resume);
}

// record: the current thread's, whose tid it already holds (asked for
// once, with the record: a second cached copy cost a gettid per thread).
static void set_gvl_owner_to_current_thread(const thread_record *record) {
  shared_store_release(&gvl_owner, (uintptr_t)pthread_self());
  shared_store_release(&gvl_owner_tid, record->tid);
}

static bool record_of_main_ractor(const thread_record *record) {
  return shared_load_acquire(&record->of_main_ractor) != 0;
}

// Only from code running on the main Ractor about a thread of it.
static void mark_of_main_ractor(thread_record *record) {
  shared_store_release(&record->of_main_ractor, 1);
}

// A thread that lets go of the GVL clears the owner only if the owner is
// still that thread: whatever the order in which Ruby runs two threads'
// hooks, the owner is never cleared from under the thread that took the GVL
// next. Compared with the record's pthread, not pthread_self(), so it holds
// whichever native thread runs the hook.
static void clear_gvl_owner_if(const thread_record *record) {
  uintptr_t leaving = (uintptr_t)record->pthread;
  if (leaving == NO_GVL_OWNER) return;
  if (!shared_cas_release(&gvl_owner, &leaving, NO_GVL_OWNER)) return;
  pid_t leaving_tid = record->tid;
  shared_cas_release(&gvl_owner_tid, &leaving_tid, 0);
}

// EXITED, on the ending thread itself (it is the last thing
// thread_start_func_2 does), after Ruby's teardown of the thread: what that
// teardown took since the thread-end hook. A clock read and two atomic
// adds; nothing when the record is another native thread's (checked
// against its pthread: no system call).
// The same clock reading goes into exited_clock_total_ns, every thread's
// (of any Ractor) while a run is active, for exit_cpu.h.
static void add_cpu_after_end(const thread_record *record) {
  if (!shared_load_relaxed(&run_active)) return;
  if (record->pthread == 0 || !pthread_equal(record->pthread, pthread_self())) return;
  int64_t now = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  if (now < 0) return;
  // Another Ractor's thread was never told its tid (on_thread_begin).
  pid_t tid = record->tid != 0 ? record->tid : (pid_t)syscall(SYS_gettid);
  uint64_t slot = shared_add_relaxed(&recent_exit_count, 1) % RECENT_EXITS;
  shared_store_relaxed(&recent_exits[slot], tid);
  shared_add_release(&exited_clock_total_ns, now);
  if (shared_load_acquire(&record->met_in_run) != shared_load_acquire(&run_serial)) {
    // Met by no pass and no hook of this run: its clock is its whole life
    // (a native thread per Ruby thread), counted here once. Another
    // Ractor's thread is left to ractor_accounting.h.
    if (record_of_main_ractor(record)) {
      shared_add_relaxed(&unmet_exit_cpu_ns, now);
      shared_add_relaxed(&unmet_exit_threads, 1);
    }
    return;
  }
  int64_t counted = shared_load_relaxed(&record->end_cpu_ns);
  if (counted <= 0 || now <= counted) return;
  shared_add_relaxed(&cpu_after_end_ns, now - counted);
  shared_add_relaxed(&threads_after_end, 1);
}

int64_t vm_exited_threads_clock_ns(void) { return shared_load_acquire(&exited_clock_total_ns); }

size_t vm_recently_exited_tids(int64_t *tids, size_t max) {
  uint64_t count = shared_load_relaxed(&recent_exit_count);
  size_t kept = count < RECENT_EXITS ? (size_t)count : RECENT_EXITS;
  if (kept > max) kept = max;
  for (size_t i = 0; i < kept; i++) tids[i] = shared_load_relaxed(&recent_exits[i]);
  return kept;
}

void vm_note_current_thread_end_cpu(int64_t cpu_ns) {
  thread_record *record = rb_internal_thread_specific_get(rb_thread_current(), record_key);
  if (record != NULL && record->pid == this_process()) shared_store_relaxed(&record->end_cpu_ns, cpu_ns);
}

bool vm_exits_count_unmet_threads(void) { return true; }

int64_t vm_take_unmet_exit_cpu_ns(uint64_t *threads) {
  *threads = shared_exchange_relaxed(&unmet_exit_threads, 0);
  return shared_exchange_relaxed(&unmet_exit_cpu_ns, 0);
}

int64_t vm_take_cpu_after_end_ns(uint64_t *threads) {
  *threads = shared_exchange_relaxed(&threads_after_end, 0);
  return shared_exchange_relaxed(&cpu_after_end_ns, 0);
}

// The one hook; see the top of the file for what it may do. Only RESUMED is
// sure to run on the thread it is about (the thread takes the GVL itself;
// Ruby 3.3 runs a new thread's READY on the thread that created it), so a
// thread's pthread and tid are taken at its first RESUMED. Its record is
// made at its first READY or RESUMED during a run (run_active); events
// with no record have nothing to update.
static void on_thread_event_without_gvl(rb_event_flag_t event, const rb_internal_thread_event_data_t *event_data,
                                        void *unused) {
  VALUE thread = event_data->thread;
  thread_record *record = rb_internal_thread_specific_get(thread, record_key);

  bool in_run = shared_load_relaxed(&run_active) != 0;
  if (event & RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
    if (record == NULL) {
      if (!in_run) return;
      record = new_record_for_current_thread();
      if (record == NULL) return; // out of memory: this thread is not sampled
      rb_internal_thread_specific_set(thread, record_key, record);
    } else {
      // Made before the thread first ran here: now its pthread is known.
      // Its tid comes from Ruby at its thread-begin hook (a main-Ractor
      // thread; nothing needs it before: it is the GVL owner only from
      // there) or at its EXITED (another Ractor's): gettid here was a
      // system call for every thread, one Ruby had made already.
      if (record->pthread == 0) record->pthread = pthread_self();
      record_event(record, GVL_EVENT_RESUMED);
    }
    shared_add_relaxed(&record->acquisitions, 1);
    // A thread runs again: a parked trigger ticks again (trigger_park.h).
    // Counted first, sequentially consistent: a trigger about to park
    // either sees the count move or is woken here.
    shared_add_seq(&gvl_resumes, 1);
    trigger_park_wake_signal_safe();
    // Another Ractor's thread takes its own Ractor's GVL, not the main one's.
    if (record_of_main_ractor(record)) set_gvl_owner_to_current_thread(record);
    return;
  }
  // A new thread's first READY runs on the thread that created it: the
  // record starts its wait for the GVL, pthread and tid come at RESUMED.
  if (record == NULL && in_run && (event & RUBY_INTERNAL_THREAD_EVENT_READY)) {
    record = new_record(0, 0, GVL_EVENT_READY);
    if (record != NULL) rb_internal_thread_specific_set(thread, record_key, record);
    return;
  }
  if (record == NULL) return;
  if (event & RUBY_INTERNAL_THREAD_EVENT_SUSPENDED) {
    record_event(record, GVL_EVENT_SUSPENDED);
    clear_gvl_owner_if(record);
  } else if (event & RUBY_INTERNAL_THREAD_EVENT_READY) {
    record_event(record, GVL_EVENT_READY);
  } else if (event & RUBY_INTERNAL_THREAD_EVENT_EXITED) {
    // A thread lets the GVL go for the last time with EXITED, not
    // SUSPENDED: left as the owner, it would stay the trigger's tick
    // target after it is gone, until another thread's RESUMED.
    clear_gvl_owner_if(record);
    add_cpu_after_end(record);
    rb_internal_thread_specific_set(thread, record_key, NULL);
    free(record);
  }
}

bool vm_gvl_owner_tid_from_any_thread(pid_t *tid) {
  *tid = shared_load_acquire(&gvl_owner_tid);
  return *tid != 0;
}

// The handle of the 3.3 backend names a Thread object, which a signal
// handler has no business touching: vm_capture_own_stack_signal_safe reads
// the current execution context instead, so the holder's own "handle" is
// just a token that is never NULL (glibc's pthread_t never is).
const void *vm_gvl_holder_self_signal_safe(void) {
  uintptr_t self = (uintptr_t)pthread_self();
  return shared_load_acquire(&gvl_owner) == self ? (const void *)self : NULL;
}

// gc.c's during_gc flag, a plain read.
bool vm_gc_running_signal_safe(void) { return rb_during_gc() != 0; }

// Classes whose core methods put a thread to sleep (sleep, join, Queue#pop,
// SizedQueue#push, Mutex#lock, ConditionVariable#wait through Mutex#sleep):
// a thread that let go of the GVL in one of them is "sleeping", in anything
// else "blocked". The same as vm_ruby31.c, compared by class path because
// the public frame API names a method's class but does not hand it out.
static const char *const SLEEPING_OWNERS[] = {"Kernel", "Thread", "Thread::Mutex", "Thread::Queue", "Thread::SizedQueue"};
#define SLEEPING_OWNER_COUNT (sizeof(SLEEPING_OWNERS) / sizeof(SLEEPING_OWNERS[0]))

// Leaf method entry -> whether it is a sleep. Naming a method's class
// allocates a string, so each C method is judged once; the table keeps only
// a handful of entries (the C methods threads are found blocked in). Keys
// are not marked: should a method entry die and its address serve another,
// the worst outcome is one thread labelled sleeping instead of blocked.
static st_table *sleep_verdicts;

// A leaf that is a C method, or one of Ruby's own core methods written in
// Ruby (<internal:thread_sync>: Thread::Queue#pop from 3.3), can be a wait.
static bool is_core_method_frame(VALUE frame) {
  VALUE path = rb_profile_frame_path(frame);
  if (NIL_P(path)) return true;
  static const char internal[] = "<internal:";
  return RB_TYPE_P(path, T_STRING) && (size_t)RSTRING_LEN(path) > sizeof(internal) - 1 &&
         memcmp(RSTRING_PTR(path), internal, sizeof(internal) - 1) == 0;
}

static bool judge_sleep(VALUE frame) {
  VALUE owner = rb_profile_frame_classpath(frame);
  if (!RB_TYPE_P(owner, T_STRING)) return false;
  for (size_t i = 0; i < SLEEPING_OWNER_COUNT; i++) {
    if ((size_t)RSTRING_LEN(owner) == strlen(SLEEPING_OWNERS[i]) &&
        memcmp(RSTRING_PTR(owner), SLEEPING_OWNERS[i], (size_t)RSTRING_LEN(owner)) == 0) {
      return true;
    }
  }
  return false;
}

// Without its line: finding a Ruby frame's line searches its iseq's line
// table, and a preempted thread's leaf is Ruby code (issue 22: lines were
// about half of what reading frames cost on 3.4).
static bool leaf_is_a_sleep(VALUE thread) {
  VALUE leaf;
  if (rb_profile_thread_frames(thread, 0, 1, &leaf, NULL) < 1 || !is_core_method_frame(leaf)) return false;
  st_data_t verdict;
  if (st_lookup(sleep_verdicts, (st_data_t)leaf, &verdict)) return verdict != 0;
  bool is_sleep = judge_sleep(leaf);
  st_insert(sleep_verdicts, (st_data_t)leaf, is_sleep);
  return is_sleep;
}

// leaf_is_a_sleep for a thread not holding the GVL, judged once per
// acquisition: reading the leaf frame was most of what listing the threads
// cost, and a parked thread keeps its leaf pass after pass.
static vm_thread_state off_gvl_leaf_state(VALUE thread, thread_record *record) {
  uint64_t acquisitions = shared_load_relaxed(&record->acquisitions);
  if (record->leaf_judged_at != acquisitions + 1) {
    record->leaf_sleeps = leaf_is_a_sleep(thread);
    record->leaf_judged_at = acquisitions + 1;
  }
  return record->leaf_sleeps ? VM_THREAD_SLEEPING : VM_THREAD_BLOCKED;
}

// The pass runs on the thread holding the GVL; for the others, their last
// GVL event says whether they queue for it or wait for something else.
// A thread SUSPENDED by the timer (its time slice is over) is READY right
// after, so SUSPENDED as last event means it waits outside the GVL.
static vm_thread_state state_of(VALUE thread, thread_record *record, int last_event) {
  if (thread == rb_thread_current()) return VM_THREAD_RUNNING;
  switch (last_event) {
    case GVL_EVENT_SUSPENDED:
      return off_gvl_leaf_state(thread, record);
    default:
      return VM_THREAD_WAITING_FOR_GVL;
  }
}

// What a thread did off the GVL. A thread out of its sleep or IO but still
// queued for the GVL has not run Ruby since: its leaf is still the call that
// let go. For the running thread the leaf has moved on: "blocked" says less.
static vm_thread_state off_gvl_state_of(VALUE thread, thread_record *record, vm_thread_state state) {
  switch (state) {
    case VM_THREAD_SLEEPING:
    case VM_THREAD_BLOCKED:
      return state;
    case VM_THREAD_WAITING_FOR_GVL:
      return off_gvl_leaf_state(thread, record);
    default:
      return VM_THREAD_BLOCKED;
  }
}

// The thread running a pass always has a true record: it holds the GVL, so
// it reported RESUMED since Sonde loaded, or it is the thread that loaded
// Sonde, or it is the thread that forked (its record holds the parent's tid).
// Called on the main Ractor only (callers check vm_on_main_ractor or run
// where only the main Ractor can: Sonde.start, the main Ractor's hooks).
static thread_record *record_of_current_thread(VALUE thread, pid_t pid) {
  thread_record *record = rb_internal_thread_specific_get(thread, record_key);
  if (record != NULL && record->pid == pid) {
    // Resumed first between runs: its own tid, asked for now.
    if (record->tid == 0) record->tid = (pid_t)syscall(SYS_gettid);
    if (!record_of_main_ractor(record)) {
      mark_of_main_ractor(record);
      set_gvl_owner_to_current_thread(record); // it holds the GVL now: its RESUMED came before the mark
    }
    return record;
  }
  thread_record *fresh = new_record_for_current_thread();
  if (fresh == NULL) return NULL;
  mark_of_main_ractor(fresh);
  if (record != NULL) fresh->registry_slot = record->registry_slot;
  rb_internal_thread_specific_set(thread, record_key, fresh);
  free(record);
  set_gvl_owner_to_current_thread(fresh);
  return fresh;
}

static ID id_list, id_name, id_native_thread_id;

// The threads of the current run and their names, as [thread, name,
// thread, name, ...] in one Array (GC-registered), so that the GC marks both. The
// sampling pass must not call Ruby methods (a method call runs the pending
// interrupts of the thread the pass runs on, a Thread#kill among them, which
// the pass would then swallow), so it cannot call Thread.list or
// Thread#name: this registry stands in for them. With the GVL only:
// filled by vm_begin_run from Thread.list (a plain call, from Sonde.start),
// added to by a thread-begin hook, renamed by a Thread#name= hook, and
// left by a thread at its thread-end hook, and thinned by each pass of the
// threads that ended without one (killed, or ended by an exception: their
// EXITED hook freed their record). Qnil between runs.
//
// Each thread's record holds its pair's place, so that finding a thread
// costs the same however many threads there are (a thread starting, ending
// or being renamed at 15,000 threads a second). A thread the registry holds
// is kept alive by it: an ended one holds its Thread object, and what Ruby
// frees with it (its VM stack among them), until it leaves.
static VALUE registry = Qnil;
static VALUE registry_begin_hook = Qnil;
static VALUE registry_end_hook = Qnil;

static thread_record *record_of_this_process(VALUE thread) {
  thread_record *record = rb_internal_thread_specific_get(thread, record_key);
  return record != NULL && record->pid == this_process() ? record : NULL;
}

void vm_note_thread_accounted(VALUE thread) {
  thread_record *record = record_of_this_process(thread);
  if (record != NULL) shared_store_release(&record->met_in_run, shared_load_relaxed(&run_serial));
}

static long registry_index_of(VALUE thread) {
  if (NIL_P(registry)) return -1;
  thread_record *record = record_of_this_process(thread);
  if (record == NULL || record->registry_slot <= 0) return -1;
  long index = record->registry_slot - 1;
  // A slot from another run's registry is no slot in this one.
  return index + 1 < RARRAY_LEN(registry) && RARRAY_AREF(registry, index) == thread ? index : -1;
}

// Qundef for a thread the registry does not hold (not yet, or no more: an
// ending thread has left it): its name is not known here.
static VALUE registered_name(VALUE thread) {
  long index = registry_index_of(thread);
  return index < 0 ? Qundef : RARRAY_AREF(registry, index + 1);
}

VALUE vm_current_thread_name(void) { return registered_name(rb_thread_current()); }

// Only a thread with a record of this process is added (vm_each_thread
// would drop one without at once).
static void registry_add(VALUE thread, VALUE name) {
  if (NIL_P(registry) || registry_index_of(thread) >= 0) return;
  thread_record *record = record_of_this_process(thread);
  if (record == NULL) return;
  record->registry_slot = RARRAY_LEN(registry) + 1;
  rb_ary_push(registry, thread);
  rb_ary_push(registry, name);
}

// The last pair takes the removed one's place.
static void registry_remove_at(long index) {
  long last = RARRAY_LEN(registry) - 2;
  thread_record *leaving = record_of_this_process(RARRAY_AREF(registry, index));
  if (leaving != NULL) leaving->registry_slot = 0;
  if (index != last) {
    VALUE moved = RARRAY_AREF(registry, last);
    rb_ary_store(registry, index, moved);
    rb_ary_store(registry, index + 1, RARRAY_AREF(registry, last + 1));
    thread_record *record = record_of_this_process(moved);
    if (record != NULL) record->registry_slot = index + 1;
  }
  rb_ary_resize(registry, last);
}

// The thread's tid as Ruby noted it when its native thread began
// (Thread#native_thread_id: a method call, where gettid would be a system
// call), 0 while it has no native thread. Calls Ruby: hooks and start only.
static pid_t tid_known_to_ruby(VALUE thread) {
  VALUE tid = rb_funcall(thread, id_native_thread_id, 0);
  return FIXNUM_P(tid) && FIX2LONG(tid) > 0 ? (pid_t)FIX2LONG(tid) : 0;
}

// A thread that has not touched the GVL since Sonde loaded (it was asleep or
// blocked already) has no record: make one from its tid. It does not hold
// the GVL (the caller does), and its own hooks cannot write the record before
// it is set: they find none and wait for the next event. Its pthread comes
// with its first RESUMED. Calls Ruby: only from vm_begin_run.
static thread_record *record_of_thread_met_late(VALUE thread) {
  pid_t tid = tid_known_to_ruby(thread);
  if (tid == 0) return NULL; // no native thread yet
  thread_record *record = new_record(0, tid, GVL_EVENT_SUSPENDED);
  if (record == NULL) return NULL;
  mark_of_main_ractor(record); // from Thread.list, on the main Ractor
  rb_internal_thread_specific_set(thread, record_key, record);
  return record;
}

// A TracePoint enabled on the main Ractor fires for the main Ractor's
// threads only; checked anyway, as every hook of Sonde's is. The name is
// read here: a thread named by its creator right after Thread.new (`t =
// Thread.new { ... }; t.name = "x"`) is renamed before it begins, when the
// registry does not hold it yet, so the rename hook could not note it. A
// thread that names itself later goes through that hook. (Calling
// Thread#name may run the new thread's pending interrupts: a Thread#kill
// or #raise sent to it right after its creation, which then takes effect
// at its first step, as it would have anyway.)
static void on_thread_begin(VALUE tracepoint, void *unused) {
  if (!vm_on_main_ractor()) return;
  VALUE thread = rb_thread_current();
  // Its tid, which its RESUMED hook left for here.
  thread_record *record = record_of_this_process(thread);
  if (record != NULL && record->tid == 0) record->tid = tid_known_to_ruby(thread);
  record_of_current_thread(thread, this_process());
  registry_add(thread, rb_funcall(thread, id_name, 0));
}

// A thread whose block returned leaves at once, not at the next pass: a
// pass can be 10 ms away or more, and at thousands of threads a second the
// ended threads it would keep alive meanwhile (a megabyte of VM stack each)
// made Sonde's memory (issue 23).
static void on_thread_end(VALUE tracepoint, void *unused) {
  if (!vm_on_main_ractor()) return;
  long index = registry_index_of(rb_thread_current());
  if (index >= 0) registry_remove_at(index);
}

void vm_begin_run(void) {
  shared_add_seq(&run_serial, 1);
  shared_store_seq(&run_active, 1);
  registry = rb_ary_new();
  VALUE threads = rb_funcall(rb_cThread, id_list, 0);
  VALUE current = rb_thread_current();
  pid_t pid = this_process();
  for (long i = 0; i < RARRAY_LEN(threads); i++) {
    VALUE thread = RARRAY_AREF(threads, i);
    thread_record *record = rb_internal_thread_specific_get(thread, record_key);
    if (thread == current) {
      record = record_of_current_thread(thread, pid);
    } else if (record == NULL || record->pid != pid) {
      record = record_of_thread_met_late(thread);
    } else {
      mark_of_main_ractor(record); // listed by Thread.list, on the main Ractor
      if (record->tid == 0) {
        // Born READY and not run yet: 1:1 threads get their native thread
        // before they first queue for the GVL, so Ruby knows the tid already.
        record->tid = tid_known_to_ruby(thread);
      }
    }
    if (record != NULL) registry_add(thread, rb_funcall(thread, id_name, 0));
  }
  RB_GC_GUARD(threads);
  registry_begin_hook = rb_tracepoint_new(0, RUBY_EVENT_THREAD_BEGIN, on_thread_begin, NULL);
  rb_tracepoint_enable(registry_begin_hook);
  registry_end_hook = rb_tracepoint_new(0, RUBY_EVENT_THREAD_END, on_thread_end, NULL);
  rb_tracepoint_enable(registry_end_hook);
}

void vm_end_run(void) {
  shared_store_seq(&run_active, 0);
  if (!NIL_P(registry_begin_hook)) rb_tracepoint_disable(registry_begin_hook);
  registry_begin_hook = Qnil;
  if (!NIL_P(registry_end_hook)) rb_tracepoint_disable(registry_end_hook);
  registry_end_hook = Qnil;
  registry = Qnil;
}

// Prepended to Thread: a thread renamed during a run is renamed in the
// registry. Runs in the renaming code's own call, where calling Ruby is fine.
// The registry is the main Ractor's: a Ractor's thread renaming itself
// must not read it while the main Ractor's threads change it.
static VALUE thread_name_set(VALUE self, VALUE name) {
  VALUE result = rb_call_super(1, &name);
  if (!vm_on_main_ractor()) return result;
  long index = registry_index_of(self);
  if (index >= 0) rb_ary_store(registry, index + 1, rb_funcall(self, id_name, 0));
  return result;
}

bool vm_times_gvl_waits(void) { return true; }

// Epochs start at 1: a record's 0 means "no RESUMED noted".
uint64_t vm_begin_pass(void) { return shared_add_then_load_relaxed(&pass_epoch, 1); }

bool vm_tells_resumes(void) { return true; }

uint64_t vm_gvl_resumes_from_any_thread(void) { return shared_load_seq(&gvl_resumes); }

bool vm_reuses_native_threads(void) { return false; }

// From Ruby 3.3 gc.c leaves the allocation fast path only for NEWOBJ hooks.
bool vm_gc_hooks_slow_allocation(void) { return false; }

// Exported by libruby, declared only in its own sources: 3.4 (the modular
// GC) has the first, 3.3 the second (extconf.rb checks which links).
#if defined(HAVE_RB_OBJSPACE_GARBAGE_OBJECT_P)
int rb_objspace_garbage_object_p(VALUE object);
bool vm_object_live(VALUE object) { return !rb_objspace_garbage_object_p(object); }
#else
int rb_objspace_markable_object_p(VALUE object);
bool vm_object_live(VALUE object) { return rb_objspace_markable_object_p(object) != 0; }
#endif

// GC time comes from the GC hooks here; the GC clock is never polled.
int64_t vm_gc_total_time_ns(void) { return -1; }

static void describe_thread(VALUE thread, thread_record *record, VALUE name, VALUE main_thread, int64_t now_ns,
                            vm_thread_info *info) {
  int last_event;
  *info = (vm_thread_info){
      .handle = (const void *)thread,
      .thread = thread,
      .native_tid = record->tid,
      .is_main = thread == main_thread,
      .name = name,
      .has_gvl_times = true,
      .has_gvl_acquisitions = true,
      .gvl_acquisitions = shared_load_relaxed(&record->acquisitions),
  };
  read_times(record, now_ns, &last_event, info);
  info->state = state_of(thread, record, last_event);
  info->off_gvl_state = off_gvl_state_of(thread, record, info->state);
}

// A thread born READY that has not run yet has no frames and no stack to
// speak of; it is met at its first RESUMED, and its first sample then
// covers its wait since birth (its record's times start at READY).
static bool has_run(const thread_record *record) { return record->pthread != 0; }

void vm_each_thread(int64_t now_ns, vm_thread_visitor visit, void *data) {
  if (NIL_P(registry)) return;
  VALUE current = rb_thread_current(), main_thread = rb_thread_main();
  pid_t pid = this_process();
  // Visits copy what they need: the registry may shrink below, never under a visit.
  for (long i = 0; i < RARRAY_LEN(registry);) {
    VALUE thread = RARRAY_AREF(registry, i);
    thread_record *record = thread == current ? record_of_current_thread(thread, pid)
                                              : rb_internal_thread_specific_get(thread, record_key);
    if (record == NULL || record->pid != pid) {
      registry_remove_at(i); // ended: its EXITED hook freed its record
      continue;
    }
    if (has_run(record) || record->last_event != GVL_EVENT_READY) {
      vm_thread_info info;
      describe_thread(thread, record, RARRAY_AREF(registry, i + 1), main_thread, now_ns, &info);
      visit(&info, data);
    }
    i += 2;
  }
}

bool vm_current_thread_info(vm_thread_info *info) {
  VALUE thread = rb_thread_current();
  thread_record *record = record_of_current_thread(thread, this_process());
  if (record == NULL || record->tid == 0) return false;
  describe_thread(thread, record, registered_name(thread), rb_thread_main(), clocks_monotonic_ns(), info);
  return true;
}

// The handle is the Thread object (see vm_each_thread); Thread#alive?, as
// this is for tests only.
const void *vm_thread_handle_of(VALUE thread) {
  if (!rb_obj_is_kind_of(thread, rb_cThread) || !RTEST(rb_funcall(thread, rb_intern("alive?"), 0))) return NULL;
  return (const void *)thread;
}

bool vm_thread_info_of(VALUE thread, vm_thread_info *info) {
  thread_record *record = rb_internal_thread_specific_get(thread, record_key);
  if (record == NULL || record->tid == 0 || record->pid != this_process()) return false;
  describe_thread(thread, record, registered_name(thread), rb_thread_main(), clocks_monotonic_ns(), info);
  return true;
}

// rb_profile_frames and rb_profile_thread_frames fill VALUEs and ints; the
// capture buffer keeps 64-bit ids and 32-bit lines, the same sizes here.
_Static_assert(sizeof(VALUE) == sizeof(uint64_t), "frame ids are VALUEs");
_Static_assert(sizeof(int) == sizeof(int32_t), "lines are ints");

// Counting a stack deeper than the frames kept. Ruby 3.3's
// rb_profile_frames ignores its `start` argument in effect (a `continue`
// in thread_profile_frames skips the step to the next frame), so the rest
// of a stack cannot be walked in chunks: the whole stack is read once into
// this scratch, which holds more frames than a default VM stack can. One
// reader at a time, handlers included: the flag is taken by exchange, and a
// reader that finds it taken reports the depth as unknown rather than wait.
#define DEPTH_COUNT_LIMIT (1 << 16)
static VALUE depth_count_scratch[DEPTH_COUNT_LIMIT];
static int depth_count_busy;

// A handler of another thread may have held the scratch at the fork.
// The parent's ended threads' CPU is the parent's.
void vm_forget_after_fork(void) {
  shared_store_release(&depth_count_busy, 0);
  shared_store_seq(&run_active, 0); // the parent's run is not the child's
  uint64_t threads;
  vm_take_cpu_after_end_ns(&threads);
  vm_take_unmet_exit_cpu_ns(&threads); // the parent's ended threads
}

// The whole depth of a stack of which `kept` frames were read, or 0 when
// unknown. thread is Qnil for the calling thread's own stack.
static uint32_t count_depth(VALUE thread, uint32_t kept, uint32_t max_frames) {
  if (kept < max_frames) return kept;
  if (shared_exchange_acquire(&depth_count_busy, 1)) return 0;
  int depth = NIL_P(thread) ? rb_profile_frames(0, DEPTH_COUNT_LIMIT, depth_count_scratch, NULL)
                            : rb_profile_thread_frames(thread, 0, DEPTH_COUNT_LIMIT, depth_count_scratch, NULL);
  shared_store_release(&depth_count_busy, 0);
  return depth > 0 && (uint32_t)depth >= kept ? (uint32_t)depth : kept;
}

// Ruby's own rb_profile_frames is made to run in a signal handler (it
// returns 0 for a thread with no execution context or no frame yet, see
// thread_profile_frames in vm_backtrace.c), reads memory only, and reads
// the calling thread's current execution context: self_handle is not needed.
int32_t vm_capture_own_stack_signal_safe(const void *self_handle, uint64_t *frame_ids, int32_t *lines,
                                         uint32_t max_frames, uint32_t *total_depth) {
  *total_depth = 0;
  int got = rb_profile_frames(0, (int)max_frames, (VALUE *)frame_ids, (int *)lines);
  if (got < 0) return VM_CAPTURE_INCONSISTENT;
  *total_depth = count_depth(Qnil, (uint32_t)got, max_frames);
  return got;
}

// The pass's buffers for other threads' frames, reused (GVL only).
static VALUE *frame_values;
static int *frame_lines;
static uint32_t frame_capacity;

static bool ensure_frame_capacity(uint32_t wanted) {
  if (wanted <= frame_capacity) return true;
  VALUE *values = realloc(frame_values, wanted * sizeof(VALUE));
  if (values == NULL) return false;
  frame_values = values;
  int *lines = realloc(frame_lines, wanted * sizeof(int));
  if (lines == NULL) return false;
  frame_lines = lines;
  frame_capacity = wanted;
  return true;
}

// Block frames: rb_profile_thread_frames reports a block inside a method
// with the method's entry, so such a block is named like its method
// ("Object#burn", at the block's line), not "block in burn" as on 3.1.
uint32_t vm_thread_frames(const void *handle, recorder_frame *frames, uint32_t max_frames,
                          uint32_t *total_depth) {
  VALUE thread = (VALUE)handle;
  *total_depth = 0;
  if (max_frames == 0 || !ensure_frame_capacity(max_frames)) return 0;
  int got = rb_profile_thread_frames(thread, 0, (int)max_frames, frame_values, frame_lines);
  if (got <= 0) return 0;
  uint32_t kept = (uint32_t)got;
  for (uint32_t i = 0; i < kept; i++) {
    frames[i] = (recorder_frame){.frame_id = frame_values[i], .line = frame_lines[i]};
  }
  *total_depth = count_depth(thread, kept, max_frames);
  return kept;
}

// Frames come from rb_profile_thread_frames, which reads every frame each
// time: there is nothing for a memo to keep.
vm_frames_memo *vm_frames_memo_new(void) { return NULL; }

void vm_frames_memo_free(vm_frames_memo *memo) {}

uint32_t vm_thread_frames_with_memo(const void *handle, vm_frames_memo *memo, bool previous_read_kept,
                                    recorder_frame *frames, uint32_t max_frames, uint32_t *total_depth,
                                    bool *unchanged) {
  *unchanged = false;
  return vm_thread_frames(handle, frames, max_frames, total_depth);
}

// The handle is the Thread object, as in vm_each_thread. rb_thread_current
// only reads the running thread's execution context: no allocation, so it
// is safe during GC.
const void *vm_current_thread_handle(void) { return (const void *)rb_thread_current(); }

// No public API hands out the block a thread was started with; unnamed
// threads are then named by their thread id (thread_contexts.c's fallback).
bool vm_thread_start_location(const void *handle, char *out, size_t size) { return false; }

#if RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR == 3
// Ruby 3.3's rb_profile_frame_singleton_method_p tests FL_SINGLETON on the
// method entry's defined class without checking that it is a class. A
// method of a module that has a module prepended (Kernel, once anything
// prepends to it) is reached through an iclass that carries
// RICLASS_IS_ORIGIN in that same bit, so 3.3 names Kernel#is_a? as
// "Kernel.is_a?". 3.4 checks the type (RCLASS_SINGLETON_P). The one word
// read beyond the public API: a method entry's defined class, its second
// field since Ruby 2.3 (rb_callable_method_entry_t in method.h).
typedef struct {
  VALUE flags;
  VALUE defined_class;
} method_entry_head;

static bool singleton_by_mistake(VALUE frame) {
  if (!RB_TYPE_P(frame, T_IMEMO)) return false;
  VALUE defined_class = ((const method_entry_head *)frame)->defined_class;
  return !RB_SPECIAL_CONST_P(defined_class) && RB_TYPE_P(defined_class, T_ICLASS);
}

static VALUE full_label(VALUE frame) {
  if (RTEST(rb_profile_frame_singleton_method_p(frame)) && singleton_by_mistake(frame)) {
    VALUE class_path = rb_profile_frame_classpath(frame), method_name = rb_profile_frame_method_name(frame);
    if (!NIL_P(class_path) && !NIL_P(method_name)) {
      return rb_sprintf("%" PRIsVALUE "#%" PRIsVALUE, class_path, method_name);
    }
  }
  return rb_profile_frame_full_label(frame);
}
#else
static VALUE full_label(VALUE frame) { return rb_profile_frame_full_label(frame); }
#endif

// On 3.3 the public frame API names C methods too ("Integer#times"): their
// path is nil and their first line unknown.
void vm_describe_frame(uint64_t frame_id, VALUE *name, VALUE *path, int64_t *first_line) {
  VALUE frame = (VALUE)frame_id;
  *name = full_label(frame);
  *path = rb_profile_frame_path(frame);
  VALUE line = rb_profile_frame_first_lineno(frame);
  *first_line = FIXNUM_P(line) ? FIX2LONG(line) : 0;
}

void vm_mark_frame(uint64_t frame_id) { rb_gc_mark((VALUE)frame_id); }

static rb_postponed_job_handle_t sampling_job = POSTPONED_JOB_HANDLE_INVALID;

bool vm_postponed_job_prepare(void (*job)(void *unused)) {
  sampling_job = rb_postponed_job_preregister(0, job, NULL);
  return sampling_job != POSTPONED_JOB_HANDLE_INVALID;
}

// rb_postponed_job_trigger is async-signal-safe and coalesces repeated
// triggers into one run; it cannot fail once the job is preregistered.
bool vm_postponed_job_trigger_signal_safe(void) {
  if (sampling_job == POSTPONED_JOB_HANDLE_INVALID) return false;
  rb_postponed_job_trigger(sampling_job);
  return true;
}

// RUBY_MN_THREADS=1 (Ruby reads it once at boot) runs the main Ractor's
// threads M:N, several Ruby threads taking turns on one native thread. Then
// a pthread, its CPU clock and its tid no longer belong to one Ruby thread,
// and the hooks may run on another native thread than their thread's:
// Sonde refuses rather than mislabel every sample.
//
// Told from what the VM does, not from the environment (an application or
// a launcher may delete the variable after boot): probe threads are started
// one after another, each reporting its kernel tid and then waiting on a
// queue. With 1:1 threads every live thread has a native thread of its own,
// so the tids all differ; under M:N a waiting thread gives its native
// thread back and the next probe runs on it (seen on 3.3 and 3.4: all four
// on one). Costs four short-lived threads at load.
#define MN_PROBE_THREADS 4

typedef struct {
  VALUE reports, gate;              // Thread::Queue each
  VALUE threads[MN_PROBE_THREADS];
  long tids[MN_PROBE_THREADS + 1];  // the loading thread's, then each probe's
  int started;
  bool shared;
} mn_probe;

static VALUE mn_probe_thread(void *arg) {
  mn_probe *probe = arg;
  rb_funcall(probe->reports, rb_intern("push"), 1, LONG2NUM((long)syscall(SYS_gettid)));
  return rb_funcall(probe->gate, rb_intern("pop"), 0);
}

static VALUE mn_probe_start(VALUE arg) {
  mn_probe *probe = (mn_probe *)arg;
  probe->tids[0] = (long)syscall(SYS_gettid);
  while (probe->started < MN_PROBE_THREADS) {
    probe->threads[probe->started] = rb_thread_create(mn_probe_thread, probe);
    probe->started++;
    long tid = NUM2LONG(rb_funcall(probe->reports, rb_intern("pop"), 0));
    for (int i = 0; i < probe->started; i++) probe->shared |= probe->tids[i] == tid;
    probe->tids[probe->started] = tid;
  }
  return Qnil;
}

// Whatever happened, the probes that started are let go and joined.
static VALUE mn_probe_finish(VALUE arg) {
  mn_probe *probe = (mn_probe *)arg;
  for (int i = 0; i < probe->started; i++) rb_funcall(probe->gate, rb_intern("push"), 1, Qnil);
  for (int i = 0; i < probe->started; i++) rb_funcall(probe->threads[i], rb_intern("join"), 0);
  return Qnil;
}

static void refuse_mn_threads(void) {
  VALUE queue = rb_path2class("Thread::Queue");
  mn_probe probe = {.reports = rb_class_new_instance(0, NULL, queue), .gate = rb_class_new_instance(0, NULL, queue)};
  rb_ensure(mn_probe_start, (VALUE)&probe, mn_probe_finish, (VALUE)&probe);
  RB_GC_GUARD(probe.reports);
  RB_GC_GUARD(probe.gate);
  if (!probe.shared) return;
  int distinct = 0;
  for (int i = 0; i <= MN_PROBE_THREADS; i++) {
    bool seen = false;
    for (int j = 0; j < i; j++) seen |= probe.tids[j] == probe.tids[i];
    distinct += !seen;
  }
  rb_raise(rb_path2class("Sonde::UnsupportedError"),
           "Sonde cannot profile Ruby's M:N threads (RUBY_MN_THREADS=1): Ruby threads share native threads "
           "in this process (at load, %d live threads ran on %d), and CPU time and thread ids are per native "
           "thread; run without RUBY_MN_THREADS",
           MN_PROBE_THREADS + 1, distinct);
}

// Set on the main Ractor at init; any other Ractor reads NULL for it
// (Ruby's ractor-local storage, read without allocating: the main Ractor's
// value is a cached word, another Ractor's a lookup in its own table).
static rb_ractor_local_key_t main_ractor_key;
static char main_ractor_marker;

bool vm_on_main_ractor(void) { return rb_ractor_local_storage_ptr(main_ractor_key) == &main_ractor_marker; }

// With the GVL, on whichever thread loads Sonde: that thread holds the GVL
// now, so it is the owner until its next SUSPENDED. Raises
// Sonde::UnsupportedError, before changing anything, under M:N threads.
void vm_init(void) {
  refuse_mn_threads();
  main_ractor_key = rb_ractor_local_storage_ptr_newkey(NULL);
  rb_ractor_local_storage_ptr_set(main_ractor_key, &main_ractor_marker);
  id_list = rb_intern("list");
  id_name = rb_intern("name");
  id_native_thread_id = rb_intern("native_thread_id");
  sleep_verdicts = st_init_numtable();
  rb_gc_register_address(&registry);
  rb_gc_register_address(&registry_begin_hook);
  rb_gc_register_address(&registry_end_hook);
  VALUE sonde = rb_const_get(rb_cObject, rb_intern("Sonde"));
  VALUE name_tracker = rb_define_module_under(sonde, "ThreadNameTracker");
  rb_define_method(name_tracker, "name=", thread_name_set, 1);
  rb_prepend_module(rb_cThread, name_tracker);
  record_key = rb_internal_thread_specific_key_create(); // raises ThreadError when Ruby has no key left
  rb_internal_thread_add_event_hook(on_thread_event_without_gvl,
                                    RUBY_INTERNAL_THREAD_EVENT_READY | RUBY_INTERNAL_THREAD_EVENT_RESUMED |
                                        RUBY_INTERNAL_THREAD_EVENT_SUSPENDED | RUBY_INTERNAL_THREAD_EVENT_EXITED,
                                    NULL);
  record_of_current_thread(rb_thread_current(), this_process());
}
