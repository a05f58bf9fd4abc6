// modules: recorder.c timeline_log.c
//
// recorder_test.c: checks the recorder against a naive reference model fed
// the same random samples, then its edge cases: empty and very deep stacks,
// NULL thread names, clearing, and running out of memory at every allocation.
// Pure C, run under AddressSanitizer and UndefinedBehaviorSanitizer.
#include "recorder.h"
#include "test_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Under ASan the sanitizer's malloc hooks count every allocation of the
// process. Elsewhere (a compiler without the header) only the recorder's own
// allocations are checked, through its failure-injection hook.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#endif
#if defined(UNDER_ASAN) && defined(__has_include)
#if __has_include(<sanitizer/allocator_interface.h>)
#include <sanitizer/allocator_interface.h>
#define HAVE_SANITIZER_HOOKS 1
#endif
#endif

// The workload: stacks drawn from a small pool so that most samples repeat
// one already seen, as in a real profile.
#define FRAME_POOL_SIZE 200
#define STACK_POOL_SIZE 400
#define MAX_POOL_DEPTH 60
#define STATE_COUNT 4
#define RANDOM_SAMPLE_COUNT 200000
#define CLEAR_SAMPLE_COUNT 20000
#define OOM_SAMPLE_COUNT 3000
#define MAX_LINE 5000
#define UNIQUE_FRAME_ID_BASE (UINT64_C(1) << 48)
#define MAX_CPU_NS 10000000
#define MAX_WALL_NS 20000000
#define DEEP_STACK_DEPTH 10000
#define ARENA_STACK_COUNT 2000
#define ARENA_STACK_DEPTH 500
#define ARENA_FRAME_IDS 16

// ---------------------------------------------------------------------------
// A seeded PRNG (splitmix64), so a failure reproduces.

static uint64_t rng_state;

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t bound) { return (uint32_t)(rng_next() % bound); }

// ---------------------------------------------------------------------------
// The workload's pools.

typedef struct {
  recorder_frame frames[MAX_POOL_DEPTH];
  uint32_t depth;
} pool_stack;

typedef struct {
  int64_t id;
  const char *name; // may be NULL, which the recorder treats as ""
} pool_thread;

// Thread 3 is renamed mid-profile; thread 4 has no name, sometimes NULL and
// sometimes "" (the same thread); thread 5 shares thread 1's name. The long
// names after them make the thread table and its names grow.
static const pool_thread thread_pool[] = {
    {1, "main"},
    {2, "worker-1"},
    {3, "worker-2"},
    {3, "renamed"},
    {4, NULL},
    {4, ""},
    {5, "main"},
    {6, "a thread with a name long enough to fill the names quickly 6"},
    {7, "a thread with a name long enough to fill the names quickly 7"},
    {8, "a thread with a name long enough to fill the names quickly 8"},
    {9, "a thread with a name long enough to fill the names quickly 9"},
    {10, "a thread with a name long enough to fill the names quickly 10"},
    {11, "a thread with a name long enough to fill the names quickly 11"},
    {12, "a thread with a name long enough to fill the names quickly 12"},
    {13, "a thread with a name long enough to fill the names quickly 13"},
    {14, "a thread with a name long enough to fill the names quickly 14"},
    {15, "a thread with a name long enough to fill the names quickly 15"},
    {16, "a thread with a name long enough to fill the names quickly 16"},
    {17, "a thread with a name long enough to fill the names quickly 17"},
    {18, "a thread with a name long enough to fill the names quickly 18"},
};
#define DISTINCT_POOL_THREADS 19 // thread 3 twice, NULL and "" once
#define THREAD_POOL_SIZE ((uint32_t)(sizeof(thread_pool) / sizeof(thread_pool[0])))
#define RENAMED_BEFORE 2
#define RENAMED_AFTER 3

static pool_stack stack_pool[STACK_POOL_SIZE];

static void make_stack_pool(uint64_t seed) {
  rng_state = seed;
  recorder_frame frames[FRAME_POOL_SIZE];
  for (int i = 0; i < FRAME_POOL_SIZE; i++) {
    frames[i].frame_id = rng_next();
    frames[i].line = (int32_t)rng_below(MAX_LINE) - 1; // -1: no line known
  }
  // Two frames that differ only by line must stay two locations.
  frames[1].frame_id = frames[0].frame_id;
  frames[1].line = frames[0].line + 1;

  for (int s = 0; s < STACK_POOL_SIZE; s++) {
    pool_stack *stack = &stack_pool[s];
    stack->depth = rng_below(MAX_POOL_DEPTH + 1);
    for (uint32_t i = 0; i < stack->depth; i++) stack->frames[i] = frames[rng_below(FRAME_POOL_SIZE)];
    // Half the stacks bring a frame of their own, so new locations keep
    // arriving while the other tables grow, and a failed reservation can
    // meet locations that are new.
    if (stack->depth && s % 2) stack->frames[0] = (recorder_frame){UNIQUE_FRAME_ID_BASE + (uint64_t)s, 1};
  }
  // Duplicates in the pool must merge in the recorder; stack 3 is a prefix of
  // stack 2 and must not.
  stack_pool[1] = stack_pool[0];
  stack_pool[2].depth = MAX_POOL_DEPTH;
  stack_pool[3] = stack_pool[2];
  stack_pool[3].depth = MAX_POOL_DEPTH - 1;
  stack_pool[4].depth = 0;
  stack_pool[5].depth = 0;
}

// ---------------------------------------------------------------------------
// The reference model: arrays and linear search, obviously right.

typedef struct {
  uint32_t stack;  // into stack_pool
  uint32_t thread; // into thread_pool
  uint8_t state;
  int64_t values[RECORDER_VALUE_COUNT];
} workload_sample;

static const char *name_or_empty(const char *name) { return name ? name : ""; }

static bool same_stack(const pool_stack *a, const pool_stack *b) {
  if (a->depth != b->depth) return false;
  for (uint32_t i = 0; i < a->depth; i++)
    if (a->frames[i].frame_id != b->frames[i].frame_id || a->frames[i].line != b->frames[i].line) return false;
  return true;
}

static uint32_t canonical_stack(uint32_t s) {
  for (uint32_t i = 0;; i++)
    if (same_stack(&stack_pool[i], &stack_pool[s])) return i;
}

static uint32_t canonical_thread(uint32_t t) {
  for (uint32_t i = 0;; i++)
    if (thread_pool[i].id == thread_pool[t].id &&
        strcmp(name_or_empty(thread_pool[i].name), name_or_empty(thread_pool[t].name)) == 0)
      return i;
}

typedef struct {
  int64_t sums[STACK_POOL_SIZE][THREAD_POOL_SIZE][STATE_COUNT][RECORDER_VALUE_COUNT];
  uint32_t hits[STACK_POOL_SIZE][THREAD_POOL_SIZE][STATE_COUNT];
  int64_t totals[RECORDER_VALUE_COUNT];
} reference_model;

static void reference_add(reference_model *model, const workload_sample *sample) {
  uint32_t s = canonical_stack(sample->stack), t = canonical_thread(sample->thread);
  model->hits[s][t][sample->state]++;
  for (int v = 0; v < RECORDER_VALUE_COUNT; v++) {
    model->sums[s][t][sample->state][v] += sample->values[v];
    model->totals[v] += sample->values[v];
  }
}

static uint32_t reference_cell_count(const reference_model *model) {
  uint32_t cells = 0;
  for (uint32_t s = 0; s < STACK_POOL_SIZE; s++)
    for (uint32_t t = 0; t < THREAD_POOL_SIZE; t++)
      for (uint32_t st = 0; st < STATE_COUNT; st++) cells += model->hits[s][t][st] > 0;
  return cells;
}

// ---------------------------------------------------------------------------
// The workload.

static workload_sample *make_workload(uint64_t seed, size_t count) {
  workload_sample *samples = calloc(count, sizeof(*samples));
  if (!samples) abort();
  rng_state = seed;
  for (size_t i = 0; i < count; i++) {
    workload_sample *sample = &samples[i];
    sample->stack = rng_below(STACK_POOL_SIZE);
    sample->thread = rng_below(THREAD_POOL_SIZE);
    if (sample->thread == RENAMED_BEFORE || sample->thread == RENAMED_AFTER)
      sample->thread = i < count / 2 ? RENAMED_BEFORE : RENAMED_AFTER;
    sample->state = (uint8_t)rng_below(STATE_COUNT);
    sample->values[RECORDER_CPU_TIME_NS] = rng_below(MAX_CPU_NS);
    sample->values[RECORDER_CPU_SAMPLES] = 1;
    sample->values[RECORDER_WALL_TIME_NS] = rng_below(MAX_WALL_NS);
  }
  return samples;
}

static int record_workload_sample(recorder *rec, const workload_sample *sample) {
  const pool_stack *stack = &stack_pool[sample->stack];
  const pool_thread *thread = &thread_pool[sample->thread];
  return recorder_record(rec, stack->frames, stack->depth, thread->id, thread->name, sample->state, sample->values);
}

// Records every sample, and adds to the model those the recorder accepted.
static int record_workload(recorder *rec, reference_model *model, const workload_sample *samples, size_t count) {
  int failures = 0;
  for (size_t i = 0; i < count; i++) {
    if (record_workload_sample(rec, &samples[i]) == 0)
      reference_add(model, &samples[i]);
    else
      failures++;
  }
  return failures;
}

// ---------------------------------------------------------------------------
// Comparing the recorder's read-back with the model.

static bool locations_are_unique(const recorder *rec) {
  size_t count = recorder_location_count(rec);
  for (size_t i = 0; i < count; i++)
    for (size_t j = i + 1; j < count; j++) {
      recorder_frame a = recorder_location(rec, i), b = recorder_location(rec, j);
      if (a.frame_id == b.frame_id && a.line == b.line) return false;
    }
  return true;
}

static bool threads_are_unique(const recorder *rec) {
  size_t count = recorder_thread_count(rec);
  for (size_t i = 0; i < count; i++)
    for (size_t j = i + 1; j < count; j++) {
      recorder_thread a = recorder_thread_at(rec, i), b = recorder_thread_at(rec, j);
      if (a.thread_id == b.thread_id && strcmp(a.name, b.name) == 0) return false;
    }
  return true;
}

// Rebuilds a sample's stack from the location table; false if it is not
// well-formed.
static bool read_stack(const recorder *rec, const recorder_sample *sample, pool_stack *out) {
  if (sample->depth > MAX_POOL_DEPTH) return false;
  out->depth = sample->depth;
  for (uint32_t i = 0; i < sample->depth; i++) {
    if (sample->location_indexes[i] >= recorder_location_count(rec)) return false;
    out->frames[i] = recorder_location(rec, sample->location_indexes[i]);
  }
  return true;
}

// A failed record must leave nothing behind: every location and thread the
// recorder holds belongs to some sample.
static bool everything_is_referenced(const recorder *rec) {
  size_t location_count = recorder_location_count(rec), thread_count = recorder_thread_count(rec);
  bool *location_used = calloc(location_count + 1, sizeof(bool)), *thread_used = calloc(thread_count + 1, sizeof(bool));
  if (!location_used || !thread_used) abort();
  for (size_t i = 0; i < recorder_sample_count(rec); i++) {
    recorder_sample sample = recorder_sample_at(rec, i);
    if (sample.thread_index < thread_count) thread_used[sample.thread_index] = true;
    for (uint32_t d = 0; d < sample.depth; d++)
      if (sample.location_indexes[d] < location_count) location_used[sample.location_indexes[d]] = true;
  }
  bool all = true;
  for (size_t i = 0; i < location_count; i++) all &= location_used[i];
  for (size_t i = 0; i < thread_count; i++) all &= thread_used[i];
  free(location_used);
  free(thread_used);
  return all;
}

static uint32_t find_pool_stack(const pool_stack *stack) {
  for (uint32_t s = 0; s < STACK_POOL_SIZE; s++)
    if (same_stack(&stack_pool[s], stack)) return canonical_stack(s);
  return UINT32_MAX;
}

static uint32_t find_pool_thread(recorder_thread thread) {
  for (uint32_t t = 0; t < THREAD_POOL_SIZE; t++)
    if (thread_pool[t].id == thread.thread_id && strcmp(name_or_empty(thread_pool[t].name), thread.name) == 0)
      return canonical_thread(t);
  return UINT32_MAX;
}

// Checks that the recorder holds exactly the model's cells with the model's
// sums: each recorder sample matches one cell not matched before, and there
// are as many samples as cells.
static void check_matches_reference(const recorder *rec, const reference_model *model) {
  static bool matched[STACK_POOL_SIZE][THREAD_POOL_SIZE][STATE_COUNT];
  memset(matched, 0, sizeof(matched));
  CHECK_EQ_INT(recorder_sample_count(rec), reference_cell_count(model));
  CHECK(locations_are_unique(rec));
  CHECK(threads_are_unique(rec));

  int mismatches = 0;
  for (size_t i = 0; i < recorder_sample_count(rec); i++) {
    recorder_sample sample = recorder_sample_at(rec, i);
    pool_stack stack;
    if (!read_stack(rec, &sample, &stack) || sample.thread_index >= recorder_thread_count(rec) ||
        sample.state >= STATE_COUNT) {
      mismatches++;
      continue;
    }
    uint32_t s = find_pool_stack(&stack), t = find_pool_thread(recorder_thread_at(rec, sample.thread_index));
    if (s == UINT32_MAX || t == UINT32_MAX || model->hits[s][t][sample.state] == 0 || matched[s][t][sample.state]) {
      mismatches++;
      continue;
    }
    matched[s][t][sample.state] = true;
    if (memcmp(sample.values, model->sums[s][t][sample.state], sizeof(sample.values)) != 0) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  CHECK(everything_is_referenced(rec));
  for (int v = 0; v < RECORDER_VALUE_COUNT; v++) CHECK(recorder_total(rec, v) == model->totals[v]);
}

static reference_model *new_model(void) {
  reference_model *model = calloc(1, sizeof(*model));
  if (!model) abort();
  return model;
}

static recorder *new_recorder(void) {
  recorder *rec = recorder_new();
  if (!rec) abort();
  return rec;
}

// ---------------------------------------------------------------------------
// Counting every malloc of the process, to prove the steady state allocates
// nothing, whatever the recorder calls (not only its own wrappers).

#ifdef HAVE_SANITIZER_HOOKS
static size_t mallocs_seen;

static void count_malloc(const volatile void *pointer, size_t size) {
  (void)pointer;
  (void)size;
  mallocs_seen++;
}

static void ignore_free(const volatile void *pointer) { (void)pointer; }

static void install_malloc_counter(void) { __sanitizer_install_malloc_and_free_hooks(count_malloc, ignore_free); }
#else
static size_t mallocs_seen;
static void install_malloc_counter(void) {}
#endif

// ---------------------------------------------------------------------------
// The tests.

static void test_matches_reference_model(void) {
  make_stack_pool(1);
  workload_sample *samples = make_workload(2, RANDOM_SAMPLE_COUNT);
  reference_model *model = new_model();
  recorder *rec = new_recorder();

  CHECK_EQ_INT(record_workload(rec, model, samples, RANDOM_SAMPLE_COUNT), 0);
  check_matches_reference(rec, model);
  // The workload must really exercise merging and separation.
  CHECK(recorder_sample_count(rec) > 1000);
  CHECK(recorder_sample_count(rec) < RANDOM_SAMPLE_COUNT / 4);
  CHECK_EQ_INT(recorder_thread_count(rec), DISTINCT_POOL_THREADS);
  CHECK(recorder_total(rec, RECORDER_CPU_SAMPLES) == RANDOM_SAMPLE_COUNT);

  recorder_free(rec);
  free(model);
  free(samples);
}

static void test_clear_then_record_new_data(void) {
  make_stack_pool(3);
  workload_sample *first = make_workload(4, CLEAR_SAMPLE_COUNT);
  workload_sample *second = make_workload(5, CLEAR_SAMPLE_COUNT / 2);
  reference_model *model = new_model();
  recorder *rec = new_recorder();

  CHECK_EQ_INT(record_workload(rec, model, first, CLEAR_SAMPLE_COUNT), 0);
  recorder_clear(rec);
  CHECK_EQ_INT(recorder_sample_count(rec), 0);
  CHECK_EQ_INT(recorder_location_count(rec), 0);
  CHECK_EQ_INT(recorder_thread_count(rec), 0);
  CHECK(recorder_total(rec, RECORDER_WALL_TIME_NS) == 0);

  memset(model, 0, sizeof(*model));
  CHECK_EQ_INT(record_workload(rec, model, second, CLEAR_SAMPLE_COUNT / 2), 0);
  check_matches_reference(rec, model);

  recorder_free(rec);
  free(model);
  free(second);
  free(first);
}

// After a clear, recording what was recorded before must find room for
// everything: first with the recorder's own allocations all failing (any one
// would make recorder_record return -1), then with every malloc of the
// process counted.
static void test_steady_state_does_not_allocate(void) {
  make_stack_pool(6);
  workload_sample *samples = make_workload(7, CLEAR_SAMPLE_COUNT);
  reference_model *model = new_model();
  recorder *rec = new_recorder();

  CHECK_EQ_INT(record_workload(rec, model, samples, CLEAR_SAMPLE_COUNT), 0);
  recorder_clear(rec);
  memset(model, 0, sizeof(*model));
  recorder_fail_allocations_after_for_testing(rec, 0);
  CHECK_EQ_INT(record_workload(rec, model, samples, CLEAR_SAMPLE_COUNT), 0);
  check_matches_reference(rec, model);

  recorder_fail_allocations_after_for_testing(rec, -1);
  recorder_clear(rec);
  install_malloc_counter();
  mallocs_seen = 0;
  int failures = 0;
  for (size_t i = 0; i < CLEAR_SAMPLE_COUNT; i++) failures += record_workload_sample(rec, &samples[i]) != 0;
  size_t mallocs = mallocs_seen;
  CHECK_EQ_INT(failures, 0);
  CHECK_EQ_INT(mallocs, 0);
#ifdef HAVE_SANITIZER_HOOKS
  // The counter itself must work, or the check above proves nothing. The
  // volatile store keeps the compiler from eliding the malloc.
  static void *volatile probe;
  probe = malloc(1);
  CHECK_EQ_INT(mallocs_seen, mallocs + 1);
  free(probe);
#endif

  recorder_free(rec);
  free(model);
  free(samples);
}

// Fails the n-th allocation for every n until a run of `record` needs no
// more, checking the recorder after each run with `check`.
typedef int record_fn(recorder *rec, reference_model *model, const workload_sample *samples, size_t count);

static void fail_each_allocation_in_turn(uint64_t seed, record_fn *record,
                                         void (*check)(const recorder *, const reference_model *)) {
  make_stack_pool(seed);
  workload_sample *samples = make_workload(seed + 1, OOM_SAMPLE_COUNT);
  reference_model *model = new_model();
  int runs_with_failures = 0;
  for (long allowed = 0;; allowed++) {
    recorder *rec = new_recorder();
    memset(model, 0, sizeof(*model));
    recorder_fail_allocations_after_for_testing(rec, allowed);
    int failures = record(rec, model, samples, OOM_SAMPLE_COUNT);
    check(rec, model);
    recorder_free(rec);
    if (failures == 0) break;
    runs_with_failures++;
  }
  CHECK(runs_with_failures > 3); // the workload did grow the tables
  free(model);
  free(samples);
}

// Each out-of-memory path must leave the recorder holding exactly the
// samples it accepted.
static void test_out_of_memory_leaves_recorder_consistent(void) {
  fail_each_allocation_in_turn(8, record_workload, check_matches_reference);
}

static void test_empty_stack(void) {
  recorder *rec = new_recorder();
  const int64_t values[RECORDER_VALUE_COUNT] = {10, 1, 20};
  CHECK_EQ_INT(recorder_record(rec, NULL, 0, 1, "main", 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, NULL, 0, 1, "main", 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, NULL, 0, 1, "main", 1, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 2);
  CHECK_EQ_INT(recorder_location_count(rec), 0);
  recorder_sample sample = recorder_sample_at(rec, 0);
  CHECK_EQ_INT(sample.depth, 0);
  CHECK(sample.values[RECORDER_CPU_TIME_NS] == 20 && sample.values[RECORDER_WALL_TIME_NS] == 40);
  recorder_free(rec);
}

static void test_null_thread_name_is_empty(void) {
  recorder *rec = new_recorder();
  const recorder_frame frame = {42, 7};
  const int64_t values[RECORDER_VALUE_COUNT] = {1, 1, 1};
  CHECK_EQ_INT(recorder_record(rec, &frame, 1, 9, NULL, 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, &frame, 1, 9, "", 0, values), 0);
  CHECK_EQ_INT(recorder_thread_count(rec), 1);
  CHECK_EQ_STR(recorder_thread_at(rec, 0).name, "");
  CHECK_EQ_INT(recorder_sample_count(rec), 1);
  recorder_free(rec);
}

static void test_same_stack_in_other_threads_and_states_stays_separate(void) {
  recorder *rec = new_recorder();
  const recorder_frame frames[] = {{1, 10}, {2, 20}, {3, 30}};
  const int64_t values[RECORDER_VALUE_COUNT] = {5, 1, 6};
  CHECK_EQ_INT(recorder_record(rec, frames, 3, 1, "a", 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, frames, 3, 2, "a", 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, frames, 3, 1, "b", 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, frames, 3, 1, "a", 1, values), 0);
  CHECK_EQ_INT(recorder_record(rec, frames, 3, 1, "a", 0, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 4);
  CHECK_EQ_INT(recorder_thread_count(rec), 3);
  CHECK_EQ_INT(recorder_location_count(rec), 3);
  // The four samples share one stack.
  for (size_t i = 1; i < recorder_sample_count(rec); i++)
    CHECK(recorder_sample_at(rec, i).location_indexes == recorder_sample_at(rec, 0).location_indexes);
  CHECK(recorder_sample_at(rec, 0).values[RECORDER_CPU_TIME_NS] == 10);
  CHECK(recorder_total(rec, RECORDER_CPU_SAMPLES) == 5);
  recorder_free(rec);
}

static void test_very_deep_stack(void) {
  recorder_frame *frames = calloc(DEEP_STACK_DEPTH, sizeof(*frames));
  if (!frames) abort();
  for (uint32_t i = 0; i < DEEP_STACK_DEPTH; i++) frames[i] = (recorder_frame){i % 97, (int32_t)i};
  recorder *rec = new_recorder();
  const int64_t values[RECORDER_VALUE_COUNT] = {1, 1, 1};
  CHECK_EQ_INT(recorder_record(rec, frames, DEEP_STACK_DEPTH, 1, "main", 0, values), 0);
  CHECK_EQ_INT(recorder_record(rec, frames, DEEP_STACK_DEPTH, 1, "main", 0, values), 0);
  // One frame fewer is another stack.
  CHECK_EQ_INT(recorder_record(rec, frames, DEEP_STACK_DEPTH - 1, 1, "main", 0, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 2);
  recorder_sample sample = recorder_sample_at(rec, 0);
  CHECK_EQ_INT(sample.depth, DEEP_STACK_DEPTH);
  int wrong = 0;
  for (uint32_t i = 0; i < DEEP_STACK_DEPTH; i++) {
    recorder_frame frame = recorder_location(rec, sample.location_indexes[i]);
    wrong += frame.frame_id != frames[i].frame_id || frame.line != frames[i].line;
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK(sample.values[RECORDER_CPU_SAMPLES] == 2);
  recorder_free(rec);
  free(frames);
}

// Every frame is a distinct location, and locations share a handful of
// frame ids: among a million of them some pairs collide on the recorder's
// 32-bit slot hash, so the equality test itself (not only the hash) decides
// that two frames on different lines are two locations.
static recorder_frame arena_frame(uint32_t stack, uint32_t i) {
  uint32_t k = stack * ARENA_STACK_DEPTH + i;
  return (recorder_frame){k % ARENA_FRAME_IDS, (int32_t)(k / ARENA_FRAME_IDS)};
}

// A million frames in all: the arena, location and stack tables grow many
// times, and every stack must read back intact afterwards.
static void test_arena_growth_to_a_million_frames(void) {
  static recorder_frame frames[ARENA_STACK_DEPTH];
  recorder *rec = new_recorder();
  int failures = 0;
  for (uint32_t s = 0; s < ARENA_STACK_COUNT; s++) {
    for (uint32_t i = 0; i < ARENA_STACK_DEPTH; i++) frames[i] = arena_frame(s, i);
    const int64_t values[RECORDER_VALUE_COUNT] = {s, 1, 2 * (int64_t)s};
    failures += recorder_record(rec, frames, ARENA_STACK_DEPTH, s % 4, "t", 0, values) != 0;
  }
  CHECK_EQ_INT(failures, 0);
  CHECK_EQ_INT(recorder_sample_count(rec), ARENA_STACK_COUNT);
  CHECK_EQ_INT(recorder_location_count(rec), ARENA_STACK_COUNT * ARENA_STACK_DEPTH);
  int wrong = 0;
  for (uint32_t s = 0; s < ARENA_STACK_COUNT; s++) {
    recorder_sample sample = recorder_sample_at(rec, s);
    wrong += sample.depth != ARENA_STACK_DEPTH || sample.values[RECORDER_CPU_TIME_NS] != s;
    for (uint32_t i = 0; i < sample.depth; i++) {
      recorder_frame got = recorder_location(rec, sample.location_indexes[i]), want = arena_frame(s, i);
      wrong += got.frame_id != want.frame_id || got.line != want.line;
    }
  }
  CHECK_EQ_INT(wrong, 0);
  recorder_free(rec);
}

// The same workload recorded in steps (stack and thread interned, samples
// added by id, with ids cached per pool entry as the sampling pass caches
// them per thread) gives exactly what recorder_record gives.
static int record_in_steps_hinted(recorder *rec, reference_model *model, const workload_sample *samples, size_t count,
                                  recorder_sample_hint *hints);

static int record_in_steps(recorder *rec, reference_model *model, const workload_sample *samples, size_t count) {
  return record_in_steps_hinted(rec, model, samples, count, NULL);
}

// hints: one per pool thread (NULL: plain recorder_add).
static int record_in_steps_hinted(recorder *rec, reference_model *model, const workload_sample *samples, size_t count,
                                  recorder_sample_hint *hints) {
  static uint32_t stack_ids[STACK_POOL_SIZE], thread_ids[THREAD_POOL_SIZE];
  static uint64_t stack_generation[STACK_POOL_SIZE], thread_generation[THREAD_POOL_SIZE];
  memset(stack_generation, 0, sizeof(stack_generation));
  memset(thread_generation, 0, sizeof(thread_generation));
  int failures = 0;
  for (size_t i = 0; i < count; i++) {
    const workload_sample *sample = &samples[i];
    uint64_t generation = recorder_generation(rec);
    const pool_stack *stack = &stack_pool[sample->stack];
    const pool_thread *thread = &thread_pool[sample->thread];
    bool ok = true;
    if (stack_generation[sample->stack] != generation) {
      ok = recorder_intern_stack(rec, stack->frames, stack->depth, &stack_ids[sample->stack]) == 0;
      if (ok) stack_generation[sample->stack] = generation;
    }
    if (ok && thread_generation[sample->thread] != generation) {
      ok = recorder_intern_thread(rec, thread->id, thread->name, &thread_ids[sample->thread]) == 0;
      if (ok) thread_generation[sample->thread] = generation;
    }
    recorder_context context = {.thread_index = thread_ids[sample->thread], .state = sample->state};
    ok = ok && recorder_add_hinted(rec, stack_ids[sample->stack], &context, sample->values,
                                   hints ? &hints[sample->thread] : NULL) == 0;
    if (ok) {
      reference_add(model, sample);
    } else {
      failures++;
    }
  }
  return failures;
}

static void test_recording_in_steps_matches_the_reference_model(void) {
  make_stack_pool(11);
  workload_sample *samples = make_workload(12, RANDOM_SAMPLE_COUNT / 4);
  reference_model *model = new_model();
  recorder *rec = new_recorder();
  CHECK_EQ_INT(record_in_steps(rec, model, samples, RANDOM_SAMPLE_COUNT / 4), 0);
  check_matches_reference(rec, model);

  // After a clear the cached ids are void (the generation changed): they
  // are interned again, and the recorder again matches the model.
  uint64_t before = recorder_generation(rec);
  recorder_clear(rec);
  CHECK(recorder_generation(rec) != before);
  memset(model, 0, sizeof(*model));
  CHECK_EQ_INT(record_in_steps(rec, model, samples, RANDOM_SAMPLE_COUNT / 4), 0);
  check_matches_reference(rec, model);

  // Two recorders never share a generation: an id cached for one is never
  // taken for the other's.
  recorder *other = new_recorder();
  CHECK(recorder_generation(other) != recorder_generation(rec));
  recorder_free(other);
  recorder_free(rec);
  free(model);
  free(samples);
}

// A sample hint is taken only when it names a sample with the very key,
// in the recorder and generation it was filled for. Each sample of the
// workload comes twice in a row (the second finds its hint), and each pool
// thread has one hint, which its samples of other stacks and states take
// over in turn; after a clear, and after hints were filled by another
// recorder, the hints are stale. The recorder reads back as the model says.
static void test_sample_hints_add_where_plain_adds(void) {
  make_stack_pool(31);
  enum { DISTINCT = RANDOM_SAMPLE_COUNT / 8 };
  workload_sample *distinct = make_workload(32, DISTINCT);
  workload_sample *samples = malloc(2 * DISTINCT * sizeof(*samples));
  CHECK(samples != NULL);
  for (size_t i = 0; i < DISTINCT; i++) samples[2 * i] = samples[2 * i + 1] = distinct[i];
  recorder_sample_hint hints[THREAD_POOL_SIZE];
  memset(hints, 0, sizeof(hints));
  reference_model *model = new_model();
  recorder *rec = new_recorder(), *other = new_recorder();
  CHECK_EQ_INT(record_in_steps_hinted(rec, model, samples, 2 * DISTINCT, hints), 0);
  check_matches_reference(rec, model);
  // Stale: a clear changed the generation, the indexes name other samples.
  recorder_clear(rec);
  memset(model, 0, sizeof(*model));
  CHECK_EQ_INT(record_in_steps_hinted(rec, model, samples + 1, DISTINCT, hints), 0);
  check_matches_reference(rec, model);
  // Filled by another recorder, then used here.
  reference_model *other_model = new_model();
  CHECK_EQ_INT(record_in_steps_hinted(other, other_model, samples + DISTINCT, DISTINCT, hints), 0);
  CHECK_EQ_INT(record_in_steps_hinted(rec, model, samples + DISTINCT / 2, DISTINCT, hints), 0);
  check_matches_reference(rec, model);
  check_matches_reference(other, other_model);
  recorder_free(rec);
  recorder_free(other);
  free(model);
  free(other_model);
  free(samples);
  free(distinct);
}

static void test_steps_reject_ids_out_of_range(void) {
  recorder *rec = new_recorder();
  const int64_t values[RECORDER_VALUE_COUNT] = {1, 1, 1, 1};
  uint32_t stack, thread;
  recorder_context nothing = {0};
  CHECK_EQ_INT(recorder_add(rec, 0, &nothing, values), -1); // nothing interned yet
  recorder_frame frames[2] = {{.frame_id = 8, .line = 1}, {.frame_id = 16, .line = 2}};
  CHECK_EQ_INT(recorder_intern_stack(rec, frames, 2, &stack), 0);
  CHECK_EQ_INT(recorder_intern_thread(rec, 7, "worker", &thread), 0);
  recorder_context context = {.thread_index = thread};
  recorder_context unknown_thread = {.thread_index = thread + 1};
  CHECK_EQ_INT(recorder_add(rec, stack + 1, &context, values), -1);
  CHECK_EQ_INT(recorder_add(rec, stack, &unknown_thread, values), -1);
  CHECK_EQ_INT(recorder_add(rec, stack, NULL, values), -1);
  CHECK_EQ_INT(recorder_sample_count(rec), 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &context, values), 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &context, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 1);
  CHECK(recorder_total(rec, RECORDER_WALL_SAMPLES) == 2);
  // Interning again finds the same ids.
  uint32_t again;
  CHECK_EQ_INT(recorder_intern_stack(rec, frames, 2, &again), 0);
  CHECK_EQ_INT(again, stack);
  CHECK_EQ_INT(recorder_intern_thread(rec, 7, "worker", &again), 0);
  CHECK_EQ_INT(again, thread);

  recorder_free(rec);
}

// The samples the steps accepted are exactly the model's (a step that
// failed may leave a stack or thread no sample refers to, which export
// ignores).
static void check_samples_match_reference(const recorder *rec, const reference_model *model) {
  CHECK_EQ_INT(recorder_sample_count(rec), reference_cell_count(model));
  for (int v = 0; v < RECORDER_VALUE_COUNT; v++) CHECK(recorder_total(rec, v) == model->totals[v]);
}

static void test_steps_out_of_memory_keep_the_accepted_samples(void) {
  fail_each_allocation_in_turn(13, record_in_steps, check_samples_match_reference);
}

static void test_out_of_range_reads_are_zero(void) {
  recorder *rec = new_recorder();
  CHECK(recorder_location(rec, 3).frame_id == 0);
  CHECK_EQ_STR(recorder_thread_at(rec, 3).name, "");
  CHECK_EQ_INT(recorder_sample_at(rec, 3).depth, 0);
  CHECK(recorder_total(rec, RECORDER_VALUE_COUNT) == 0);
  CHECK(recorder_total(rec, -1) == 0);
  recorder_free(rec);
}

// Label sets split samples like threads and states do: the same stack,
// thread and state under two label sets are two samples; under one, one.
// Recording a labelled sample into a warm recorder allocates nothing.
static void test_label_sets_split_samples_and_record_without_allocating(void) {
  recorder *rec = new_recorder();
  const int64_t values[RECORDER_VALUE_COUNT] = {10, 1, 20, 1};
  recorder_frame frames[2] = {{.frame_id = 8, .line = 1}, {.frame_id = 16, .line = 2}};
  uint32_t stack, thread;
  CHECK_EQ_INT(recorder_intern_stack(rec, frames, 2, &stack), 0);
  CHECK_EQ_INT(recorder_intern_thread(rec, 7, "worker", &thread), 0);
  recorder_context plain = {.thread_index = thread, .state = 1};
  recorder_context acme = {.thread_index = thread, .state = 1, .label_set = 1};
  recorder_context globex = {.thread_index = thread, .state = 1, .label_set = 2};
  CHECK_EQ_INT(recorder_add(rec, stack, &plain, values), 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &acme, values), 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &globex, values), 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &acme, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 3);
  int64_t by_label[3] = {0};
  for (size_t i = 0; i < recorder_sample_count(rec); i++) {
    recorder_sample sample = recorder_sample_at(rec, i);
    CHECK(sample.label_set <= 2);
    CHECK_EQ_INT(sample.thread_index, thread);
    CHECK_EQ_INT(sample.state, 1);
    if (sample.label_set <= 2) by_label[sample.label_set] += sample.values[RECORDER_CPU_TIME_NS];
  }
  CHECK(by_label[0] == 10 && by_label[1] == 20 && by_label[2] == 10);
  // Unlabelled recording (recorder_record) is label set 0, the same sample.
  CHECK_EQ_INT(recorder_record(rec, frames, 2, 7, "worker", 1, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 3);
  // Once every key exists, adding allocates nothing: every allocation fails now.
  recorder_fail_allocations_after_for_testing(rec, 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &globex, values), 0);
  CHECK_EQ_INT(recorder_add(rec, stack, &acme, values), 0);
  CHECK_EQ_INT(recorder_sample_count(rec), 3);
  recorder_free(rec);
}

// Trace contexts split samples as label sets do, each context kept whole
// (a span id in another trace, or under another local root, is another
// sample), and read back as recorded.
static void test_trace_contexts_split_samples(void) {
  recorder *rec = new_recorder();
  const int64_t values[RECORDER_VALUE_COUNT] = {10, 1, 20, 1};
  recorder_frame frames[1] = {{.frame_id = 8, .line = 1}};
  uint32_t stack, thread;
  CHECK_EQ_INT(recorder_intern_stack(rec, frames, 1, &stack), 0);
  CHECK_EQ_INT(recorder_intern_thread(rec, 7, "worker", &thread), 0);
  const trace_context spans[] = {
      {0},
      {.trace_id_high = 1, .trace_id_low = 2, .span_id = 3, .local_root_span_id = 3},
      {.trace_id_high = 1, .trace_id_low = 2, .span_id = 4, .local_root_span_id = 3},
      {.trace_id_high = 1, .trace_id_low = 5, .span_id = 3, .local_root_span_id = 3},
      {.trace_id_high = 1, .trace_id_low = 2, .span_id = 3, .local_root_span_id = 9},
      {.trace_id_high = UINT64_MAX, .trace_id_low = UINT64_MAX, .span_id = UINT64_MAX, .local_root_span_id = 1},
  };
  size_t span_count = sizeof(spans) / sizeof(spans[0]);
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < span_count; i++) {
      recorder_context context = {.thread_index = thread, .state = 1, .label_set = 1, .trace = spans[i]};
      CHECK_EQ_INT(recorder_add(rec, stack, &context, values), 0);
    }
  }
  CHECK_EQ_INT(recorder_sample_count(rec), span_count);
  for (size_t i = 0; i < recorder_sample_count(rec); i++) {
    recorder_sample sample = recorder_sample_at(rec, i);
    CHECK(trace_context_equal(&sample.trace, &spans[i]));
    CHECK(sample.values[RECORDER_CPU_TIME_NS] == 30);
  }
  recorder_free(rec);
}

// Allocation samples are keyed on the object's class too, and interned
// stacks read back frame for frame (the heap tracker's stack store).
static void test_object_classes_split_samples_and_stacks_read_back(void) {
  recorder *rec = new_recorder();
  const int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_ALLOC_SAMPLES] = 1024};
  recorder_frame frames[3] = {{.frame_id = 8, .line = 1}, {.frame_id = 9, .line = 2}, {.frame_id = 10, .line = 3}};
  uint32_t stack, thread;
  CHECK_EQ_INT(recorder_intern_stack(rec, frames, 3, &stack), 0);
  CHECK_EQ_INT(recorder_intern_thread(rec, 7, "main", &thread), 0);
  const uint64_t classes[] = {0, 0x1000, 0x2000, UINT64_MAX};
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < 4; i++) {
      recorder_context context = {.thread_index = thread, .object_class = classes[i]};
      CHECK_EQ_INT(recorder_add(rec, stack, &context, values), 0);
    }
  }
  CHECK_EQ_INT(recorder_sample_count(rec), 4);
  for (size_t i = 0; i < 4; i++) {
    recorder_sample sample = recorder_sample_at(rec, i);
    CHECK_EQ_INT(sample.object_class, classes[i]);
    CHECK_EQ_INT(sample.values[RECORDER_ALLOC_SAMPLES], 2048);
  }
  recorder_frame back[3] = {{0}};
  CHECK_EQ_INT(recorder_stack_count(rec), 1);
  CHECK_EQ_INT(recorder_stack_frames(rec, stack, back, 3), 3);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(back[i].frame_id, frames[i].frame_id);
    CHECK_EQ_INT(back[i].line, frames[i].line);
  }
  // A short buffer gets the leaf frames and the whole depth; an unknown id, nothing.
  recorder_frame leaf[1] = {{0}};
  CHECK_EQ_INT(recorder_stack_frames(rec, stack, leaf, 1), 3);
  CHECK_EQ_INT(leaf[0].frame_id, 8);
  CHECK_EQ_INT(recorder_stack_frames(rec, stack + 1, back, 3), 0);
  recorder_free(rec);
}

// A thread's next stack: its previous one with the innermost frames
// replaced (as a thread returns and calls again), sometimes another stack
// altogether, sometimes the same one again.
static uint32_t next_thread_stack(recorder_frame *stack, uint32_t depth, uint32_t capacity) {
  const pool_stack *other = &stack_pool[rng_below(STACK_POOL_SIZE)];
  uint32_t kept = depth ? rng_below(depth + 1) : 0;
  if (rng_below(8) == 0) kept = 0;
  if (rng_below(8) == 0) return depth;
  // Leaf first: the kept outer frames move to the end.
  recorder_frame outer[2 * MAX_POOL_DEPTH];
  memcpy(outer, stack + (depth - kept), kept * sizeof(*stack));
  uint32_t fresh = other->depth;
  if (fresh + kept > capacity) fresh = capacity - kept;
  memcpy(stack, other->frames, fresh * sizeof(*stack));
  // A frame that differs only by its line from the one it replaces.
  if (fresh && rng_below(4) == 0) stack[fresh - 1].line++;
  memcpy(stack + fresh, outer, kept * sizeof(*stack));
  return fresh + kept;
}

static void check_stack_reads_back(const recorder *rec, uint32_t stack_id, const recorder_frame *frames,
                                   uint32_t depth) {
  recorder_frame back[2 * MAX_POOL_DEPTH];
  CHECK_EQ_INT(recorder_stack_frames(rec, stack_id, back, 2 * MAX_POOL_DEPTH), depth);
  for (uint32_t i = 0; i < depth; i++) {
    CHECK(back[i].frame_id == frames[i].frame_id);
    CHECK_EQ_INT(back[i].line, frames[i].line);
  }
}

// Interning with a thread's hint gives the ids plain interning gives, in
// one recorder and the next generation of it (where the hint is not
// trusted), and in a recorder the hint was not filled for.
static void test_hinted_interning_finds_what_plain_interning_finds(void) {
  make_stack_pool(21);
  rng_state = 22;
  enum { THREADS = 4, STEPS = 20000 };
  recorder *plain = new_recorder(), *hinted = new_recorder(), *elsewhere = new_recorder();
  recorder_stack_hint hints[THREADS] = {{0}};
  recorder_frame stacks[THREADS][2 * MAX_POOL_DEPTH];
  uint32_t depths[THREADS] = {0};
  uint32_t shared_frames = 0;
  for (int step = 0; step < STEPS; step++) {
    int t = (int)rng_below(THREADS);
    uint32_t before = depths[t];
    // A thread's stack now and then as it was (it came back to where it
    // waited): the hint's very stack.
    if (step % 5 != 0 || depths[t] == 0) depths[t] = next_thread_stack(stacks[t], depths[t], 2 * MAX_POOL_DEPTH);
    if (before && depths[t] && hints[t].depth) {
      shared_frames += stacks[t][depths[t] - 1].frame_id == hints[t].frames[hints[t].depth - 1].frame_id;
    }
    if (step == STEPS / 2) {
      recorder_clear(plain);
      recorder_clear(hinted);
    }
    uint32_t expected, got;
    CHECK_EQ_INT(recorder_intern_stack(plain, stacks[t], depths[t], &expected), 0);
    // Now and then into another recorder first: a hint is trusted only
    // by the recorder (and generation) it was filled for.
    if (step % 97 == 0) {
      CHECK_EQ_INT(recorder_intern_stack_hinted(elsewhere, stacks[t], depths[t], &hints[t], &got), 0);
      check_stack_reads_back(elsewhere, got, stacks[t], depths[t]);
    }
    CHECK_EQ_INT(recorder_intern_stack_hinted(hinted, stacks[t], depths[t], &hints[t], &got), 0);
    check_stack_reads_back(hinted, got, stacks[t], depths[t]);
    CHECK_EQ_INT(got, expected);
  }
  CHECK(shared_frames > STEPS / 4); // the hints were of use
  CHECK_EQ_INT(recorder_stack_count(hinted), recorder_stack_count(plain));
  CHECK_EQ_INT(recorder_location_count(hinted), recorder_location_count(plain));
  for (int t = 0; t < THREADS; t++) recorder_stack_hint_free(&hints[t]);
  recorder_free(plain);
  recorder_free(hinted);
  recorder_free(elsewhere);
}

// Out of memory at any allocation, a hinted intern fails whole or interns
// right, and its hint stays one to trust.
static void test_hinted_interning_out_of_memory(void) {
  make_stack_pool(23);
  for (long allowed = 0; allowed < 40; allowed++) {
    rng_state = 24;
    recorder *rec = new_recorder();
    recorder_stack_hint hint = {0};
    recorder_frame stack[2 * MAX_POOL_DEPTH];
    uint32_t depth = 0;
    recorder_fail_allocations_after_for_testing(rec, allowed);
    for (int step = 0; step < 200; step++) {
      depth = next_thread_stack(stack, depth, 2 * MAX_POOL_DEPTH);
      uint32_t id;
      if (recorder_intern_stack_hinted(rec, stack, depth, &hint, &id) == 0) {
        check_stack_reads_back(rec, id, stack, depth);
      }
      CHECK(hint.depth <= hint.capacity);
    }
    recorder_fail_allocations_after_for_testing(rec, -1);
    uint32_t id;
    CHECK_EQ_INT(recorder_intern_stack_hinted(rec, stack, depth, &hint, &id), 0);
    check_stack_reads_back(rec, id, stack, depth);
    recorder_stack_hint_free(&hint);
    recorder_free(rec);
  }
}

// With a timeline, each timed CPU or wall sample is also an entry that
// names its aggregated sample; untimed ones and allocation samples are
// only summed, and the aggregate is the same as without a timeline.
static void test_timeline_logs_timed_samples_beside_the_aggregate(void) {
  recorder *rec = new_recorder();
  recorder *plain = new_recorder();
  CHECK(recorder_timeline(rec) == NULL);
  if (!CHECK_EQ_INT(recorder_enable_timeline(rec, 3), 0)) return;
  CHECK_EQ_INT(recorder_enable_timeline(rec, 3), 0);
  recorder_frame frames[2] = {{.frame_id = 8, .line = 1}, {.frame_id = 16, .line = 2}};
  recorder *both[2] = {rec, plain};
  for (int r = 0; r < 2; r++) {
    uint32_t a, b, thread;
    recorder_intern_stack(both[r], frames, 2, &a);
    recorder_intern_stack(both[r], frames + 1, 1, &b);
    recorder_intern_thread(both[r], 7, "worker", &thread);
    const int64_t cpu[RECORDER_VALUE_COUNT] = {[RECORDER_CPU_TIME_NS] = 10, [RECORDER_CPU_SAMPLES] = 1};
    const int64_t wall[RECORDER_VALUE_COUNT] = {[RECORDER_WALL_TIME_NS] = 20, [RECORDER_WALL_SAMPLES] = 1,
                                                [RECORDER_GVL_WAIT_NS] = 5};
    const int64_t alloc[RECORDER_VALUE_COUNT] = {[RECORDER_ALLOC_SAMPLES] = 3};
    recorder_add(both[r], a, &(recorder_context){.thread_index = thread, .at_ns = 1000}, cpu);
    recorder_add(both[r], b, &(recorder_context){.thread_index = thread, .state = 2, .at_ns = 2000}, wall);
    recorder_add(both[r], a, &(recorder_context){.thread_index = thread}, cpu); // untimed
    recorder_add(both[r], a, &(recorder_context){.thread_index = thread, .at_ns = 2500}, alloc);
    recorder_add(both[r], a, &(recorder_context){.thread_index = thread, .at_ns = 3000}, cpu);
  }
  CHECK(recorder_timeline(plain) == NULL);
  CHECK_EQ_INT(recorder_sample_count(rec), recorder_sample_count(plain));
  for (int v = 0; v < RECORDER_VALUE_COUNT; v++) CHECK_EQ_INT(recorder_total(rec, v), recorder_total(plain, v));
  const timeline_log *log = recorder_timeline(rec);
  if (!CHECK_EQ_INT(timeline_log_count(log), 3)) return;
  timeline_entry first = timeline_log_at(log, 0), second = timeline_log_at(log, 1), third = timeline_log_at(log, 2);
  CHECK_EQ_INT(first.at_ns, 1000);
  CHECK_EQ_INT(first.cpu_ns, 10);
  CHECK_EQ_INT(first.cpu_samples, 1);
  CHECK_EQ_INT(second.at_ns, 2000);
  CHECK_EQ_INT(second.wall_ns, 20);
  CHECK_EQ_INT(second.gvl_wait_ns, 5);
  CHECK_EQ_INT(second.wall_samples, 1);
  CHECK_EQ_INT(recorder_sample_at(rec, second.sample_index).state, 2);
  CHECK_EQ_INT(third.at_ns, 3000);
  CHECK_EQ_INT(third.sample_index, first.sample_index);
  // The latest moment logged (the untimed and allocation-only ones are not).
  CHECK_EQ_INT(recorder_latest_moment_ns(rec), 3000);
  CHECK_EQ_INT(recorder_latest_moment_ns(plain), 0);
  // At its bound (3), the oldest gives way; clear empties it.
  recorder_add(rec, 0, &(recorder_context){.at_ns = 4000}, (const int64_t[RECORDER_VALUE_COUNT]){[0] = 1});
  CHECK_EQ_INT(timeline_log_count(log), 3);
  CHECK_EQ_INT(timeline_log_at(log, 0).at_ns, 2000);
  CHECK_EQ_INT(timeline_log_dropped(log), 1);
  CHECK_EQ_INT(recorder_latest_moment_ns(rec), 4000);
  recorder_clear(rec);
  CHECK_EQ_INT(timeline_log_count(recorder_timeline(rec)), 0);
  CHECK_EQ_INT(recorder_latest_moment_ns(rec), 0);
  recorder_free(rec);
  recorder_free(plain);
}

int main(void) {
  RUN(test_matches_reference_model);
  RUN(test_clear_then_record_new_data);
  RUN(test_steady_state_does_not_allocate);
  RUN(test_out_of_memory_leaves_recorder_consistent);
  RUN(test_empty_stack);
  RUN(test_null_thread_name_is_empty);
  RUN(test_same_stack_in_other_threads_and_states_stays_separate);
  RUN(test_very_deep_stack);
  RUN(test_arena_growth_to_a_million_frames);
  RUN(test_out_of_range_reads_are_zero);
  RUN(test_recording_in_steps_matches_the_reference_model);
  RUN(test_sample_hints_add_where_plain_adds);
  RUN(test_steps_reject_ids_out_of_range);
  RUN(test_steps_out_of_memory_keep_the_accepted_samples);
  RUN(test_label_sets_split_samples_and_record_without_allocating);
  RUN(test_trace_contexts_split_samples);
  RUN(test_object_classes_split_samples_and_stacks_read_back);
  RUN(test_hinted_interning_finds_what_plain_interning_finds);
  RUN(test_hinted_interning_out_of_memory);
  RUN(test_timeline_logs_timed_samples_beside_the_aggregate);
  return test_summary("recorder");
}
