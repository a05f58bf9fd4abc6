// vm.h: the only window onto the Ruby VM's internals. Everything that depends
// on how a Ruby version lays out its threads, GVL and control frames sits
// behind these functions, in one file per backend, picked by extconf.rb from
// what the Ruby headers offer: vm_ruby31.c for Ruby 3.1 and 3.2 (which read
// Ruby's own MJIT header), vm_public.c for Ruby 3.3 and later (public APIs
// only). The rest of the core sees opaque handles and plain C values.
#ifndef SONDE_VM_H
#define SONDE_VM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ruby.h>

#include "recorder.h"

// What a thread is doing, as far as the VM can tell without asking it.
typedef enum {
  VM_THREAD_RUNNING,         // holds the GVL
  VM_THREAD_WAITING_FOR_GVL, // runnable, queued for the GVL
  VM_THREAD_SLEEPING,        // sleep, Queue#pop, Mutex#lock, join, ...
  VM_THREAD_BLOCKED,         // in a blocking region without the GVL (IO, syscalls, C calls)
  VM_THREAD_STATE_COUNT
} vm_thread_state;

// Where a thread's wall time went, by what the GVL events say it was doing:
// cumulative nanoseconds since Sonde first met the thread, up to the time
// passed to vm_each_thread. Only backends with GVL hooks know this.
typedef struct {
  int64_t holding_gvl_ns;     // RESUMED until SUSPENDED: running Ruby (or C with the GVL)
  int64_t waiting_for_gvl_ns; // READY until RESUMED: runnable, queued for the GVL
  int64_t off_gvl_ns;         // SUSPENDED until READY: sleeping, blocked in IO or C code
} vm_gvl_times;

// One live Ruby thread of the main Ractor, as seen while holding the GVL.
typedef struct {
  const void *handle; // opaque: the VM's thread struct; valid while the GVL is held
  VALUE thread;       // the Thread object
  int64_t native_tid; // Linux thread id, as Thread#native_thread_id
  vm_thread_state state;
  bool is_main;
  VALUE name; // Thread#name, or Qnil; Qundef when the backend does not know it now
  bool has_gvl_times;    // false on backends without GVL hooks (Ruby 3.1, 3.2)
  vm_gvl_times gvl_times;
  // What the thread did during its off_gvl_ns time, as far as its leaf
  // frame tells: VM_THREAD_SLEEPING or VM_THREAD_BLOCKED. Set with gvl_times.
  vm_thread_state off_gvl_state;
  // Where the backend counts each time a thread takes the GVL (3.3+): an
  // unchanged count means the thread ran no Ruby code since, so its stack
  // is the one it had then. Other backends tell by the thread's CPU clock.
  bool has_gvl_acquisitions;
  uint64_t gvl_acquisitions;
  // Backends with GVL hooks (3.3+): the thread's first GVL acquisition
  // after the pass of epoch first_resume_epoch began (vm_begin_pass), when
  // it was and the GVL times as of then; 0: none since the last pass that
  // began. A thread that was off the GVL at that pass's sample kept its
  // stack until this moment: its wait is credited to that stack up to
  // here, however long ago the pass was.
  uint64_t first_resume_epoch;
  int64_t first_resume_ns;
  vm_gvl_times gvl_times_at_first_resume;
} vm_thread_info;

typedef void (*vm_thread_visitor)(const vm_thread_info *info, void *data);

// Remembers the main Ractor. Call once with the GVL, on the main Ractor.
void vm_init(void);

// Whether the calling thread is one of the main Ractor's. Sonde samples the
// main Ractor only: a postponed job, a hook or a pass that finds itself on
// another Ractor's thread (each Ractor runs in parallel with its own GVL)
// must return at once, leaving its work to the main Ractor. For code that
// holds its own Ractor's GVL, GC hooks included: allocates nothing, calls
// no Ruby method, cannot raise.
bool vm_on_main_ractor(void);

// Calls visit for every living thread of the main Ractor, with GVL times as
// of now_ns (monotonic) where the backend has them. Needs the GVL.
void vm_each_thread(int64_t now_ns, vm_thread_visitor visit, void *data);

// A sampling pass begins (with the GVL): returns its epoch, which the
// threads' next first GVL acquisitions are noted under (vm_thread_info's
// first_resume_epoch). 0 on backends without GVL hooks.
uint64_t vm_begin_pass(void);

// Whether the backend counts GVL acquisitions as they happen
// (vm_gvl_resumes_from_any_thread) and ends the trigger's park at each
// (trigger_park.h): Ruby 3.3+. Without it the trigger backs off instead.
bool vm_tells_resumes(void);

// Any thread, no GVL: how many times any thread took a GVL since load
// (3.3+; an atomic read). 0 on backends that do not count them.
uint64_t vm_gvl_resumes_from_any_thread(void);

// Whether this backend times each thread's GVL waits (vm_thread_info's
// gvl_times): Ruby 3.3+, through the GVL instrumentation hooks.
bool vm_times_gvl_waits(void);

// Whether a new Ruby thread may run on the native thread of one that ended
// (Ruby 3.1's thread cache): its CPU clock then starts at what the earlier
// threads used, not at 0. Ruby 3.3 and later make a native thread per thread.
bool vm_reuses_native_threads(void);

// Ruby 3.3+: what a thread does after its thread-end hook (Ruby's teardown
// of the thread, up to its last GVL event) is counted by that event's hook
// from the CPU clock reading the end hook noted here. With the GVL, on the
// ending thread, from its thread-end hook. Ruby 3.1 needs none (its next
// thread on the same native thread counts from there): a no-op.
void vm_note_current_thread_end_cpu(int64_t cpu_ns);

// The CPU time counted so, since the previous call, and how many threads
// it came from. Any thread; atomic; 0 on Ruby 3.1.
int64_t vm_take_cpu_after_end_ns(uint64_t *threads);

// With the GVL: the calling thread's name as the backend knows it now (a
// String, or Qnil), Qundef where it is not known (Ruby 3.1 reads names
// from each thread when it is described, not here).
VALUE vm_current_thread_name(void);

// Whether ended threads that no sampling pass met are counted by their
// EXITED event (Ruby 3.3+): there each native thread is the Ruby thread's
// own, so its CPU clock at EXITED is that thread's whole life, read by a
// hook that runs anyway. Such a thread then needs no thread-begin hook and
// no thread-end work: most threads of a churning program end before any
// pass, and that work was most of what Sonde added to each (issue 23).
// Ruby 3.1 has no EXITED event, and reuses native threads: false.
bool vm_exits_count_unmet_threads(void);

// With the GVL: this run accounts for the thread's CPU itself (a sampling
// pass, the baseline or its thread-end hook made a context for it) or
// leaves it out (one of Sonde's own threads): its EXITED must not count it
// as a thread that ended unmet. A no-op on Ruby 3.1.
void vm_note_thread_accounted(VALUE thread);

// Ruby 3.3+: the CPU clocks, at EXITED, of the threads of the main Ractor
// that ended during the run with no context (vm_note_thread_accounted): their
// whole lives, teardown included, since the previous call, and how many
// threads. Any thread; atomic; 0 on Ruby 3.1.
int64_t vm_take_unmet_exit_cpu_ns(uint64_t *threads);

// Ruby 3.3+: the sum of every ended thread's CPU clock as its EXITED event
// read it, for the threads that ended while a run was active (from
// vm_begin_run to vm_end_run; any Ractor's threads; it only grows), for
// exit_cpu.h. Any thread; atomic. -1 on Ruby 3.1 (no EXITED event).
int64_t vm_exited_threads_clock_ns(void);

// Ruby 3.3+: the tids of the latest threads (up to max, at most 256) to
// pass EXITED, whose clocks are in that sum; 0 on Ruby 3.1.
size_t vm_recently_exited_tids(int64_t *tids, size_t max);

// Signal-safe, no GVL needed: reads the Linux thread id of the thread that
// holds the main Ractor's GVL. Returns false when no thread holds it. The
// read is racy by nature: the owner may let the GVL go, or even end, right
// after; callers treat it as a hint (signals.h sends by tid for that).
bool vm_gvl_owner_tid_from_any_thread(pid_t *tid);

// Signal-safe: whether the calling thread holds the main Ractor's GVL.
bool vm_current_thread_holds_gvl_signal_safe(void);

// Fills frames (leaf first) with at most max_frames frames of the thread's
// current stack; frame_id is a Ruby VALUE (method entry or iseq) that
// vm_describe_frame understands. Sets *total_depth to the whole stack's depth
// (larger than the return value when the stack was cut). Needs the GVL.
uint32_t vm_thread_frames(const void *handle, recorder_frame *frames, uint32_t max_frames,
                          uint32_t *total_depth);

// What a backend keeps of one thread's previous read, so that the next
// read of the same thread takes its unchanged outer frames from it instead
// of following their pointers again (the sampling pass's reads of other
// threads; vm_ruby31.c has one, vm_public.c reads through Ruby's API and
// has none). Opaque; one per thread, owned by the caller.
typedef struct vm_frames_memo vm_frames_memo;

// A new empty memo, or NULL when the backend has none (or out of memory):
// vm_thread_frames_with_memo then reads as vm_thread_frames does.
vm_frames_memo *vm_frames_memo_new(void);
void vm_frames_memo_free(vm_frames_memo *memo);

// vm_thread_frames, with the thread's memo (NULL: none). previous_read_kept:
// the caller has kept every frame id of the previous read with this memo
// alive and in place since (marked with vm_mark_frame: the recorder holds
// them), which lets the memo be trusted across GCs. *unchanged: every
// frame is the one that read found, so the result is that read's (the
// caller may reuse what it made of it). Needs the main Ractor's GVL;
// allocates (malloc) only when the stack is deeper than any the memo held.
uint32_t vm_thread_frames_with_memo(const void *handle, vm_frames_memo *memo, bool previous_read_kept,
                                    recorder_frame *frames, uint32_t max_frames, uint32_t *total_depth,
                                    bool *unchanged);

// The VM thread running this code. Safe during GC (reads thread-local state only).
const void *vm_current_thread_handle(void);

// Describes the thread running this code, as vm_each_thread would. Needs
// the GVL (a thread-begin hook). Returns false when the thread cannot be
// described yet (no native thread id).
bool vm_current_thread_info(vm_thread_info *info);

// ---------------------------------------------------------------------------
// Inside the SIGPROF handler. These read memory and call nothing that
// locks, allocates or can raise; errno is the caller's to save.

// Signal-safe: the calling thread's handle (as vm_thread_info.handle) if
// it holds the GVL, else NULL.
const void *vm_gvl_holder_self_signal_safe(void);

// Signal-safe: whether the VM is in a GC now (marking, eager sweeping or
// compacting), on whichever thread.
bool vm_gc_running_signal_safe(void);

// Signal-safe: reads the calling thread's own Ruby stack, leaf first, into
// frame_ids/lines (at most max_frames), as vm_thread_frames would for it.
// self_handle is the calling thread's handle (its vm_thread_info.handle).
// *total_depth gets the whole stack's depth, or 0 when it could not be
// counted. Returns the number of frames kept, or VM_CAPTURE_INCONSISTENT
// when a frame fails a sanity check (a frame half pushed, a thread in its
// teardown): the caller drops the sample and counts it.
#define VM_CAPTURE_INCONSISTENT (-1)
// Or VM_CAPTURE_LATER when this VM cannot have its stack read in a signal
// handler at all (Ruby 3.1/3.2 with YJIT on): the caller has it read at
// recording, with the GVL.
#define VM_CAPTURE_LATER (-2)
int32_t vm_capture_own_stack_signal_safe(const void *self_handle, uint64_t *frame_ids, int32_t *lines,
                                         uint32_t max_frames, uint32_t *total_depth);

// For a thread started from a block: where the block is ("app.rb:12"),
// written into out. Returns false when unknown. Needs the GVL; calls no
// Ruby method (the sampling pass uses it, see vm_begin_run).
bool vm_thread_start_location(const void *handle, char *out, size_t size);

// A run starts and ends (Sonde.start, Sonde.stop: plain calls, with the
// GVL, where calling Ruby methods is fine). The sampling pass itself never
// calls a Ruby method: a method call runs the pending interrupts of the
// thread it is on (a Thread#kill, a Thread#raise), which the pass, running
// in a postponed job, would swallow. What a backend needs Ruby methods for
// (the thread list, thread names on 3.3) it gathers here and keeps current
// through hooks.
void vm_begin_run(void);
void vm_end_run(void);

// In a forked child (pthread_atfork): forget what other threads, which do
// not exist in the child, held in the backend's own state.
void vm_forget_after_fork(void);

// Describes one Ruby thread as vm_each_thread would. Needs the GVL.
// Returns false when the thread has no native thread (not started, ended).
bool vm_thread_info_of(VALUE thread, vm_thread_info *info);

// The handle (vm_thread_info.handle) of a living Ruby thread, outside a run
// too; NULL for anything else. Needs the GVL. For Sonde::Native::Testing.
const void *vm_thread_handle_of(VALUE thread);

// Ruby's own GC clock (GC.total_time), in nanoseconds, read without calling
// a Ruby method, or -1 where it is not read (backends with GC hooks). With
// the GVL.
int64_t vm_gc_total_time_ns(void);

// Describes a frame_id from vm_thread_frames: its name ("Class#method",
// "Class.method", "block in Class#method", "<main>"), its file and the line
// its method starts on. name and path may come back Qnil when unknown. Needs
// the GVL; may allocate Ruby strings, so never call it while sampling.
void vm_describe_frame(uint64_t frame_id, VALUE *name, VALUE *path, int64_t *first_line);

// Marks a frame_id so that the GC neither frees nor moves what it points at.
void vm_mark_frame(uint64_t frame_id);

// With the GVL, outside GC: whether object, the address of a slot of a page
// the heap still has, holds a live object (not freed, not garbage waiting
// for a lazy sweep). Allocates nothing.
bool vm_object_live(VALUE object);

// Whether a GC enter/exit hook slows down every allocation on this Ruby.
// Ruby 3.1 and 3.2 turn off the allocation fast path while any GC event
// hook is on (about 1.5x the cost of an allocation, bench/workloads/gc_hook.rb);
// from 3.3 only a NEWOBJ hook does.
bool vm_gc_hooks_slow_allocation(void);

// The sampling job, as each Ruby version wants postponed jobs asked for:
// rb_postponed_job_register_one before 3.3, rb_postponed_job_preregister
// then rb_postponed_job_trigger from 3.3 on.

// Makes job the one postponed job. Call once, with the GVL, at init. Returns
// false when Ruby has no room for it (every later trigger then fails).
bool vm_postponed_job_prepare(void (*job)(void *unused));

// Signal-safe: asks Ruby to run the job at the next safe point of the thread
// that holds the GVL. Returns false when it could not be queued.
bool vm_postponed_job_trigger_signal_safe(void);

#endif
