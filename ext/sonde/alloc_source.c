// alloc_source.c: allocation samples and the live heap (alloc_source.h).
// How and why (listening windows and how their samples are scaled, the
// live heap checked without a FREEOBJ hook): docs/DESIGN.md, "One
// allocation sample".
//
// Contexts. on_newobj_no_alloc runs inside Ruby's object allocation, on the
// allocating thread, with the GVL: it must not allocate a Ruby object (that
// would re-enter the allocator, and maybe the GC), call Ruby, raise or
// malloc. It counts down, and on a sampled allocation reads the thread's
// own stack into a slot of this source's capture buffer, tracks the object
// and triggers the postponed job. A CPU timer's SIGPROF may interrupt it:
// the handler writes the run's capture buffer, never this one, and only
// reads the stack. Everything else runs with the GVL, outside GC.
//
// What it owns: its capture buffer (allocated at start), the NEWOBJ hook
// and the listening windows (each a recorder of its own: samples wait there
// unscaled until the window closes, then go into the run's active recorder
// scaled by the allocations Ruby counted over the weights recorded), the
// heap tracker, and its stats. A tracked object is alive only while its
// slot is live and holds the object id it was given; a GC compaction
// (compact_count changed) drops the tracked set (heap_compaction_resets).
#include "alloc_source.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ruby/debug.h>

#include "capture_buffer.h"
#include "clocks.h"
#include "current_ids.h"
#include "heap_tracker.h"
#include "labels.h"
#include "own_threads.h"
#include "recorder_slots.h"
#include "sample_constants.h"
#include "stacks.h"
#include "stats.h"
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

// Exported by libruby (3.1 to 3.4), declared only in its internal headers:
// ObjectSpace.memsize_of's C function, and the heap page walk under
// ObjectSpace.each_object.
size_t rb_obj_memsize_of(VALUE object);
void rb_objspace_each_objects(int (*callback)(void *start, void *end, size_t stride, void *data), void *data);

// A period closes once its windows heard this many samples' worth of
// allocations (or at a flush or the stop).
#define PERIOD_MIN_SAMPLES 256

// The tracked set is checked when full at most this often.
#define HEAP_CHECK_WHEN_FULL_NS 1000000000

// A listening window's samples (unscaled), the objects of them the tracker
// follows (address and identity), the weights it recorded (once closed)
// and the allocations its period had (allocations_stood_for).
typedef struct {
  recorder *samples;
  struct window_object {
    uint64_t object, identity;
  } *objects;
  size_t object_count, object_capacity;
  uint64_t recorded;
  size_t allocations_stood_for;
} listening_window;

struct alloc_source {
  uint32_t interval;
  uint32_t block;          // one tick in this many is listened to (1: every tick)
  uint32_t block_position; // the next tick's place in its block
  uint32_t listened_place; // the place of the block's listened tick
  bool heap;
  uint32_t max_frames;
  VALUE newobj_hook;
  bool running;   // started: the tracked set is current
  bool listening; // the NEWOBJ hook is on (always, with a duty of 1)
  bool turned_off; // for good, before a Ractor was created (alloc_source_turn_off)
  bool other_ractors; // other Ractors may be running: the heap's slots are not ours to read (alloc_source_set_other_ractors)
  uint64_t heap_checks_skipped; // checks and records of the live heap skipped for them
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
  // Listening windows (none with a duty of 1): the one being filled, and
  // the latest closed one.
  listening_window *filling, *closed;
  listening_window window_pair[2];
  recorder_frame *frames; // max_frames + 1: one sample's stack, in recording and in the hook's fallback
  size_t compactions_seen;
  // Stats.
  uint64_t allocations; // the weights of every sample taken
  uint64_t samples;     // recorded
  uint64_t inconsistent_stacks, recording_failures, compaction_resets, heap_samples;
  uint64_t heap_checks, heap_freed_objects;
  uint64_t drops_at_check;    // the tracker's drops as of the latest check
  int64_t checked_when_full_at; // monotonic ns
  uint64_t merged_samples, lost_samples;
  uint64_t ticks, listened_ticks, windows;
  uint64_t ticks_at_profile_start, listened_at_profile_start; // as of the latest flush (or the start)
  int64_t window_switch_ns; // turning the hook on or off and closing windows, at ticks
  // Listening windows: allocations the hook heard, and both counts as of
  // the previous window's close.
  uint64_t heard, heard_at_close;
  size_t allocated_at_close;
};

static double uniform_draw(alloc_source *alloc) { // (0, 1]
  return ((double)(xorshift_next(&alloc->random_state) >> 11) + 1.0) / 9007199254740992.0;
}

// A geometric gap with mean interval: the number of allocations up to and
// including the next sampled one, as if each were sampled with
// probability 1 / interval.
static uint64_t draw_gap(alloc_source *alloc) {
  if (alloc->interval <= 1) return 1;
  double gap = 1.0 + floor(log(uniform_draw(alloc)) / alloc->log_keep_probability);
  double max_gap = (double)alloc->interval * MAX_GAP_INTERVALS;
  return gap > max_gap ? (uint64_t)max_gap : (uint64_t)gap;
}

alloc_source *alloc_source_new(const run_settings *settings) {
  alloc_source *alloc = calloc(1, sizeof(*alloc));
  if (alloc == NULL) return NULL;
  alloc->interval = settings->alloc_interval;
  double block = floor(1.0 / settings->alloc_duty + 0.5);
  alloc->block = block < 1 ? 1 : block > ALLOC_MAX_BLOCK ? ALLOC_MAX_BLOCK : (uint32_t)block;
  alloc->heap = settings->heap;
  alloc->max_frames = settings->max_frames;
  alloc->newobj_hook = Qnil;
  alloc->random_state = (uint64_t)clocks_monotonic_ns() | 1;
  alloc->log_keep_probability = alloc->interval > 1 ? log(1.0 - 1.0 / alloc->interval) : 0;
  alloc->captures = capture_buffer_new(ALLOC_CAPTURE_SLOTS, settings->max_frames);
  alloc->frames = calloc((size_t)settings->max_frames + 1, sizeof(recorder_frame));
  alloc->overflow.frame_ids = calloc(settings->max_frames, sizeof(uint64_t));
  alloc->overflow.lines = calloc(settings->max_frames, sizeof(int32_t));
  if (alloc->heap) alloc->tracker = heap_tracker_new(ALLOC_HEAP_MAX_OBJECTS, settings->max_frames + 1);
  if (alloc->block > 1) {
    alloc->window_pair[0].samples = recorder_new();
    alloc->window_pair[1].samples = recorder_new();
    alloc->filling = &alloc->window_pair[0];
    alloc->closed = &alloc->window_pair[1];
  }
  if (!alloc->captures || !alloc->frames || !alloc->overflow.frame_ids || !alloc->overflow.lines ||
      (alloc->heap && !alloc->tracker) || (alloc->block > 1 && (!alloc->window_pair[0].samples || !alloc->window_pair[1].samples))) {
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
  for (int i = 0; i < 2; i++) {
    recorder_free(alloc->window_pair[i].samples);
    free(alloc->window_pair[i].objects);
  }
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

// The class of a newly allocated object, or SAMPLE_CLASS_VM_INTERNAL for
// the VM's own objects. Hidden objects have klass 0; an imemo (and a
// parser node) uses its klass word for data of its own (an ifunc's
// pointer, a cref's value), which must never be taken for a class: the GC
// would be asked to mark it (the crash `rake bench:alloc` found on 3.3).
static uint64_t class_of_new_object_no_alloc(VALUE object) {
  switch (RB_BUILTIN_TYPE(object)) {
    case RUBY_T_IMEMO:
    case RUBY_T_NODE:
    case RUBY_T_NONE:
    case RUBY_T_ZOMBIE:
    case RUBY_T_MOVED:
      return SAMPLE_CLASS_VM_INTERNAL;
    default: {
      VALUE klass = RBASIC_CLASS(object);
      return klass != 0 ? klass : SAMPLE_CLASS_VM_INTERNAL;
    }
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
    if (slot->draws < UINT32_MAX) slot->draws++;
    alloc->merged_samples++;
    return;
  }
  alloc->lost_samples++;
  lose_weight_no_alloc(alloc, sample->weight, sample->tid);
}

static void take_sample_no_alloc(alloc_source *alloc, VALUE tracepoint) {
  // The hook is the main Ractor's (TracePoints are per Ractor), checked
  // where a sample is taken only: the buffer and the heap tracker are the
  // main Ractor's, and the check costs nothing on the other allocations.
  if (!vm_on_main_ractor()) {
    alloc->countdown = 1;
    return;
  }
  uint64_t gap = alloc->gap;
  alloc->gap = draw_gap(alloc);
  alloc->countdown = alloc->gap;
  alloc->allocations += gap;
  uint32_t weight = gap > UINT32_MAX ? UINT32_MAX : (uint32_t)gap; // scaled when recorded (listening windows)

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
  slot->draws = 1;
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
  // The VM's own objects (no class) are not followed: they get no object id.
  if (alloc->tracker != NULL && slot->object_class > SAMPLE_CLASS_LAST_SENTINEL) {
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
  alloc->heard++;
  if (--alloc->countdown > 0) return;
  take_sample_no_alloc(alloc, tracepoint);
}

// ---------------------------------------------------------------------------
// Recording, with the GVL.

// Which tracked objects are still alive (see the top of the file).

typedef struct {
  uintptr_t start, end, stride;
} heap_page;

typedef struct {
  heap_page *pages;
  size_t count, capacity;
  bool failed; // out of memory: the list is incomplete
} heap_pages;

static int collect_page(void *start, void *end, size_t stride, void *data) {
  heap_pages *pages = data;
  if (pages->count == pages->capacity) {
    size_t capacity = pages->capacity ? pages->capacity * 2 : 1024;
    heap_page *grown = realloc(pages->pages, capacity * sizeof(heap_page));
    if (grown == NULL) {
      pages->failed = true;
      return 1; // stops the walk
    }
    pages->pages = grown;
    pages->capacity = capacity;
  }
  pages->pages[pages->count++] = (heap_page){(uintptr_t)start, (uintptr_t)end, stride};
  return 0;
}

static int by_start(const void *a, const void *b) {
  uintptr_t x = ((const heap_page *)a)->start, y = ((const heap_page *)b)->start;
  return x < y ? -1 : x > y;
}

// Whether address is the start of a slot of one of the pages.
static bool is_heap_slot(const heap_pages *pages, uintptr_t address) {
  size_t low = 0, high = pages->count;
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    const heap_page *page = &pages->pages[middle];
    if (address < page->start) {
      high = middle;
    } else if (address >= page->end) {
      low = middle + 1;
    } else {
      return page->stride > 0 && (address - page->start) % page->stride == 0;
    }
  }
  return false;
}

static bool still_alive(const heap_object *tracked, void *data) {
  const heap_pages *pages = data;
  if (tracked->identity == 0) return false; // never recorded (its thread was one of Sonde's, or recording failed)
  VALUE object = (VALUE)tracked->object;
  if (!is_heap_slot(pages, (uintptr_t)object) || !vm_object_live(object)) return false;
  // Only an object that has an id is asked for it: a lookup, nothing allocated.
  if (!(RBASIC(object)->flags & RUBY_FL_SEEN_OBJ_ID)) return false;
  return (uint64_t)rb_obj_id(object) == tracked->identity;
}

// With the GVL, outside GC, every sample recorded (none pending).
static void check_heap(alloc_source *alloc) {
  if (alloc->other_ractors) {
    alloc->heap_checks_skipped++;
    return;
  }
  heap_pages pages = {0};
  rb_objspace_each_objects(collect_page, &pages);
  if (!pages.failed) {
    qsort(pages.pages, pages.count, sizeof(heap_page), by_start);
    alloc->heap_freed_objects += heap_tracker_keep_if(alloc->tracker, still_alive, &pages);
    alloc->heap_checks++;
    heap_tracker_tidy(alloc->tracker);
  }
  free(pages.pages);
  alloc->drops_at_check = heap_tracker_drops(alloc->tracker);
}

// The set filled up since the last check: the dead may be taking the room.
static void check_heap_if_full(alloc_source *alloc) {
  if (heap_tracker_drops(alloc->tracker) == alloc->drops_at_check) return;
  int64_t now = clocks_monotonic_ns();
  if (alloc->checked_when_full_at != 0 && now - alloc->checked_when_full_at < HEAP_CHECK_WHEN_FULL_NS) return;
  alloc->checked_when_full_at = now;
  check_heap(alloc);
}

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

static size_t allocated_objects(void) {
  static VALUE key = Qnil;
  if (NIL_P(key)) key = ID2SYM(rb_intern("total_allocated_objects"));
  return rb_gc_stat(key);
}

typedef struct {
  sonde_run *run;
  bool keep_unmet;
} alloc_drain;

static VALUE object_id_protected(VALUE object) { return rb_obj_id(object); }

// The object's id, as the heap check's identity: 0 when none could be had
// (out of memory; an id too large for a Fixnum, which Ruby never reaches).
// The object is the one sampled: its capture kept it marked (mark_alloc).
static uint64_t identity_of(uint64_t object) {
  int raised = 0;
  VALUE id = rb_protect(object_id_protected, (VALUE)object, &raised);
  if (raised) {
    rb_set_errinfo(Qnil);
    return 0;
  }
  return RB_FIXNUM_P(id) ? (uint64_t)id : 0;
}

// Where allocation samples go now: the open window's recorder, or the run's.
static recorder *samples_recorder(const sonde_run *run) {
  return run->alloc->filling != NULL ? run->alloc->filling->samples : recorder_slots_active(run->slots);
}

static bool record_for_thread(recorder *rec, sonde_run *run, thread_context *context, int64_t tid,
                              const recorder_frame *frames, uint32_t depth, recorder_context *sample_context,
                              const int64_t *values) {
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

// A tracked object recorded in the open window, for its weight to be
// scaled when the window closes. Out of memory, it keeps its unscaled
// weight (counted).
static void remember_window_object(alloc_source *alloc, uint64_t object, uint64_t identity) {
  listening_window *window = alloc->filling;
  if (window->object_count == window->object_capacity) {
    size_t capacity = window->object_capacity ? window->object_capacity * 2 : 256;
    struct window_object *grown = realloc(window->objects, capacity * sizeof(*grown));
    if (grown == NULL) {
      alloc->recording_failures++;
      return;
    }
    window->objects = grown;
    window->object_capacity = capacity;
  }
  window->objects[window->object_count++] = (struct window_object){object, identity};
}

static capture_verdict record_alloc_capture(const capture *captured, void *data) {
  alloc_drain *drain = data;
  sonde_run *run = drain->run;
  alloc_source *alloc = run->alloc;
  thread_context *context = thread_contexts_find_by_tid(run->contexts, captured->tid);
  // Sonde's own threads (the flusher, exporters) are not profiled. No pass
  // meets them, so they have no context: found by tid (an exporter's
  // allocations, decoding and encoding profiles, read as a "thread <tid>"
  // of the application's).
  if (context == NULL ? own_threads_has_tid(run->own, captured->tid)
                      : own_threads_contains(run->own, context->thread)) {
    return CAPTURE_TAKEN;
  }
  // Nor is a muted thread (a live capture's own request).
  if (context != NULL && own_threads_contains(run->muted, context->thread)) return CAPTURE_TAKEN;
  if (context == NULL && drain->keep_unmet) return CAPTURE_KEPT;
  // Between passes a new thread may have named itself: its samples say so
  // (as CPU samples do; passes are rare where the GVL holder never reaches
  // one, 3.1 with YJIT).
  if (context != NULL && drain->keep_unmet) thread_contexts_refresh_name_now(context);
  uint32_t depth = stacks_from_capture(captured, alloc->frames, alloc->max_frames);
  uint32_t weight = captured->weight;
  if (alloc->tracker != NULL && captured->object_class > SAMPLE_CLASS_LAST_SENTINEL) {
    uint64_t identity = identity_of(captured->object);
    if (identity == 0 || heap_tracker_set_stack(alloc->tracker, captured->object, captured->sequence, weight, identity,
                                                alloc->frames, depth) != 0) {
      alloc->recording_failures++;
    } else if (alloc->filling != NULL) {
      remember_window_object(alloc, captured->object, identity);
    }
  }
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_ALLOC_SAMPLES] = weight,
                                          [RECORDER_ALLOC_SAMPLES_UNSCALED] = captured->draws};
  recorder_context sample_context = {.state = VM_THREAD_RUNNING,
                                     .label_set = captured->label_set,
                                     .trace = captured->trace,
                                     .object_class = captured->object_class};
  if (record_for_thread(samples_recorder(run), run, context, captured->tid, alloc->frames, depth, &sample_context,
                        values)) {
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
  recorder_context sample_context = {.state = VM_THREAD_RUNNING, .object_class = SAMPLE_CLASS_UNKNOWN};
  thread_context *context = thread_contexts_find_by_tid(run->contexts, alloc->lost_tid);
  if (!record_for_thread(samples_recorder(run), run, context, alloc->lost_tid, &frame, 1, &sample_context, values)) {
    alloc->recording_failures++;
  }
  alloc->lost_weight = 0;
}

static void drain_captures(sonde_run *run, bool keep_unmet) {
  alloc_source *alloc = run->alloc;
  if (alloc->tracker != NULL && alloc->running) reset_heap_if_compacted(alloc);
  alloc_drain drain = {run, keep_unmet};
  capture_buffer_drain(alloc->captures, record_alloc_capture, &drain);
  record_lost_weight(run);
  if (alloc->tracker == NULL) return;
  heap_tracker_tidy(alloc->tracker);
  // Only once every sample is recorded: a pending one has no identity yet.
  if (!keep_unmet && alloc->running) check_heap_if_full(alloc);
}

void alloc_source_record_captures(sonde_run *run, bool keep_unmet) {
  if (run->alloc == NULL) return;
  drain_captures(run, keep_unmet);
}

static int64_t scaled_value(int64_t value, double scale) {
  return value == 0 ? 0 : (int64_t)floor((double)value * scale + 0.5);
}

// A window's samples into the run's recorder, each value times scale, and
// its objects' weights times object_scale. Its samples' unscaled counts
// go with them only the first time they are added (first_time): a closed
// window pooled into a later period lends that period its mix, not
// samples of its own.
static void add_window_scaled(sonde_run *run, const listening_window *window, double scale, double object_scale,
                              bool first_time) {
  alloc_source *alloc = run->alloc;
  recorder *rec = recorder_slots_active(run->slots);
  size_t count = recorder_sample_count(window->samples);
  for (size_t i = 0; i < count; i++) {
    recorder_sample sample = recorder_sample_at(window->samples, i);
    uint32_t depth = sample.depth <= alloc->max_frames + 1 ? sample.depth : alloc->max_frames + 1;
    for (uint32_t d = 0; d < depth; d++) {
      alloc->frames[d] = recorder_location(window->samples, sample.location_indexes[d]);
    }
    recorder_thread thread = recorder_thread_at(window->samples, sample.thread_index);
    recorder_context context = {.state = sample.state,
                                .label_set = sample.label_set,
                                .trace = sample.trace,
                                .object_class = sample.object_class};
    int64_t values[RECORDER_VALUE_COUNT];
    for (int v = 0; v < RECORDER_VALUE_COUNT; v++) values[v] = scaled_value(sample.values[v], scale);
    values[RECORDER_ALLOC_SAMPLES_UNSCALED] = first_time ? sample.values[RECORDER_ALLOC_SAMPLES_UNSCALED] : 0;
    uint32_t stack_id;
    if (recorder_intern_stack(rec, alloc->frames, depth, &stack_id) != 0 ||
        recorder_intern_thread(rec, thread.thread_id, thread.name, &context.thread_index) != 0 ||
        recorder_add(rec, stack_id, &context, values) != 0) {
      alloc->recording_failures++;
    }
  }
  for (size_t i = 0; i < window->object_count; i++) {
    heap_tracker_scale_weight(alloc->tracker, window->objects[i].object, window->objects[i].identity, object_scale);
  }
}

// The open window's samples into the run's recorder, scaled to stand for
// the allocations since the latest close; it becomes the closed window.
static void close_period(sonde_run *run, int64_t recorded, size_t since_close) {
  alloc_source *alloc = run->alloc;
  listening_window *closed = alloc->closed;
  double scale = since_close > (size_t)recorded ? (double)since_close / (double)recorded : 1;
  add_window_scaled(run, alloc->filling, scale, scale, true);
  alloc->filling->recorded = (uint64_t)recorded;
  alloc->filling->allocations_stood_for = since_close > (size_t)recorded ? since_close : (size_t)recorded;
  alloc->closed = alloc->filling;
  alloc->filling = closed;
  recorder_clear(closed->samples);
  closed->object_count = 0;
}

// At the end of a profile, a period its windows heard too little of (none,
// or one a GC pause filled, or opened just before the flush) is stood for
// by its samples pooled with the latest closed window's: each heard
// allocation counts for itself, and the ones not heard are shared out in
// the pool's mix, so that a lone small window never makes a few samples
// stand for a whole period. The closed window stays the closed one; the
// small one's samples are spent.
static void pool_with_closed(sonde_run *run, int64_t recorded, size_t since_close) {
  alloc_source *alloc = run->alloc;
  listening_window *closed = alloc->closed;
  size_t unheard = since_close > (size_t)recorded ? since_close - (size_t)recorded : 0;
  double share = (double)unheard / (double)((uint64_t)recorded + closed->recorded);
  if (recorded > 0) add_window_scaled(run, alloc->filling, 1 + share, 1 + share, true);
  // The closed window's objects weigh their recorded weight times
  // allocations_stood_for / recorded; they now stand for share more each.
  double stood_for = (double)closed->allocations_stood_for + share * (double)closed->recorded;
  add_window_scaled(run, closed, share, stood_for / (double)closed->allocations_stood_for, false);
  closed->allocations_stood_for = (size_t)(stood_for + 0.5);
  recorder_clear(alloc->filling->samples);
  alloc->filling->object_count = 0;
}

// end_of_profile: a flush or the stop, where the period since the latest
// close ends whatever its windows heard (see pool_with_closed).
static void close_window(sonde_run *run, bool end_of_profile) {
  alloc_source *alloc = run->alloc;
  drain_captures(run, false);
  if (alloc->filling == NULL) return;
  uint64_t heard = alloc->heard - alloc->heard_at_close;
  bool enough = heard >= (uint64_t)PERIOD_MIN_SAMPLES * alloc->interval;
  if (!end_of_profile && !enough) return;
  size_t allocated = allocated_objects();
  size_t since_close = allocated > alloc->allocated_at_close ? allocated - alloc->allocated_at_close : 0;
  // The scale is taken over the weights recorded, not the allocations
  // heard: the two differ by the gap a window's first sample carries over
  // from the previous one, and whatever they are, the scaled weights then
  // add up to Ruby's count exactly.
  int64_t recorded = recorder_total(alloc->filling->samples, RECORDER_ALLOC_SAMPLES);
  if (!enough && alloc->closed->recorded > 0) {
    if (since_close == 0) return;
    pool_with_closed(run, recorded, since_close);
  } else if (recorded > 0) {
    close_period(run, recorded, since_close);
  } else {
    // Nothing recorded since the last close, and no window to stand for
    // it: this period's allocations are left to the next window.
    return;
  }
  alloc->heard_at_close = alloc->heard;
  alloc->allocated_at_close = allocated;
}

void alloc_source_close_window(sonde_run *run) {
  if (run->alloc != NULL) close_window(run, true);
}

bool alloc_source_end_profile(sonde_run *run, bool has_samples, char *note, size_t size) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL) return false;
  uint64_t ticks = alloc->ticks - alloc->ticks_at_profile_start;
  bool unheard = alloc->block > 1 && alloc->listened_ticks == alloc->listened_at_profile_start;
  alloc->ticks_at_profile_start = alloc->ticks;
  alloc->listened_at_profile_start = alloc->listened_ticks;
  if (!unheard) return false;
  snprintf(note, size,
           "sonde: allocations: no tick of this profile was listened to (alloc_duty %.2g listens to one tick in %u, "
           "drawn at random; this profile spans %llu tick%s), so %s; alloc_duty 1 (SONDE_ALLOC_DUTY=1) listens to "
           "every tick",
           1.0 / alloc->block, alloc->block, (unsigned long long)ticks, ticks == 1 ? "" : "s",
           has_samples ? "its allocation samples are an earlier profile's mix, scaled to this profile's allocations"
                       : "it holds no allocation samples: its allocation counts are unknown, not zero");
  return true;
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
  if (record_for_thread(recorder_slots_active(run->slots), run, context, object->tid, frames, depth, &sample_context,
                        values)) {
    run->alloc->heap_samples++;
  } else {
    run->alloc->recording_failures++;
  }
}

void alloc_source_record_heap(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  // Once stopped, a compaction would go unseen: the set may name other slots.
  if (alloc == NULL || alloc->tracker == NULL || !alloc->running) return;
  alloc_source_close_window(run); // every survivor with its stack
  reset_heap_if_compacted(alloc);
  if (alloc->other_ractors) {
    alloc->heap_checks_skipped++;
    return;
  }
  check_heap(alloc);
  heap_tracker_each(alloc->tracker, record_live_object, run);
}

// ---------------------------------------------------------------------------
// The allocation source.

// Whether the coming tick is listened to: one per block, at a place drawn
// afresh for each block.
static bool next_tick_listened(alloc_source *alloc) {
  if (alloc->block <= 1) return true;
  if (alloc->block_position == 0) alloc->listened_place = (uint32_t)(xorshift_next(&alloc->random_state) % alloc->block);
  bool listened = alloc->block_position == alloc->listened_place;
  alloc->block_position = (alloc->block_position + 1) % alloc->block;
  return listened;
}

static sonde_status start_alloc(sonde_run *run, char *error, size_t error_size) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL) return SONDE_OK;
  if (alloc->tracker != NULL) alloc->compactions_seen = compaction_count();
  // Grows the frame reader's scratch now, so the hook's fallback read never has to.
  uint32_t unused_depth;
  vm_thread_frames(vm_current_thread_handle(), alloc->frames, alloc->max_frames, &unused_depth);
  alloc->newobj_hook = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, on_newobj_no_alloc, alloc);
  alloc->allocated_at_close = allocated_objects();
  // The first tick is drawn like every other (listening windows, above),
  // and counted like every other: a run that starts listening has heard
  // one tick more than its later ticks say.
  alloc->listening = next_tick_listened(alloc);
  if (alloc->block > 1) {
    alloc->ticks++;
    if (alloc->listening) alloc->listened_ticks++;
  }
  if (alloc->listening) {
    rb_tracepoint_enable(alloc->newobj_hook);
    alloc->windows++;
  }
  alloc->running = true;
  return SONDE_OK;
}

static VALUE switch_listening_protected(VALUE arg) {
  alloc_source *alloc = (alloc_source *)arg;
  if (alloc->listening) {
    rb_tracepoint_disable(alloc->newobj_hook);
  } else {
    rb_tracepoint_enable(alloc->newobj_hook);
    alloc->windows++;
  }
  alloc->listening = !alloc->listening;
  return Qnil;
}

void alloc_source_after_tick(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL || !alloc->running || alloc->block <= 1 || alloc->turned_off) return;
  alloc->ticks++;
  bool listen = next_tick_listened(alloc);
  if (listen) alloc->listened_ticks++;
  if (listen == alloc->listening) return;
  int64_t started = clocks_monotonic_ns();
  // Turning a hook on allocates (Ruby's hook list): an out-of-memory error
  // here leaves the window as it was, and the application unharmed.
  int raised = 0;
  rb_protect(switch_listening_protected, (VALUE)alloc, &raised);
  if (raised) rb_set_errinfo(Qnil);
  if (!alloc->listening) close_window(run, false);
  // What windows cost beyond the allocations heard in them (which pay what
  // they pay with the hook on all the time): bench/alloc_in_process.rb
  // adds the two to estimate the cost at a duty.
  alloc->window_switch_ns += clocks_monotonic_ns() - started;
}

// Other Ractors allocate and sweep the same heap in parallel (each with its
// own GVL): a tracked object's slot can be freed and refilled while a check
// reads it (rb_obj_memsize_of on a half-made object is a [BUG]). So the
// live heap is neither checked nor recorded while they may run; the
// tracked objects wait for a flush or the stop that finds them gone.
void alloc_source_set_other_ractors(sonde_run *run, bool running) {
  if (run->alloc != NULL) run->alloc->other_ractors = running;
}

bool alloc_source_turn_off(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL || !alloc->running || alloc->turned_off) return false;
  alloc->turned_off = true;
  if (alloc->listening) {
    rb_tracepoint_disable(alloc->newobj_hook);
    alloc->listening = false;
  }
  // What was heard so far stays in the profile, scaled as at a flush.
  close_window(run, true);
  return true;
}

static void stop_alloc(sonde_run *run) {
  alloc_source *alloc = run->alloc;
  if (alloc == NULL) return;
  alloc->running = false;
  alloc->listening = false;
  if (!NIL_P(alloc->newobj_hook)) rb_tracepoint_disable(alloc->newobj_hook);
}

static void mark_class_of(const capture *slot, void *unused) {
  if (slot->object_class > SAMPLE_CLASS_LAST_SENTINEL) rb_gc_mark((VALUE)slot->object_class);
}

// A sample waiting to be recorded keeps its object alive, so that the id
// it is then given is that object's (the top of the file). Only tracked
// ones (those with a class): a slot merged into or lost was never tracked,
// and its object is not in the slot.
static void mark_object_of(const capture *slot, void *unused) {
  if (slot->object_class > SAMPLE_CLASS_LAST_SENTINEL) rb_gc_mark((VALUE)slot->object);
}

static void mark_frame(uint64_t frame_id, void *unused) { stacks_mark(frame_id); }

static void mark_recorded_class(uint64_t object_class) {
  if (object_class > SAMPLE_CLASS_LAST_SENTINEL) rb_gc_mark((VALUE)object_class);
}

static void mark_alloc(const sonde_run *run) {
  const alloc_source *alloc = run->alloc;
  if (alloc == NULL) return;
  rb_gc_mark(alloc->newobj_hook);
  capture_buffer_each_published(alloc->captures, mark_class_of, NULL);
  if (alloc->tracker != NULL) capture_buffer_each_published(alloc->captures, mark_object_of, NULL);
  capture_buffer_each_published_frame(alloc->captures, mark_frame, NULL);
  if (alloc->tracker != NULL) heap_tracker_each_frame(alloc->tracker, stacks_mark);
  for (int w = 0; w < 2 && alloc->filling != NULL; w++) {
    const recorder *samples = alloc->window_pair[w].samples;
    size_t locations = recorder_location_count(samples);
    for (size_t i = 0; i < locations; i++) stacks_mark(recorder_location(samples, i).frame_id);
    recorder_each_object_class(samples, mark_recorded_class);
  }
}

static void add_alloc_stats(const sonde_run *run, VALUE stats) {
  const alloc_source *alloc = run->alloc;
  stats_put_flag(stats, "alloc", alloc != NULL);
  stats_put_flag(stats, "heap", alloc != NULL && alloc->heap);
  stats_put_flag(stats, "alloc_turned_off", alloc != NULL && alloc->turned_off);
  stats_put_count(stats, "alloc_interval", alloc != NULL ? alloc->interval : 0);
  stats_put_number(stats, "alloc_duty", alloc != NULL ? 1.0 / alloc->block : 0.0);
  stats_put_count(stats, "alloc_windows", alloc != NULL ? alloc->windows : 0);
  stats_put_count(stats, "alloc_ticks", alloc != NULL ? alloc->ticks : 0);
  stats_put_count(stats, "alloc_listened_ticks", alloc != NULL ? alloc->listened_ticks : 0);
  stats_put_count(stats, "allocations_sampled_over", alloc != NULL ? alloc->allocations : 0);
  stats_put_count(stats, "allocations_heard", alloc != NULL ? alloc->heard : 0);
  stats_put_number(stats, "alloc_window_switch_seconds", alloc != NULL ? (double)alloc->window_switch_ns / 1e9 : 0.0);
  stats_put_count(stats, "alloc_samples", alloc != NULL ? alloc->samples : 0);
  stats_put_count(stats, "alloc_merged_samples", alloc != NULL ? alloc->merged_samples : 0);
  stats_put_count(stats, "alloc_dropped_samples",
                  alloc != NULL ? alloc->lost_samples + alloc->inconsistent_stacks + alloc->recording_failures : 0);
  bool heap = alloc != NULL && alloc->tracker != NULL;
  stats_put_count(stats, "heap_tracked_objects", heap ? heap_tracker_count(alloc->tracker) : 0);
  stats_put_count(stats, "heap_tracker_capacity", heap ? heap_tracker_capacity(alloc->tracker) : 0);
  stats_put_count(stats, "heap_dropped_objects", heap ? heap_tracker_drops(alloc->tracker) : 0);
  stats_put_count(stats, "heap_compaction_resets", heap ? alloc->compaction_resets : 0);
  stats_put_count(stats, "heap_samples", heap ? alloc->heap_samples : 0);
  stats_put_count(stats, "heap_checks", heap ? alloc->heap_checks : 0);
  stats_put_count(stats, "heap_freed_objects", heap ? alloc->heap_freed_objects : 0);
  stats_put_count(stats, "heap_checks_skipped", heap ? alloc->heap_checks_skipped : 0);
}

// In a forked child the hooks still run (the child's Process._fork hook
// stops the run), on the one thread left: only the captures other threads
// left half-written are forgotten. (The cached tid has its own atfork
// handler: current_ids.h.)
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
