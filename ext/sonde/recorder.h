// recorder.h: aggregates samples by (stack, thread, state) so that a profile
// costs memory per distinct stack, not per sample. Pure C: no Ruby, unit-tested
// under AddressSanitizer against a naive reference.
//
// Called from the sampling path (with the GVL, never from a signal handler or
// during GC). It allocates only when it meets a stack, location or thread it
// has not seen; in the steady state recording allocates nothing.
#ifndef SONDE_RECORDER_H
#define SONDE_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timeline_log.h"
#include "trace_context.h"

// Values kept per sample, in this order (the pprof sample types).
enum {
  RECORDER_CPU_TIME_NS,
  RECORDER_CPU_SAMPLES,
  RECORDER_WALL_TIME_NS,
  RECORDER_WALL_SAMPLES,
  RECORDER_GVL_WAIT_NS, // exported only where the VM times GVL waits (Ruby 3.3+)
  // Exported only when the run samples allocations (alloc_source.h):
  RECORDER_ALLOC_SAMPLES,     // objects allocated, estimated (each sample weighs the allocations it stands for)
  RECORDER_ALLOC_SAMPLES_UNSCALED, // the allocation samples those estimates rest on, 1 each (never scaled)
  RECORDER_HEAP_LIVE_SAMPLES, // sampled objects alive at the flush, scaled the same way
  RECORDER_HEAP_LIVE_BYTES,   // the memory those objects hold, scaled the same way
  RECORDER_VALUE_COUNT
};

// One frame: frame_id is opaque to the recorder (the sampler stores a Ruby
// VALUE there, or a synthetic id); line is the line executing in that frame.
typedef struct {
  uint64_t frame_id;
  int32_t line;
} recorder_frame;

// A thread as the recorder knows it: the thread id label and its name.
typedef struct {
  int64_t thread_id;
  const char *name; // NUL-terminated, owned by the recorder
} recorder_thread;

// What a sample is recorded under besides its stack: its thread, its state
// byte, its label set, its trace context and, for allocation and heap
// samples, the allocated object's class. The recorder keys samples on
// (stack, context); state, label_set, trace and object_class are opaque
// numbers to it (0 and all-zero: none). at_ns is not part of the key: it
// is when the sample ended (CLOCK_MONOTONIC), for the timeline (0: no
// moment, the sample is only summed).
typedef struct {
  uint32_t thread_index; // from recorder_intern_thread
  uint8_t state;
  uint32_t label_set;
  trace_context trace;
  uint64_t object_class;
  int64_t at_ns;
} recorder_context;

// One aggregated sample, as read back for export.
typedef struct {
  const uint32_t *location_indexes; // leaf first; index into the location table
  uint32_t depth;
  uint32_t thread_index; // index into the thread table
  uint8_t state;         // opaque to the recorder
  uint32_t label_set;    // opaque to the recorder; 0 when the sample had none
  trace_context trace;   // opaque to the recorder; all zero when the sample had none
  uint64_t object_class; // opaque to the recorder; 0 when the sample had none
  int64_t values[RECORDER_VALUE_COUNT];
} recorder_sample;

typedef struct recorder recorder;

// Returns NULL when out of memory.
recorder *recorder_new(void);
void recorder_free(recorder *rec);

// Forgets every sample, stack, location and thread (and the timeline's
// entries); keeps the allocated capacity so the next period records
// without allocating again.
void recorder_clear(recorder *rec);

// From now on, each recorder_add with a moment (context at_ns != 0) and a
// CPU or wall value also goes into a timeline log of at most capacity
// entries (timeline_log.h): the aggregate stays whole, the log says when.
// Returns 0, or -1 when out of memory (no timeline). Idempotent.
int recorder_enable_timeline(recorder *rec, size_t capacity);

// The timeline log, or NULL when not enabled. Its entries' sample_index
// are recorder_sample_at indexes; valid until the next recorder_clear.
const timeline_log *recorder_timeline(const recorder *rec);

// The latest moment (CLOCK_MONOTONIC ns) a sample was logged at in the
// timeline since the last clear; 0 when none (or no timeline).
int64_t recorder_latest_moment_ns(const recorder *rec);
timeline_log *recorder_timeline_for_testing(recorder *rec);

// Adds values to the sample for this stack (frames leaf first), thread and
// state, creating it if new. Threads are told apart by (thread_id, name): a
// thread renamed mid-profile becomes a second entry. thread_name may be NULL
// (recorded as ""). Returns 0, or -1 when out of memory (nothing recorded).
int recorder_record(recorder *rec, const recorder_frame *frames, uint32_t depth, int64_t thread_id,
                    const char *thread_name, uint8_t state, const int64_t values[RECORDER_VALUE_COUNT]);

// The same in steps, for callers that record one stack or thread many
// times: intern it once, then add samples by id. Ids are valid until the
// next recorder_clear, which changes recorder_generation (never the same
// for two recorders), so a cached id is checked against the generation it
// was handed out in. Each step is all or nothing; a step that fails (-1,
// out of memory, or an id out of range) records nothing, but what earlier
// steps interned stays (a stack no sample refers to, harmless in export).
uint64_t recorder_generation(const recorder *rec);
int recorder_intern_stack(recorder *rec, const recorder_frame *frames, uint32_t depth, uint32_t *stack_id);
int recorder_intern_thread(recorder *rec, int64_t thread_id, const char *thread_name, uint32_t *thread_index);

// What a caller keeps of the last stack it interned for one thread, so that
// the next one looks up only the frames that differ: frames equal (id and
// line) to the hint's, counted from the outermost, take the hint's
// locations. A thread's successive stacks usually differ only in their
// innermost frames, and looking a location up is most of interning a deep
// stack (a cache miss or two per frame). Zero-initialized by the caller;
// trusted only for the generation it was filled in; its arrays grow only
// when a stack is deeper than any before. Freed with recorder_stack_hint_free.
typedef struct {
  uint64_t generation;
  recorder_frame *frames;     // the last stack, leaf first
  uint32_t *location_indexes; // its locations
  uint32_t depth, capacity;
  uint32_t stack_id; // what it was interned as: the same stack again is that id, found by comparing alone
} recorder_stack_hint;

// recorder_intern_stack, with the thread's hint (NULL: none), which it then
// updates to this stack (or empties, when it cannot grow).
int recorder_intern_stack_hinted(recorder *rec, const recorder_frame *frames, uint32_t depth,
                                 recorder_stack_hint *hint, uint32_t *stack_id);
void recorder_stack_hint_free(recorder_stack_hint *hint);
int recorder_add(recorder *rec, uint32_t stack_id, const recorder_context *context,
                 const int64_t values[RECORDER_VALUE_COUNT]);

// Where a caller's last sample of one kind went (a thread's wall sample in
// one state, say), so that the next one with the same key skips the hash
// lookup (a cache miss or two in the index): a thread that waits adds to
// the same sample pass after pass. Trusted only for the generation it was
// filled in and when the sample it names has the very key.
// Zero-initialized by the caller.
typedef struct {
  uint64_t generation;
  uint32_t sample_index_plus_one; // 0: none
} recorder_sample_hint;

// recorder_add, with a hint (NULL: none), which then names the sample added to.
int recorder_add_hinted(recorder *rec, uint32_t stack_id, const recorder_context *context,
                        const int64_t values[RECORDER_VALUE_COUNT], recorder_sample_hint *hint);

// The frames of an interned stack, leaf first, into frames (room for
// capacity); returns the stack's depth (which may exceed capacity: only
// capacity frames are written), or 0 for an unknown id.
uint32_t recorder_stack_frames(const recorder *rec, uint32_t stack_id, recorder_frame *frames, uint32_t capacity);
size_t recorder_stack_count(const recorder *rec);

// Read-back, for export. Indexes run from 0 to count - 1, in the order first
// seen. Pointers stay valid until the next recorder_record or recorder_clear.
size_t recorder_location_count(const recorder *rec);
recorder_frame recorder_location(const recorder *rec, size_t index);
size_t recorder_thread_count(const recorder *rec);
recorder_thread recorder_thread_at(const recorder *rec, size_t index);
size_t recorder_sample_count(const recorder *rec);
recorder_sample recorder_sample_at(const recorder *rec, size_t index);

// Calls visit for the object class of every sample that has one (the GC
// mark phase: read in place, no sample copied).
void recorder_each_object_class(const recorder *rec, void (*visit)(uint64_t object_class));

// Sum of one value over all samples (for stats and tests).
int64_t recorder_total(const recorder *rec, int value_index);

// Tests only: lets `successes` more of this recorder's allocations succeed,
// then makes every later one fail, so a test can reach each out-of-memory
// path. A negative count lifts the limit (the default).
void recorder_fail_allocations_after_for_testing(recorder *rec, long successes);

#endif
