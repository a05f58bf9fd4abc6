// alloc_source.c: allocation samples and the live heap (see the header).
//
// Contexts. on_newobj_no_alloc runs inside Ruby's object allocation, on the
// allocating thread, with the GVL: it must not allocate a Ruby object (that
// would re-enter the allocator, and maybe the GC, from inside it), call
// Ruby or raise; it does not malloc either, so that its cost stays a
// countdown and, one time in alloc_interval, a stack read. It counts down,
// and on a sampled allocation reads the thread's own stack into a slot of
// the source's capture buffer (memory allocated at start), tracks the
// object, and triggers the postponed job. on_freeobj_no_alloc runs during
// GC for every freed object: one hash probe, nothing else. A CPU timer's
// SIGPROF may interrupt either hook: the handler writes the run's own
// capture buffer, never this one, and reads the stack without writing it.
// Everything else runs with the GVL, outside GC.
//
// GC.compact (and auto-compaction) moves objects without telling FREEOBJ:
// the tracked addresses would then name other objects. The compaction
// count is checked before the tracked set is used, and a set that a
// compaction made stale is dropped (counted in heap_compaction_resets).
#include "alloc_source.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ruby/debug.h>

#include "capture_buffer.h"
#include "clocks.h"
#include "current_tid.h"
#include "heap_tracker.h"
#include "labels.h"
#include "own_threads.h"
#include "recorder_slots.h"
#include "stacks.h"
#include "thread_contexts.h"
#include "vm.h"
#include "xorshift.h"

// Samples waiting to be recorded. The job runs at the allocating thread's
// next safe point, a few allocations later, but a C call that allocates
// without reaching one (JSON.parse of a large document) can take hundreds
// of samples first, and samples of a thread no pass has met yet wait for
// the next pass. Once the buffer is full, a sample equal to one of the
// RECENT_SLOTS latest still waiting (same stack, class, thread, labels:
// inside one C call most are) adds its weight to it; any other is lost,
// its weight recorded under "(allocation samples lost)". Pages never
// written cost nothing.
#define ALLOC_CAPTURE_SLOTS 256
#define RECENT_SLOTS 16
// A gap never longer than this many intervals (a random draw near zero).
#define MAX_GAP_INTERVALS 64

// ObjectSpace.memsize_of's C function: exported by libruby, declared only in
// its internal headers.
size_t rb_obj_memsize_of(VALUE object);

struct alloc_source {
  uint32_t interval;
  bool heap;
  uint32_t max_frames;
  VALUE newobj_hook, freeobj_hook;
  bool running; // the hooks are on: the tracked set is current
  // The hook's countdown to the next sample, and the gap it started from
  // (the sample's weight).
  uint64_t countdown;
  uint64_t gap;
  uint64_t random_state;
  double log_keep_probability; // log(1 - 1/interval)
  capture_buffer *captures;
  // The latest slots published, to merge into once the buffer is full, and
  // the sample being taken while it is (its frames: max_frames each).
  struct {
    capture *slot;
    uint64_t sequence;
  } recent[RECENT_SLOTS];
  uint32_t recent_next;
  capture overflow;
  // Lost samples' weight, and the thread of the latest, until recorded.
  uint64_t lost_weight;
  int32_t lost_tid;
  heap_tracker *tracker; // NULL without heap
  recorder_frame *frames; // max_frames + 1: one sample's stack, in recording and in the hook's fallback
  size_t compactions_seen;
  // Stats.
  uint64_t allocations; // the weights of every sample taken
  uint64_t samples;     // recorded
  uint64_t inconsistent_stacks, recording_failures, compaction_resets, heap_samples;
  uint64_t merged_samples, lost_samples;
};

// A geometric gap with mean interval: the number of allocations up to and
// including the next sampled one, as if each were sampled with
// probability 1 / interval.
static uint64_t draw_gap(alloc_source *alloc) {
  if (alloc->interval <= 1) return 1;
  double uniform = ((double)(xorshift_next(&alloc->random_state) >> 11) + 1.0) / 9007199254740992.0; // (0, 1]
  double gap = 1.0 + floor(log(uniform) / alloc->log_keep_probability);
  double max_gap = (double)alloc->interval * MAX_GAP_INTERVALS;
  return gap > max_gap ? (uint64_t)max_gap : (uint64_t)gap;
}

alloc_source *alloc_source_new(const run_settings *settings) {
  alloc_source *alloc = calloc(1, sizeof(*alloc));
  if (alloc == NULL) return NULL;
  alloc->interval = settings->alloc_interval;
  alloc->heap = settings->heap;
  alloc->max_frames = settings->max_frames;
  alloc->newobj_hook = Qnil;
  alloc->freeobj_hook = Qnil;
  alloc->random_state = (uint64_t)clocks_monotonic_ns() | 1;
  alloc->log_keep_probability = alloc->interval > 1 ? log(1.0 - 1.0 / alloc->interval) : 0;
  alloc->captures = capture_buffer_new(ALLOC_CAPTURE_SLOTS, settings->max_frames);
  alloc->frames = calloc((size_t)settings->max_frames + 1, sizeof(recorder_frame));
  alloc->overflow.frame_ids = calloc(settings->max_frames, sizeof(uint64_t));
  alloc->overflow.lines = calloc(settings->max_frames, sizeof(int32_t));
  if (alloc->heap) alloc->tracker = heap_tracker_new(ALLOC_HEAP_MAX_OBJECTS, settings->max_frames + 1);
  if (!alloc->captures || !alloc->frames || !alloc->overflow.frame_ids || !alloc->overflow.lines ||
      (alloc->heap && !alloc->tracker)) {
    alloc_source_free(alloc);
    return NULL;
  }
  alloc->gap = draw_gap(alloc);
  alloc->countdown = alloc->gap;
  return alloc;
}

void alloc_source_free(alloc_source *alloc) {
  if (alloc == NULL) return;
  capture_buffer_free(alloc->captures);
  heap_tracker_free(alloc->tracker);
  free(alloc->frames);
  free(alloc->overflow.frame_ids);
  free(alloc->overflow.lines);
  free(alloc);
}

bool alloc_source_samples_allocations(const sonde_run *run) { return run->alloc != NULL; }

bool alloc_source_tracks_heap(const sonde_run *run) { return run->alloc != NULL && run->alloc->heap; }

// ---------------------------------------------------------------------------
// Inside allocation (NEWOBJ) and GC (FREEOBJ).

// The thread's own stack into the slot. Where the VM cannot have its stack
// read from a signal handler (3.1 with YJIT) it is read the usual way: the
// hook holds the GVL, and vm_thread_frames allocates nothing once its
// scratch is grown (start_alloc grows it).
static bool read_stack_no_alloc(alloc_source *alloc, capture *slot) {
  const void *self = vm_current_thread_handle();
  int32_t got = vm_capture_own_stack_signal_safe(self, slot->frame_ids, slot->lines, alloc->max_frames,
                                                 &slot->total_depth);
  if (got >= 0) {
    slot->depth = (uint32_t)got;
    return true;
  }
  if (got != VM_CAPTURE_LATER) return false;
  uint32_t kept = vm_thread_frames(self, alloc->frames, alloc->max_frames, &slot->total_depth);
  for (uint32_t i = 0; i < kept; i++) {
    slot->frame_ids[i] = alloc->frames[i].frame_id;
    slot->lines[i] = alloc->frames[i].line;
  }
  slot->depth = kept;
  return true;
}

static bool same_sample(const capture *a, const capture *b) {
  if (a->tid != b->tid || a->object_class != b->object_class || a->label_set != b->label_set ||
      a->depth != b->depth || a->total_depth != b->total_depth || !trace_context_equal(&a->trace, &b->trace)) {
    return false;
  }
  for (uint32_t i = 0; i < a->depth; i++) {
    if (a->frame_ids[i] != b->frame_ids[i] || a->lines[i] != b->lines[i]) return false;
  }
  return true;
}

// The class of a newly allocated object, or 0 for the VM's own objects.
// Hidden objects have klass 0 already; an imemo (and a parser node) uses
// its klass word for data of its own (an ifunc's pointer, a cref's
// value), which must never be taken for a class: the GC would be asked to
// mark it (the crash `rake bench:alloc` found on 3.3).
static uint64_t class_of_new_object_no_alloc(VALUE object) {
  switch (RB_BUILTIN_TYPE(object)) {
    case RUBY_T_IMEMO:
    case RUBY_T_NODE:
    case RUBY_T_NONE:
    case RUBY_T_ZOMBIE:
    case RUBY_T_MOVED:
      return 0;
    default:
      return RBASIC_CLASS(object);
  }
}

// A sample that cannot be recorded: its weight waits for the drain, under
// the lost-samples frame.
static void lose_weight_no_alloc(alloc_source *alloc, uint32_t weight, int32_t tid) {
  alloc->lost_weight += weight;
  alloc->lost_tid = tid;
}

// The buffer is full: the sample in alloc->overflow joins an equal one
// still waiting, or is lost.
static void merge_or_lose_no_alloc(alloc_source *alloc) {
  const capture *sample = &alloc->overflow;
  for (uint32_t i = 0; i < RECENT_SLOTS; i++) {
    capture *slot = alloc->recent[i].slot;
    if (slot == NULL || slot->sequence != alloc->recent[i].sequence ||
        !capture_buffer_slot_published(alloc->captures, slot) || !same_sample(slot, sample)) {
      continue;
    }
    uint64_t weight = (uint64_t)slot->weight + sample->weight;
    slot->weight = weight > UINT32_MAX ? UINT32_MAX : (uint32_t)weight;
    alloc->merged_samples++;
    return;
  }
  alloc->lost_samples++;
  lose_weight_no_alloc(alloc, sample->weight, sample->tid);
}

static void take_sample_no_alloc(alloc_source *alloc, VALUE tracepoint) {
  uint64_t gap = alloc->gap;
  alloc->gap = draw_gap(alloc);
  alloc->countdown = alloc->gap;
  alloc->allocations += gap;
  uint32_t weight = gap > UINT32_MAX ? UINT32_MAX : (uint32_t)gap;

  VALUE object = rb_tracearg_object(rb_tracearg_from_tracepoint(tracepoint));
  capture *slot = capture_buffer_claim_signal_safe(alloc->captures);
  bool claimed = slot != NULL;
  if (!claimed) slot = &alloc->overflow;
  slot->kind = CAPTURE_ALLOC;
  slot->tid = current_tid_cached();
  slot->label_set = labels_current_signal_safe();
  labels_current_trace_signal_safe(&slot->trace);
  slot->object = object;
  slot->object_class = class_of_new_object_no_alloc(object);
  slot->weight = weight;
  if (!read_stack_no_alloc(alloc, slot)) {
    alloc->inconsistent_stacks++;
    if (claimed) capture_buffer_abandon_signal_safe(alloc->captures, slot);
    lose_weight_no_alloc(alloc, weight, slot->tid);
    return;
  }
  if (!claimed) {
    merge_or_lose_no_alloc(alloc);
    return;
  }
  slot->sequence = capture_buffer_next_sequence_signal_safe(alloc->captures);
  if (alloc->tracker != NULL) {
    heap_tracker_track_no_alloc(alloc->tracker, object, slot->object_class, weight, slot->tid, slot->sequence);
  }
  alloc->recent[alloc->recent_next % RECENT_SLOTS].slot = slot;
  alloc->recent[alloc->recent_next % RECENT_SLOTS].sequence = slot->sequence;
  alloc->recent_next++;
  capture_buffer_publish_signal_safe(alloc->captures, slot);
  vm_postponed_job_trigger_signal_safe();
}

static void on_newobj_no_alloc(VALUE tracepoint, void *data) {
  alloc_source *alloc = data;
  if (--alloc->countdown > 0) return;
  take_sample_no_alloc(alloc, tracepoint);
}

static void on_freeobj_no_alloc(VALUE tracepoint, void *data) {
  alloc_source *alloc = data;
  heap_tracker_forget_no_alloc(alloc->tracker, rb_tracearg_object(rb_tracearg_from_tracepoint(tracepoint)));
}

// ---------------------------------------------------------------------------
// Recording, with the GVL.

static size_t compaction_count(void) {
  static VALUE key = Qnil;
  if (NIL_P(key)) key = ID2SYM(rb_intern("compact_count"));
  return rb_gc_stat(key);
}

// A compaction since the set was last checked moved objects the set names
// by their old addresses: drop it all.
static void reset_heap_if_compacted(alloc_source *alloc) {
  size_t compactions = compaction_count();
  if (compactions == alloc->compactions_seen) return;
  alloc->compactions_seen = compactions;
  if (heap_tracker_count(alloc->tracker) > 0) alloc->compaction_resets++;
  heap_tracker_clear(alloc->tracker);
}

typedef struct {
  sonde_run *run;
  bool keep_unmet;
} alloc_drain;

static bool record_for_thread(sonde_run *run, thread_context *context, int64_t tid, const recorder_frame *frames,
                              uint32_t depth, recorder_context *sample_context, const int64_t *values) {
  recorder *rec = recorder_slots_active(run->slots);
  uint32_t stack_id;
  if (recorder_intern_stack(rec, frames, depth, &stack_id) != 0) return false;
  bool named;
  if (context != NULL) {
    named = thread_context_recorder_index(context, rec, &sample_context->thread_index);
  } else {
    char name[THREAD_NAME_SIZE];
    thread_contexts_name_of_unmet(tid, name, sizeof(name));
    named = recorder_intern_thread(rec, tid, name, &sample_context->thread_index) == 0;
  }
  return named && recorder_add(rec, stack_id, sample_context, values) == 0;
}

static capture_verdict record_alloc_capture(const capture *captured, void *data) {
  alloc_drain *drain = data;
  sonde_run *run = drain->run;
  alloc_source *alloc = run->alloc;
  thread_context *context = thread_contexts_find_by_tid(run->contexts, captured->tid);
  // Sonde's own threads (the flusher, exporters) are not profiled.
  if (context != NULL && own_threads_contains(run->own, context->thread)) return CAPTURE_TAKEN;
  if (context == NULL && drain->keep_unmet) return CAPTURE_KEPT;
  // Between passes a new thread may have named itself: its samples say so
  // (as CPU samples do; passes are rare where the GVL holder never reaches
  // one, 3.1 with YJIT).
  if (context != NULL && drain->keep_unmet) thread_contexts_refresh_name_now(context);
  uint32_t depth = stacks_from_capture(captured, alloc->frames, alloc->max_frames);
  if (alloc->tracker != NULL &&
      heap_tracker_set_stack(alloc->tracker, captured->object, captured->sequence, alloc->frames, depth) != 0) {
    alloc->recording_failures++;
  }
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_ALLOC_SAMPLES] = captured->weight};
  recorder_context sample_context = {.state = VM_THREAD_RUNNING,
                                     .label_set = captured->label_set,
                                     .trace = captured->trace,
                                     .object_class = captured->object_class};
  if (record_for_thread(run, context, captured->tid, alloc->frames, depth, &sample_context, values)) {
    alloc->samples++;
  } else {
    alloc->recording_failures++;
  }
  return CAPTURE_TAKEN;
}

// The weight of the samples lost since the last drain, under its own frame.
static void record_lost_weight(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  if (alloc->lost_weight == 0) return;
  recorder_frame frame = {.frame_id = stacks_lost_allocations_frame_id(), .line = 0};
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_ALLOC_SAMPLES] = (int64_t)alloc->lost_weight};
  recorder_context sample_context = {.state = VM_THREAD_RUNNING, .object_class = ALLOC_CLASS_UNKNOWN};
  thread_context *context = thread_contexts_find_by_tid(run->contexts, alloc->lost_tid);
  if (!record_for_thread(run, context, alloc->lost_tid, &frame, 1, &sample_context, values)) {
    alloc->recording_failures++;
  }
  alloc->lost_weight = 0;
}

void alloc_source_record_captures(sonde_run *run, bool keep_unmet) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL) return;
  if (alloc->tracker != NULL && alloc->running) reset_heap_if_compacted(alloc);
  alloc_drain drain = {run, keep_unmet};
  capture_buffer_drain(alloc->captures, record_alloc_capture, &drain);
  record_lost_weight(run);
  if (alloc->tracker != NULL) heap_tracker_tidy(alloc->tracker);
}

static void record_live_object(const heap_object *object, const recorder_frame *frames, uint32_t depth, void *data) {
  sonde_run *run = data;
  size_t size = rb_obj_memsize_of((VALUE)object->object);
  int64_t values[RECORDER_VALUE_COUNT] = {
      [RECORDER_HEAP_LIVE_SAMPLES] = object->weight,
      [RECORDER_HEAP_LIVE_BYTES] = (int64_t)size * object->weight,
  };
  recorder_context sample_context = {.state = VM_THREAD_RUNNING, .object_class = object->object_class};
  thread_context *context = thread_contexts_find_by_tid(run->contexts, object->tid);
  if (record_for_thread(run, context, object->tid, frames, depth, &sample_context, values)) {
    run->alloc->heap_samples++;
  } else {
    run->alloc->recording_failures++;
  }
}

void alloc_source_record_heap(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  // Once the hooks are off, frees go unseen: the set may name dead objects.
  if (alloc == NULL || alloc->tracker == NULL || !alloc->running) return;
  alloc_source_record_captures(run, false); // every survivor with its stack
  heap_tracker_each(alloc->tracker, record_live_object, run);
}

// ---------------------------------------------------------------------------
// The allocation source.

static sonde_status start_alloc(sonde_run *run, char *error, size_t error_size) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL) return SONDE_OK;
  if (alloc->tracker != NULL) {
    alloc->compactions_seen = compaction_count();
    alloc->freeobj_hook = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_FREEOBJ, on_freeobj_no_alloc, alloc);
    rb_tracepoint_enable(alloc->freeobj_hook);
  }
  // Grows the frame reader's scratch now, so the hook's fallback read never has to.
  uint32_t unused_depth;
  vm_thread_frames(vm_current_thread_handle(), alloc->frames, alloc->max_frames, &unused_depth);
  alloc->newobj_hook = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, on_newobj_no_alloc, alloc);
  rb_tracepoint_enable(alloc->newobj_hook);
  alloc->running = true;
  return SONDE_OK;
}

static void stop_alloc(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL) return;
  alloc->running = false;
  if (!NIL_P(alloc->newobj_hook)) rb_tracepoint_disable(alloc->newobj_hook);
  if (!NIL_P(alloc->freeobj_hook)) rb_tracepoint_disable(alloc->freeobj_hook);
}

static void mark_class_of(const capture *slot, void *unused) {
  if (slot->object_class != 0) rb_gc_mark((VALUE)slot->object_class);
}

static void mark_frame(uint64_t frame_id, void *unused) { stacks_mark(frame_id); }

static void mark_alloc(const sonde_run *run) {
  const alloc_source *alloc = run->alloc;
  if (alloc == NULL) return;
  rb_gc_mark(alloc->newobj_hook);
  rb_gc_mark(alloc->freeobj_hook);
  capture_buffer_each_published(alloc->captures, mark_class_of, NULL);
  capture_buffer_each_published_frame(alloc->captures, mark_frame, NULL);
  if (alloc->tracker != NULL) heap_tracker_each_frame(alloc->tracker, stacks_mark);
}

#define PUT(hash, key, value) rb_hash_aset(hash, ID2SYM(rb_intern(key)), ULL2NUM((unsigned long long)(value)))

static void add_alloc_stats(const sonde_run *run, VALUE stats) {
  const alloc_source *alloc = run->alloc;
  rb_hash_aset(stats, ID2SYM(rb_intern("alloc")), alloc != NULL ? Qtrue : Qfalse);
  rb_hash_aset(stats, ID2SYM(rb_intern("heap")), alloc != NULL && alloc->heap ? Qtrue : Qfalse);
  PUT(stats, "alloc_interval", alloc != NULL ? alloc->interval : 0);
  PUT(stats, "allocations_sampled_over", alloc != NULL ? alloc->allocations : 0);
  PUT(stats, "alloc_samples", alloc != NULL ? alloc->samples : 0);
  PUT(stats, "alloc_merged_samples", alloc != NULL ? alloc->merged_samples : 0);
  PUT(stats, "alloc_dropped_samples",
      alloc != NULL ? alloc->lost_samples + alloc->inconsistent_stacks + alloc->recording_failures : 0);
  bool heap = alloc != NULL && alloc->tracker != NULL;
  PUT(stats, "heap_tracked_objects", heap ? heap_tracker_count(alloc->tracker) : 0);
  PUT(stats, "heap_tracker_capacity", heap ? heap_tracker_capacity(alloc->tracker) : 0);
  PUT(stats, "heap_dropped_objects", heap ? heap_tracker_drops(alloc->tracker) : 0);
  PUT(stats, "heap_compaction_resets", heap ? alloc->compaction_resets : 0);
  PUT(stats, "heap_samples", heap ? alloc->heap_samples : 0);
}

// In a forked child the hooks still run (the child's Process._fork hook
// stops the run), on the one thread left: only the captures other threads
// left half-written are forgotten. (The cached tid has its own atfork
// handler: current_tid.h.)
static void forget_alloc_after_fork(sonde_run *run) {
  if (run->alloc == NULL) return;
  capture_buffer_reset(run->alloc->captures);
  memset(run->alloc->recent, 0, sizeof(run->alloc->recent));
}

const event_source alloc_event_source = {
    .name = "alloc",
    .start = start_alloc,
    .stop = stop_alloc,
    .mark = mark_alloc,
    .add_stats = add_alloc_stats,
    .forget_after_fork = forget_alloc_after_fork,
};
