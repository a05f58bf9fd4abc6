// recorder.c: aggregates samples by (stack, thread, state, label set). Pure C, no Ruby.
//
// Runs on the sampling path with the GVL held; never in a signal handler and
// never during GC, so it may allocate, but only when it meets something new.
// Recording a sample whose locations, stack, thread and sample key were all
// seen before in this period performs lookups and additions only: this is the
// path taken hundreds of times a second in a long-running process.
//
// Four tables, each an append-only array (indexes are stable and dense, in
// the order first seen, which is what the pprof encoder wants) plus an
// open-addressing index over it:
//   locations  unique (frame_id, line)
//   stacks     unique sequences of location indexes, stored end to end in
//              one arena of uint32_t
//   threads    unique (thread_id, name); names are copied into one byte
//              arena so that a cleared recorder records them again without
//              allocating
//   samples    unique (stack, thread, state, label set) -> summed values
//
// Failure is all or nothing: recorder_record first finds what is missing,
// then reserves room for all of it, and only then inserts. Reserving only
// grows capacity, which nobody can observe, so running out of memory halfway
// through leaves the recorded data exactly as it was.
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

#include "shared.h"

// Indexes are uint32_t; keeping the entry count well below 2^32 also keeps
// the slot count (entries / load factor, rounded up to a power of two) in a
// uint32_t.
#define MAX_TABLE_ENTRIES (UINT32_C(1) << 30)
#define MAX_ARENA_LENGTH UINT32_MAX

// Open addressing degrades quickly past ~70% full; grow before that.
#define MAX_LOAD_NUMERATOR 7
#define MAX_LOAD_DENOMINATOR 10

// Starting sizes: enough for a short profile of a small program, so most
// profiles grow a handful of times at most.
#define INITIAL_SLOTS 256
#define INITIAL_THREAD_SLOTS 16
#define INITIAL_ARENA_LENGTH 4096
#define INITIAL_NAMES_LENGTH 256

#define NOT_FOUND UINT32_MAX

// Hashing: a multiply-rotate step per 64-bit word (cheap, as in FxHash),
// finished by the splitmix64 finalizer so that the low bits used for the slot
// position depend on every input bit.
#define HASH_SEED UINT64_C(0x9e3779b97f4a7c15)
#define HASH_MULTIPLIER UINT64_C(0x517cc1b727220a95)
#define HASH_ROTATION 26
#define FINAL_MULTIPLIER_1 UINT64_C(0xbf58476d1ce4e5b9)
#define FINAL_MULTIPLIER_2 UINT64_C(0x94d049bb133111eb)

// FNV-1a, for thread names (short, read byte by byte anyway).
#define FNV_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

// An allocation budget of this value means "no limit" (the normal case).
#define UNLIMITED_ALLOCATIONS (-1)

// A slot of an index. entry_plus_one is 0 for an empty slot. The entry's
// hash is kept so that a probe rarely compares entries that cannot match and
// so that growing never has to hash the entries again.
typedef struct {
  uint32_t hash;
  uint32_t entry_plus_one;
} slot;

typedef struct {
  slot *slots;
  uint32_t mask;        // slot count - 1; the slot count is a power of two
  uint32_t entry_limit; // entries the index takes before passing the load factor
} hash_index;

typedef struct {
  recorder_frame *entries;
  uint32_t count;
  uint32_t capacity;
  hash_index index;
} location_table;

typedef struct {
  uint32_t offset; // into the arena
  uint32_t depth;
} stack_entry;

typedef struct {
  stack_entry *entries;
  uint32_t count;
  uint32_t capacity;
  hash_index index;
  uint32_t *arena; // location indexes of every stack, end to end
  uint32_t arena_used;
  uint32_t arena_capacity;
} stack_table;

typedef struct {
  int64_t thread_id;
  uint32_t name_offset; // into the names arena; the name is NUL-terminated there
  uint32_t name_length;
} thread_entry;

typedef struct {
  thread_entry *entries;
  uint32_t count;
  uint32_t capacity;
  hash_index index;
  char *names;
  uint32_t names_used;
  uint32_t names_capacity;
} thread_table;

typedef struct {
  uint32_t stack_index;
  uint32_t thread_index;
  uint8_t state;
  uint32_t label_set;
  trace_context trace;
  uint64_t object_class;
  int64_t values[RECORDER_VALUE_COUNT];
} sample_entry;

typedef struct {
  sample_entry *entries;
  uint32_t count;
  uint32_t capacity;
  hash_index index;
} sample_table;

struct recorder {
  location_table locations;
  stack_table stacks;
  thread_table threads;
  sample_table samples;
  uint32_t *scratch; // the location indexes of the stack being recorded
  uint32_t scratch_capacity;
  uint64_t generation; // bumped by recorder_clear: ids handed out before it are void
  timeline_log *timeline; // NULL unless recorder_enable_timeline
  int64_t latest_moment_ns; // the latest moment logged since the last clear (0: none)
  long allocations_allowed; // UNLIMITED_ALLOCATIONS, or how many may still succeed (tests)
};

// ---------------------------------------------------------------------------
// Allocation. Every allocation goes through here so that tests can make any
// one of them fail and check that the recorder stays consistent.

static bool allocation_permitted(recorder *rec) {
  if (rec->allocations_allowed == UNLIMITED_ALLOCATIONS) return true;
  if (rec->allocations_allowed == 0) return false;
  rec->allocations_allowed--;
  return true;
}

static void *reallocate_array(recorder *rec, void *array, size_t count, size_t element_size) {
  if (count > SIZE_MAX / element_size) return NULL;
  if (!allocation_permitted(rec)) return NULL;
  return realloc(array, count * element_size);
}

static void *allocate_zeroed_array(recorder *rec, size_t count, size_t element_size) {
  if (!allocation_permitted(rec)) return NULL;
  return calloc(count, element_size);
}

// Grows *array (of *capacity elements) so that it holds at least `needed`,
// doubling so that appends cost amortized O(1). On failure *array and
// *capacity are untouched.
static int reserve_array(recorder *rec, void **array, uint32_t *capacity, size_t element_size, uint64_t needed,
                         uint64_t max_capacity) {
  if (needed <= *capacity) return 0;
  if (needed > max_capacity) return -1;
  uint64_t new_capacity = *capacity ? *capacity : 1;
  while (new_capacity < needed) new_capacity *= 2;
  if (new_capacity > max_capacity) new_capacity = max_capacity;

  void *grown = reallocate_array(rec, *array, (size_t)new_capacity, element_size);
  if (!grown) return -1;
  *array = grown;
  *capacity = (uint32_t)new_capacity;
  return 0;
}

// ---------------------------------------------------------------------------
// Hashing.

static uint64_t hash_finish(uint64_t h) {
  h ^= h >> 30;
  h *= FINAL_MULTIPLIER_1;
  h ^= h >> 27;
  h *= FINAL_MULTIPLIER_2;
  h ^= h >> 31;
  return h;
}

static uint64_t hash_step(uint64_t h, uint64_t word) {
  return (((h << HASH_ROTATION) | (h >> (64 - HASH_ROTATION))) ^ word) * HASH_MULTIPLIER;
}

// Slots keep 32 bits of the hash; the slot position uses its low bits.
static uint32_t hash_fold(uint64_t h) {
  h = hash_finish(h);
  return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash_location(uint64_t frame_id, int32_t line) {
  return hash_fold(hash_step(hash_step(HASH_SEED, frame_id), (uint32_t)line));
}

static uint32_t hash_stack(const uint32_t *location_indexes, uint32_t depth) {
  uint64_t h = hash_step(HASH_SEED, depth);
  uint32_t i = 0;
  for (; i + 1 < depth; i += 2) h = hash_step(h, ((uint64_t)location_indexes[i] << 32) | location_indexes[i + 1]);
  if (i < depth) h = hash_step(h, location_indexes[i]);
  return hash_fold(h);
}

static uint32_t hash_thread(int64_t thread_id, const char *name, size_t name_length) {
  uint64_t h = FNV_OFFSET_BASIS;
  for (size_t i = 0; i < name_length; i++) h = (h ^ (unsigned char)name[i]) * FNV_PRIME;
  return hash_fold(hash_step(h, (uint64_t)thread_id));
}

static uint32_t hash_sample(uint32_t stack_index, uint32_t thread_index, uint8_t state, uint32_t label_set,
                            const trace_context *trace, uint64_t object_class) {
  uint64_t h = hash_step(HASH_SEED, ((uint64_t)stack_index << 32) | thread_index);
  h = hash_step(h, ((uint64_t)label_set << 8) | state);
  // Most samples carry no span and no class: steps spared for them.
  if (trace_context_is_set(trace)) h = hash_step(hash_step(h, trace->span_id), trace->local_root_span_id);
  if (object_class != 0) h = hash_step(h, object_class);
  return hash_fold(h);
}

// ---------------------------------------------------------------------------
// The open-addressing index shared by the four tables: linear probing over a
// power-of-two number of slots, entries found by (hash, equality test).

typedef bool entry_matches_fn(const recorder *rec, uint32_t entry, const void *key);

static uint32_t entry_limit_for(uint64_t slot_count) {
  return (uint32_t)(slot_count * MAX_LOAD_NUMERATOR / MAX_LOAD_DENOMINATOR);
}

static int hash_index_init(recorder *rec, hash_index *index, uint32_t slot_count) {
  index->slots = allocate_zeroed_array(rec, slot_count, sizeof(slot));
  if (!index->slots) return -1;
  index->mask = slot_count - 1;
  index->entry_limit = entry_limit_for(slot_count);
  return 0;
}

// Returns the slot holding the matching entry, or the empty slot where it
// belongs. The load factor guarantees an empty slot, so this terminates.
static inline slot *hash_index_probe(const recorder *rec, const hash_index *index, uint32_t hash,
                                     entry_matches_fn *matches, const void *key) {
  for (uint32_t position = hash & index->mask;; position = (position + 1) & index->mask) {
    slot *candidate = &index->slots[position];
    if (candidate->entry_plus_one == 0) return candidate;
    if (candidate->hash == hash && matches(rec, candidate->entry_plus_one - 1, key)) return candidate;
  }
}

static void hash_index_fill(slot *target, uint32_t hash, uint32_t entry) {
  target->hash = hash;
  target->entry_plus_one = entry + 1;
}

// Makes room for `needed` entries in all. Entries never move, only slots are
// rehashed, from the hashes they keep.
static int hash_index_reserve(recorder *rec, hash_index *index, uint64_t needed) {
  if (needed <= index->entry_limit) return 0;
  if (needed > MAX_TABLE_ENTRIES) return -1;
  uint64_t old_count = (uint64_t)index->mask + 1;
  uint64_t new_count = old_count;
  while (entry_limit_for(new_count) < needed) new_count *= 2;

  slot *grown = allocate_zeroed_array(rec, (size_t)new_count, sizeof(slot));
  if (!grown) return -1;
  uint32_t new_mask = (uint32_t)(new_count - 1);
  for (uint64_t i = 0; i < old_count; i++) {
    slot old = index->slots[i];
    if (old.entry_plus_one == 0) continue;
    uint32_t position = old.hash & new_mask;
    while (grown[position].entry_plus_one != 0) position = (position + 1) & new_mask;
    grown[position] = old;
  }
  free(index->slots);
  index->slots = grown;
  index->mask = new_mask;
  index->entry_limit = entry_limit_for(new_count);
  return 0;
}

static void hash_index_clear(hash_index *index) { memset(index->slots, 0, ((size_t)index->mask + 1) * sizeof(slot)); }

// ---------------------------------------------------------------------------
// Locations.

static bool location_matches(const recorder *rec, uint32_t entry, const void *key) {
  const recorder_frame *a = &rec->locations.entries[entry], *b = key;
  return a->frame_id == b->frame_id && a->line == b->line;
}

static slot *location_slot(const recorder *rec, const recorder_frame *frame) {
  return hash_index_probe(rec, &rec->locations.index, hash_location(frame->frame_id, frame->line), location_matches,
                          frame);
}

// Fills indexes[i] with the location of frames[i], or NOT_FOUND; returns how
// many were not found.
static uint32_t find_locations(const recorder *rec, const recorder_frame *frames, uint32_t depth, uint32_t *indexes) {
  uint32_t missing = 0;
  for (uint32_t i = 0; i < depth; i++) {
    slot *found = location_slot(rec, &frames[i]);
    indexes[i] = found->entry_plus_one ? found->entry_plus_one - 1 : NOT_FOUND;
    if (!found->entry_plus_one) missing++;
  }
  return missing;
}

static int reserve_locations(recorder *rec, uint32_t missing) {
  location_table *table = &rec->locations;
  uint64_t needed = (uint64_t)table->count + missing;
  if (reserve_array(rec, (void **)&table->entries, &table->capacity, sizeof(*table->entries), needed,
                    MAX_TABLE_ENTRIES) != 0)
    return -1;
  return hash_index_reserve(rec, &table->index, needed);
}

// Inserts the frames find_locations missed (a frame may repeat within one
// stack, so each is looked up again). Room was reserved: this cannot fail.
static void insert_missing_locations(recorder *rec, const recorder_frame *frames, uint32_t depth, uint32_t *indexes) {
  location_table *table = &rec->locations;
  for (uint32_t i = 0; i < depth; i++) {
    if (indexes[i] != NOT_FOUND) continue;
    slot *target = location_slot(rec, &frames[i]);
    if (!target->entry_plus_one) {
      table->entries[table->count] = frames[i];
      hash_index_fill(target, hash_location(frames[i].frame_id, frames[i].line), table->count++);
    }
    indexes[i] = target->entry_plus_one - 1;
  }
}

// ---------------------------------------------------------------------------
// Stacks.

typedef struct {
  const uint32_t *location_indexes;
  uint32_t depth;
} stack_key;

static bool stack_matches(const recorder *rec, uint32_t entry, const void *key) {
  const stack_entry *stack = &rec->stacks.entries[entry];
  const stack_key *wanted = key;
  return stack->depth == wanted->depth &&
         (wanted->depth == 0 || memcmp(rec->stacks.arena + stack->offset, wanted->location_indexes,
                                       (size_t)wanted->depth * sizeof(uint32_t)) == 0);
}

static slot *stack_slot(const recorder *rec, const stack_key *key, uint32_t hash) {
  return hash_index_probe(rec, &rec->stacks.index, hash, stack_matches, key);
}

static int reserve_stack(recorder *rec, uint32_t depth) {
  stack_table *table = &rec->stacks;
  uint64_t needed = (uint64_t)table->count + 1;
  if (reserve_array(rec, (void **)&table->arena, &table->arena_capacity, sizeof(*table->arena),
                    (uint64_t)table->arena_used + depth, MAX_ARENA_LENGTH) != 0)
    return -1;
  if (reserve_array(rec, (void **)&table->entries, &table->capacity, sizeof(*table->entries), needed,
                    MAX_TABLE_ENTRIES) != 0)
    return -1;
  return hash_index_reserve(rec, &table->index, needed);
}

static uint32_t insert_stack(recorder *rec, slot *target, const stack_key *key, uint32_t hash) {
  stack_table *table = &rec->stacks;
  stack_entry *stack = &table->entries[table->count];
  stack->offset = table->arena_used;
  stack->depth = key->depth;
  if (key->depth) memcpy(table->arena + stack->offset, key->location_indexes, (size_t)key->depth * sizeof(uint32_t));
  table->arena_used += key->depth;
  hash_index_fill(target, hash, table->count);
  return table->count++;
}

// ---------------------------------------------------------------------------
// Threads.

typedef struct {
  int64_t thread_id;
  const char *name;
  size_t name_length;
} thread_key;

static bool thread_matches(const recorder *rec, uint32_t entry, const void *key) {
  const thread_entry *thread = &rec->threads.entries[entry];
  const thread_key *wanted = key;
  return thread->thread_id == wanted->thread_id && thread->name_length == wanted->name_length &&
         memcmp(rec->threads.names + thread->name_offset, wanted->name, wanted->name_length) == 0;
}

static slot *thread_slot(const recorder *rec, const thread_key *key, uint32_t hash) {
  return hash_index_probe(rec, &rec->threads.index, hash, thread_matches, key);
}

static int reserve_thread(recorder *rec, size_t name_length) {
  thread_table *table = &rec->threads;
  uint64_t needed = (uint64_t)table->count + 1;
  if (name_length >= MAX_ARENA_LENGTH) return -1;
  if (reserve_array(rec, (void **)&table->names, &table->names_capacity, 1,
                    (uint64_t)table->names_used + name_length + 1, MAX_ARENA_LENGTH) != 0)
    return -1;
  if (reserve_array(rec, (void **)&table->entries, &table->capacity, sizeof(*table->entries), needed,
                    MAX_TABLE_ENTRIES) != 0)
    return -1;
  return hash_index_reserve(rec, &table->index, needed);
}

static uint32_t insert_thread(recorder *rec, slot *target, const thread_key *key, uint32_t hash) {
  thread_table *table = &rec->threads;
  thread_entry *thread = &table->entries[table->count];
  thread->thread_id = key->thread_id;
  thread->name_offset = table->names_used;
  thread->name_length = (uint32_t)key->name_length;
  memcpy(table->names + table->names_used, key->name, key->name_length);
  table->names[table->names_used + key->name_length] = '\0';
  table->names_used += (uint32_t)key->name_length + 1;
  hash_index_fill(target, hash, table->count);
  return table->count++;
}

// ---------------------------------------------------------------------------
// Samples.

typedef struct {
  uint32_t stack_index;
  uint32_t thread_index;
  uint8_t state;
  uint32_t label_set;
  trace_context trace;
  uint64_t object_class;
} sample_key;

static bool sample_matches(const recorder *rec, uint32_t entry, const void *key) {
  const sample_entry *sample = &rec->samples.entries[entry];
  const sample_key *wanted = key;
  return sample->stack_index == wanted->stack_index && sample->thread_index == wanted->thread_index &&
         sample->state == wanted->state && sample->label_set == wanted->label_set &&
         sample->object_class == wanted->object_class && trace_context_equal(&sample->trace, &wanted->trace);
}

static slot *sample_slot(const recorder *rec, const sample_key *key, uint32_t hash) {
  return hash_index_probe(rec, &rec->samples.index, hash, sample_matches, key);
}

static int reserve_sample(recorder *rec) {
  sample_table *table = &rec->samples;
  uint64_t needed = (uint64_t)table->count + 1;
  if (reserve_array(rec, (void **)&table->entries, &table->capacity, sizeof(*table->entries), needed,
                    MAX_TABLE_ENTRIES) != 0)
    return -1;
  return hash_index_reserve(rec, &table->index, needed);
}

static uint32_t insert_sample(recorder *rec, slot *target, const sample_key *key, uint32_t hash) {
  sample_table *table = &rec->samples;
  sample_entry *sample = &table->entries[table->count];
  sample->stack_index = key->stack_index;
  sample->thread_index = key->thread_index;
  sample->state = key->state;
  sample->label_set = key->label_set;
  sample->trace = key->trace;
  sample->object_class = key->object_class;
  memset(sample->values, 0, sizeof(sample->values));
  hash_index_fill(target, hash, table->count);
  return table->count++;
}

// Wraps around instead of overflowing: signed overflow is undefined, and a
// sum past 2^63 ns (292 years) is not worth a branch on the hot path.
static void add_values(int64_t *sums, const int64_t *values) {
  for (int i = 0; i < RECORDER_VALUE_COUNT; i++) sums[i] = (int64_t)((uint64_t)sums[i] + (uint64_t)values[i]);
}

// ---------------------------------------------------------------------------
// Lifecycle.

// Gives a table its index and room for as many entries as the index takes.
static int init_table(recorder *rec, void **entries, uint32_t *capacity, size_t element_size, hash_index *index,
                      uint32_t slot_count) {
  if (hash_index_init(rec, index, slot_count) != 0) return -1;
  return reserve_array(rec, entries, capacity, element_size, index->entry_limit, MAX_TABLE_ENTRIES);
}

recorder *recorder_new(void) {
  recorder *rec = calloc(1, sizeof(*rec));
  if (!rec) return NULL;
  rec->allocations_allowed = UNLIMITED_ALLOCATIONS;
  // Two recorders never share a generation, so an id cached for one is
  // never taken for an id of the other (see recorder_generation).
  static uint64_t generations;
  rec->generation = shared_add_then_load_relaxed(&generations, UINT64_C(1) << 32);
  // Allocating every table up front means no array is ever NULL: read-back of
  // an empty stack points into a real arena, and probes never meet 0 slots.
  location_table *locations = &rec->locations;
  stack_table *stacks = &rec->stacks;
  thread_table *threads = &rec->threads;
  sample_table *samples = &rec->samples;
  bool ok = init_table(rec, (void **)&locations->entries, &locations->capacity, sizeof(*locations->entries),
                       &locations->index, INITIAL_SLOTS) == 0 &&
            init_table(rec, (void **)&stacks->entries, &stacks->capacity, sizeof(*stacks->entries), &stacks->index,
                       INITIAL_SLOTS) == 0 &&
            reserve_array(rec, (void **)&stacks->arena, &stacks->arena_capacity, sizeof(*stacks->arena),
                          INITIAL_ARENA_LENGTH, MAX_ARENA_LENGTH) == 0 &&
            init_table(rec, (void **)&threads->entries, &threads->capacity, sizeof(*threads->entries), &threads->index,
                       INITIAL_THREAD_SLOTS) == 0 &&
            reserve_array(rec, (void **)&threads->names, &threads->names_capacity, 1, INITIAL_NAMES_LENGTH,
                          MAX_ARENA_LENGTH) == 0 &&
            init_table(rec, (void **)&samples->entries, &samples->capacity, sizeof(*samples->entries), &samples->index,
                       INITIAL_SLOTS) == 0;
  if (!ok) {
    recorder_free(rec);
    return NULL;
  }
  return rec;
}

void recorder_free(recorder *rec) {
  if (!rec) return;
  free(rec->locations.entries);
  free(rec->locations.index.slots);
  free(rec->stacks.entries);
  free(rec->stacks.index.slots);
  free(rec->stacks.arena);
  free(rec->threads.entries);
  free(rec->threads.index.slots);
  free(rec->threads.names);
  free(rec->samples.entries);
  free(rec->samples.index.slots);
  free(rec->scratch);
  timeline_log_free(rec->timeline);
  free(rec);
}

void recorder_clear(recorder *rec) {
  rec->generation++;
  rec->locations.count = 0;
  hash_index_clear(&rec->locations.index);
  rec->stacks.count = 0;
  rec->stacks.arena_used = 0;
  hash_index_clear(&rec->stacks.index);
  rec->threads.count = 0;
  rec->threads.names_used = 0; // the names are released; their room is kept
  hash_index_clear(&rec->threads.index);
  rec->samples.count = 0;
  hash_index_clear(&rec->samples.index);
  if (rec->timeline) timeline_log_clear(rec->timeline);
  rec->latest_moment_ns = 0;
}

int recorder_enable_timeline(recorder *rec, size_t capacity) {
  if (!rec) return -1;
  if (rec->timeline) return 0;
  rec->timeline = allocation_permitted(rec) ? timeline_log_new(capacity) : NULL;
  return rec->timeline ? 0 : -1;
}

const timeline_log *recorder_timeline(const recorder *rec) { return rec->timeline; }

timeline_log *recorder_timeline_for_testing(recorder *rec) { return rec->timeline; }

// ---------------------------------------------------------------------------
// Recording.

// Everything recorder_record must create for one sample, found before
// anything is inserted.
typedef struct {
  uint32_t missing_locations;
  bool new_stack;
  bool new_thread;
  bool new_sample;
} missing_parts;

static int reserve_missing(recorder *rec, const missing_parts *missing, uint32_t depth, size_t name_length) {
  if (missing->missing_locations && reserve_locations(rec, missing->missing_locations) != 0) return -1;
  if (missing->new_stack && reserve_stack(rec, depth) != 0) return -1;
  if (missing->new_thread && reserve_thread(rec, name_length) != 0) return -1;
  if (missing->new_sample && reserve_sample(rec) != 0) return -1;
  return 0;
}

int recorder_record(recorder *rec, const recorder_frame *frames, uint32_t depth, int64_t thread_id,
                    const char *thread_name, uint8_t state, const int64_t values[RECORDER_VALUE_COUNT]) {
  if (!rec || (depth && !frames) || !values) return -1;
  if (reserve_array(rec, (void **)&rec->scratch, &rec->scratch_capacity, sizeof(uint32_t), depth, UINT32_MAX) != 0)
    return -1;
  uint32_t *indexes = rec->scratch;

  missing_parts missing = {0};
  missing.missing_locations = find_locations(rec, frames, depth, indexes);

  // A stack with a new location is new; otherwise look it up. Its slot is
  // looked up again after reserving, since reserving may move the slots.
  stack_key stack = {indexes, depth};
  uint32_t stack_hash = 0;
  uint32_t stack_index = NOT_FOUND;
  if (!missing.missing_locations) {
    stack_hash = hash_stack(indexes, depth);
    slot *found = stack_slot(rec, &stack, stack_hash);
    if (found->entry_plus_one) stack_index = found->entry_plus_one - 1;
  }
  missing.new_stack = stack_index == NOT_FOUND;

  thread_key thread = {thread_id, thread_name ? thread_name : "", 0};
  thread.name_length = strlen(thread.name);
  uint32_t thread_hash = hash_thread(thread.thread_id, thread.name, thread.name_length);
  slot *thread_found = thread_slot(rec, &thread, thread_hash);
  uint32_t thread_index = thread_found->entry_plus_one ? thread_found->entry_plus_one - 1 : NOT_FOUND;
  missing.new_thread = thread_index == NOT_FOUND;

  sample_key sample = {stack_index, thread_index, state, 0, {0}, 0};
  const trace_context no_trace = {0};
  uint32_t sample_hash = 0;
  uint32_t sample_index = NOT_FOUND;
  if (!missing.new_stack && !missing.new_thread) {
    sample_hash = hash_sample(stack_index, thread_index, state, 0, &no_trace, 0);
    slot *found = sample_slot(rec, &sample, sample_hash);
    if (found->entry_plus_one) sample_index = found->entry_plus_one - 1;
  }
  missing.new_sample = sample_index == NOT_FOUND;

  if (missing.new_sample) {
    if (reserve_missing(rec, &missing, depth, thread.name_length) != 0) return -1;
    // From here on nothing can fail.
    if (missing.missing_locations) insert_missing_locations(rec, frames, depth, indexes);
    if (missing.new_stack) {
      stack_hash = hash_stack(indexes, depth);
      sample.stack_index = insert_stack(rec, stack_slot(rec, &stack, stack_hash), &stack, stack_hash);
    }
    if (missing.new_thread)
      sample.thread_index = insert_thread(rec, thread_slot(rec, &thread, thread_hash), &thread, thread_hash);
    sample_hash = hash_sample(sample.stack_index, sample.thread_index, state, 0, &no_trace, 0);
    sample_index = insert_sample(rec, sample_slot(rec, &sample, sample_hash), &sample, sample_hash);
  }
  add_values(rec->samples.entries[sample_index].values, values);
  return 0;
}

// ---------------------------------------------------------------------------
// Recording in steps: a caller that records the same stack or thread again
// and again (a thread idle since its previous sample) interns it once and
// adds samples by id, skipping the hashing of its frames.

uint64_t recorder_generation(const recorder *rec) { return rec->generation; }

// Interns a stack: the locations of its first looked_up frames are looked
// up, those of the rest are in scratch already.
static int intern_stack_from(recorder *rec, const recorder_frame *frames, uint32_t depth, uint32_t looked_up,
                             uint32_t *stack_id) {
  uint32_t *indexes = rec->scratch;
  uint32_t missing_locations = find_locations(rec, frames, looked_up, indexes);
  stack_key stack = {indexes, depth};
  uint32_t hash = 0;
  if (!missing_locations) {
    hash = hash_stack(indexes, depth);
    slot *found = stack_slot(rec, &stack, hash);
    if (found->entry_plus_one) {
      *stack_id = found->entry_plus_one - 1;
      return 0;
    }
  }
  if (missing_locations && reserve_locations(rec, missing_locations) != 0) return -1;
  if (reserve_stack(rec, depth) != 0) return -1;
  // From here on nothing can fail.
  if (missing_locations) insert_missing_locations(rec, frames, depth, indexes);
  hash = hash_stack(indexes, depth);
  *stack_id = insert_stack(rec, stack_slot(rec, &stack, hash), &stack, hash);
  return 0;
}

int recorder_intern_stack(recorder *rec, const recorder_frame *frames, uint32_t depth, uint32_t *stack_id) {
  if (!rec || (depth && !frames) || !stack_id) return -1;
  if (reserve_array(rec, (void **)&rec->scratch, &rec->scratch_capacity, sizeof(uint32_t), depth, UINT32_MAX) != 0)
    return -1;
  return intern_stack_from(rec, frames, depth, depth, stack_id);
}

static bool frames_equal(const recorder_frame *a, const recorder_frame *b) {
  return a->frame_id == b->frame_id && a->line == b->line;
}

// The hint becomes this stack; emptied when it cannot hold it.
static void remember_hint(recorder *rec, recorder_stack_hint *hint, const recorder_frame *frames, uint32_t depth,
                          uint32_t stack_id) {
  hint->depth = 0;
  if (depth > hint->capacity) {
    uint32_t capacity = hint->capacity;
    if (reserve_array(rec, (void **)&hint->frames, &capacity, sizeof(*hint->frames), depth, UINT32_MAX) != 0) return;
    capacity = hint->capacity;
    if (reserve_array(rec, (void **)&hint->location_indexes, &capacity, sizeof(*hint->location_indexes), depth,
                      UINT32_MAX) != 0)
      return;
    hint->capacity = capacity;
  }
  if (depth) {
    memcpy(hint->frames, frames, (size_t)depth * sizeof(*frames));
    memcpy(hint->location_indexes, rec->scratch, (size_t)depth * sizeof(uint32_t));
  }
  hint->depth = depth;
  hint->stack_id = stack_id;
  hint->generation = rec->generation;
}

int recorder_intern_stack_hinted(recorder *rec, const recorder_frame *frames, uint32_t depth,
                                 recorder_stack_hint *hint, uint32_t *stack_id) {
  if (hint == NULL) return recorder_intern_stack(rec, frames, depth, stack_id);
  if (!rec || (depth && !frames) || !stack_id) return -1;
  if (reserve_array(rec, (void **)&rec->scratch, &rec->scratch_capacity, sizeof(uint32_t), depth, UINT32_MAX) != 0)
    return -1;
  uint32_t shared = 0;
  if (hint->generation == rec->generation) {
    uint32_t limit = depth < hint->depth ? depth : hint->depth;
    while (shared < limit &&
           frames_equal(&frames[depth - 1 - shared], &hint->frames[hint->depth - 1 - shared])) {
      rec->scratch[depth - 1 - shared] = hint->location_indexes[hint->depth - 1 - shared];
      shared++;
    }
    // The hint's very stack (a thread that ran and came back to where it
    // waited): no hashing, no lookup, and the hint stays as it is. (An
    // emptied hint has depth 0, so never matches here.)
    if (depth > 0 && shared == depth && depth == hint->depth) {
      *stack_id = hint->stack_id;
      return 0;
    }
  }
  if (intern_stack_from(rec, frames, depth, depth - shared, stack_id) != 0) return -1;
  remember_hint(rec, hint, frames, depth, *stack_id);
  return 0;
}

void recorder_stack_hint_free(recorder_stack_hint *hint) {
  if (hint == NULL) return;
  free(hint->frames);
  free(hint->location_indexes);
  *hint = (recorder_stack_hint){0};
}

int recorder_intern_thread(recorder *rec, int64_t thread_id, const char *thread_name, uint32_t *thread_index) {
  if (!rec || !thread_index) return -1;
  thread_key thread = {thread_id, thread_name ? thread_name : "", 0};
  thread.name_length = strlen(thread.name);
  uint32_t hash = hash_thread(thread.thread_id, thread.name, thread.name_length);
  slot *found = thread_slot(rec, &thread, hash);
  if (found->entry_plus_one) {
    *thread_index = found->entry_plus_one - 1;
    return 0;
  }
  if (reserve_thread(rec, thread.name_length) != 0) return -1;
  *thread_index = insert_thread(rec, thread_slot(rec, &thread, hash), &thread, hash);
  return 0;
}

// Only the time sample types have a moment: an allocation is not a span.
static void log_timed_sample(recorder *rec, uint32_t sample_index, int64_t at_ns, const int64_t *values) {
  if (values[RECORDER_CPU_TIME_NS] == 0 && values[RECORDER_CPU_SAMPLES] == 0 && values[RECORDER_WALL_TIME_NS] == 0 &&
      values[RECORDER_WALL_SAMPLES] == 0) {
    return;
  }
  if (at_ns > rec->latest_moment_ns) rec->latest_moment_ns = at_ns;
  timeline_entry entry = {
      .at_ns = at_ns,
      .cpu_ns = values[RECORDER_CPU_TIME_NS],
      .wall_ns = values[RECORDER_WALL_TIME_NS],
      .gvl_wait_ns = values[RECORDER_GVL_WAIT_NS],
      .sample_index = sample_index,
      .cpu_samples = (uint16_t)(values[RECORDER_CPU_SAMPLES] > UINT16_MAX ? UINT16_MAX : values[RECORDER_CPU_SAMPLES]),
      .wall_samples = (uint16_t)(values[RECORDER_WALL_SAMPLES] > UINT16_MAX ? UINT16_MAX : values[RECORDER_WALL_SAMPLES]),
  };
  timeline_log_append(rec->timeline, &entry);
}

int64_t recorder_latest_moment_ns(const recorder *rec) { return rec ? rec->latest_moment_ns : 0; }

static bool hint_names_sample(const recorder *rec, const recorder_sample_hint *hint, const sample_key *key) {
  return hint != NULL && hint->generation == rec->generation && hint->sample_index_plus_one != 0 &&
         hint->sample_index_plus_one <= rec->samples.count &&
         sample_matches(rec, hint->sample_index_plus_one - 1, key);
}

int recorder_add(recorder *rec, uint32_t stack_id, const recorder_context *context,
                 const int64_t values[RECORDER_VALUE_COUNT]) {
  return recorder_add_hinted(rec, stack_id, context, values, NULL);
}

int recorder_add_hinted(recorder *rec, uint32_t stack_id, const recorder_context *context,
                        const int64_t values[RECORDER_VALUE_COUNT], recorder_sample_hint *hint) {
  if (!rec || !values || !context || stack_id >= rec->stacks.count || context->thread_index >= rec->threads.count)
    return -1;
  sample_key sample = {stack_id, context->thread_index, context->state, context->label_set, context->trace,
                       context->object_class};
  uint32_t sample_index;
  if (hint_names_sample(rec, hint, &sample)) {
    sample_index = hint->sample_index_plus_one - 1;
  } else {
    uint32_t hash = hash_sample(stack_id, context->thread_index, context->state, context->label_set, &context->trace,
                                context->object_class);
    slot *found = sample_slot(rec, &sample, hash);
    if (found->entry_plus_one) {
      sample_index = found->entry_plus_one - 1;
    } else {
      if (reserve_sample(rec) != 0) return -1;
      sample_index = insert_sample(rec, sample_slot(rec, &sample, hash), &sample, hash);
    }
    if (hint != NULL) {
      *hint = (recorder_sample_hint){.generation = rec->generation, .sample_index_plus_one = sample_index + 1};
    }
  }
  add_values(rec->samples.entries[sample_index].values, values);
  if (rec->timeline && context->at_ns != 0) log_timed_sample(rec, sample_index, context->at_ns, values);
  return 0;
}

// ---------------------------------------------------------------------------
// Read-back. An index out of range reads as a zeroed value rather than
// memory past the table.

size_t recorder_location_count(const recorder *rec) { return rec->locations.count; }

recorder_frame recorder_location(const recorder *rec, size_t index) {
  recorder_frame none = {0, 0};
  return index < rec->locations.count ? rec->locations.entries[index] : none;
}

size_t recorder_thread_count(const recorder *rec) { return rec->threads.count; }

recorder_thread recorder_thread_at(const recorder *rec, size_t index) {
  recorder_thread thread = {0, ""};
  if (index >= rec->threads.count) return thread;
  const thread_entry *entry = &rec->threads.entries[index];
  thread.thread_id = entry->thread_id;
  thread.name = rec->threads.names + entry->name_offset;
  return thread;
}

size_t recorder_stack_count(const recorder *rec) { return rec->stacks.count; }

uint32_t recorder_stack_frames(const recorder *rec, uint32_t stack_id, recorder_frame *frames, uint32_t capacity) {
  if (stack_id >= rec->stacks.count) return 0;
  const stack_entry *stack = &rec->stacks.entries[stack_id];
  const uint32_t *indexes = rec->stacks.arena + stack->offset;
  for (uint32_t i = 0; i < stack->depth && i < capacity; i++) frames[i] = rec->locations.entries[indexes[i]];
  return stack->depth;
}

size_t recorder_sample_count(const recorder *rec) { return rec->samples.count; }

recorder_sample recorder_sample_at(const recorder *rec, size_t index) {
  recorder_sample sample = {0};
  if (index >= rec->samples.count) {
    sample.location_indexes = rec->stacks.arena;
    return sample;
  }
  const sample_entry *entry = &rec->samples.entries[index];
  const stack_entry *stack = &rec->stacks.entries[entry->stack_index];
  sample.location_indexes = rec->stacks.arena + stack->offset;
  sample.depth = stack->depth;
  sample.thread_index = entry->thread_index;
  sample.state = entry->state;
  sample.label_set = entry->label_set;
  sample.trace = entry->trace;
  sample.object_class = entry->object_class;
  memcpy(sample.values, entry->values, sizeof(sample.values));
  return sample;
}

void recorder_each_object_class(const recorder *rec, void (*visit)(uint64_t object_class)) {
  for (uint32_t i = 0; i < rec->samples.count; i++) {
    if (rec->samples.entries[i].object_class != 0) visit(rec->samples.entries[i].object_class);
  }
}

int64_t recorder_total(const recorder *rec, int value_index) {
  if (value_index < 0 || value_index >= RECORDER_VALUE_COUNT) return 0;
  uint64_t total = 0;
  for (uint32_t i = 0; i < rec->samples.count; i++) total += (uint64_t)rec->samples.entries[i].values[value_index];
  return (int64_t)total;
}

void recorder_fail_allocations_after_for_testing(recorder *rec, long successes) {
  rec->allocations_allowed = successes < 0 ? UNLIMITED_ALLOCATIONS : successes;
}
