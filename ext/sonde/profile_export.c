// profile_export.c: recorder -> pprof, at flush and stop, never on the
// sampling path. Naming frames calls the VM and allocates Ruby strings, so
// building the profile needs the GVL; encoding and gzip, the costly part,
// run with the GVL released. Each distinct frame is named once per export.
//
// Sample types, in the recorder's value order: cpu-time (nanoseconds),
// cpu-samples (count), wall-time (nanoseconds), wall-samples (count), and
// where the VM times GVL waits (Ruby 3.3+) gvl-wait-time (nanoseconds): the
// part of wall-time the thread spent ready to run, queued for the GVL; when
// the run samples allocations, alloc-samples (count), and with the heap,
// heap-live-samples (count) and heap-live-size (bytes).
// Labels: "thread id" (number), "thread name" and "state" (strings), on
// GC samples "gc type" and "gc reason", on allocation and heap samples
// "allocation class". The names are profile_names.h's.
// The caller's comments (continuous mode's tags, "service=web") go into
// the profile's comment field.
#include "profile_export.h"

#include <stdio.h>
#include <string.h>

#include <ruby/encoding.h>
#include <ruby/st.h>
#include <ruby/thread.h>

#include "pprof_builder.h"
#include "profile_names.h"
#include "sample_constants.h"
#include "stacks.h"
#include "thread_states.h"
#include "vm.h"

typedef struct {
  const recorder *rec;
  const profile_export_times *times;
  VALUE comments; // nil or an Array of Strings, checked by profile_export_check_comments
  VALUE label_sets; // nil or the Ruby side's table: label set id -> frozen [key, value, key, value, ...]
  pprof_builder *builder;
  st_table *function_ids;  // frame_id -> pprof function id
  // One pprof function per distinct (name, file, first line), one location
  // per distinct (function, line): several frame ids can describe the same
  // function (Ruby 3.3+ hands out a method entry per class that reaches a
  // module's method: Enumerable#inject from Array and from Hash).
  st_table *functions_by_fields; // function_fields * -> pprof function id
  st_table *locations_by_fields; // function id << 32 | line -> pprof location id
  uint64_t *location_ids;  // recorder location index -> pprof location id
  uint64_t *stack;         // one sample's pprof location ids
  int64_t label_thread_id, label_thread_name, label_state, label_gc_type, label_gc_reason;
  int64_t label_trace_id, label_span_id, label_local_root_span_id, label_allocation_class;
  int64_t label_end_timestamp;
  // The timeline's entries by sample: sample s's are entries
  // timeline_order[timeline_starts[s]] .. [timeline_starts[s + 1] - 1].
  const timeline_log *timeline; // NULL: the run kept no timeline
  size_t *timeline_starts;
  size_t *timeline_order;
  st_table *class_names;   // object class -> string index
  int64_t *thread_names;   // recorder thread index -> string index
  uint8_t *gzip;
  size_t gzip_length;
  int encode_status;
  // The recorder's values that are sample types here, in the profile's order.
  int value_indexes[RECORDER_VALUE_COUNT];
  size_t value_count;
} export_run;

static void *encode_without_gvl(void *arg) {
  export_run *run = arg;
  run->encode_status = pprof_encode_gzip(run->builder, &run->gzip, &run->gzip_length);
  return NULL;
}

static void check(bool ok) {
  if (!ok) rb_raise(rb_eNoMemError, "sonde: out of memory while encoding the profile");
}

static void *checked_calloc(size_t count, size_t size) {
  void *memory = calloc(count ? count : 1, size);
  check(memory != NULL);
  return memory;
}

static int64_t intern_ruby_string(pprof_builder *builder, VALUE string) {
  if (!RB_TYPE_P(string, T_STRING)) return 0;
  int64_t index = pprof_string(builder, RSTRING_PTR(string), (size_t)RSTRING_LEN(string));
  check(index >= 0);
  return index;
}

typedef struct {
  int64_t name, filename, start_line; // string indexes (unique per string) and a line
} function_fields;

static int function_fields_compare(st_data_t a, st_data_t b) {
  const function_fields *x = (const function_fields *)a, *y = (const function_fields *)b;
  return !(x->name == y->name && x->filename == y->filename && x->start_line == y->start_line);
}

static st_index_t function_fields_hash(st_data_t key) {
  const function_fields *fields = (const function_fields *)key;
  st_index_t h = st_hash_start((st_index_t)fields->name);
  h = st_hash_uint(h, (st_index_t)fields->filename);
  h = st_hash_uint(h, (st_index_t)fields->start_line);
  return st_hash_end(h);
}

static const struct st_hash_type function_fields_type = {function_fields_compare, function_fields_hash};

static int free_function_fields(st_data_t key, st_data_t value, st_data_t unused) {
  free((void *)key);
  return ST_CONTINUE;
}

static uint64_t function_with_fields(export_run *run, function_fields fields) {
  st_data_t found;
  if (st_lookup(run->functions_by_fields, (st_data_t)&fields, &found)) return (uint64_t)found;
  uint64_t id = pprof_add_function(run->builder, fields.name, fields.filename, fields.start_line);
  check(id != 0);
  function_fields *key = checked_calloc(1, sizeof(*key));
  *key = fields;
  st_insert(run->functions_by_fields, (st_data_t)key, (st_data_t)id);
  return id;
}

static uint64_t function_for(export_run *run, uint64_t frame_id) {
  st_data_t found;
  if (st_lookup(run->function_ids, (st_data_t)frame_id, &found)) return (uint64_t)found;
  VALUE name, path;
  int64_t first_line;
  stacks_describe(frame_id, &name, &path, &first_line);
  int64_t name_index = intern_ruby_string(run->builder, name);
  if (name_index == 0) name_index = pprof_cstring(run->builder, "(unknown)");
  function_fields fields = {.name = name_index, .filename = intern_ruby_string(run->builder, path),
                            .start_line = first_line};
  uint64_t id = function_with_fields(run, fields);
  st_insert(run->function_ids, (st_data_t)frame_id, (st_data_t)id);
  return id;
}

// Function ids count the functions written (far below 2^32), and Ruby's
// lines are ints: both fit one key. A negative line (never seen) is kept
// apart rather than folded onto another.
static uint64_t location_for(export_run *run, uint64_t function_id, int32_t line) {
  st_data_t key = (st_data_t)(function_id << 32 | (uint32_t)line), found;
  if (st_lookup(run->locations_by_fields, key, &found)) return (uint64_t)found;
  uint64_t id = pprof_add_location(run->builder, function_id, line);
  check(id != 0);
  st_insert(run->locations_by_fields, key, (st_data_t)id);
  return id;
}

typedef struct {
  int value_index; // RECORDER_*
  const char *type, *unit;
} sample_type;

static const sample_type SAMPLE_TYPES[] = {
    {RECORDER_CPU_TIME_NS, PROFILE_TYPE_CPU_TIME, PROFILE_UNIT_NANOSECONDS},
    {RECORDER_CPU_SAMPLES, PROFILE_TYPE_CPU_SAMPLES, PROFILE_UNIT_COUNT},
    {RECORDER_WALL_TIME_NS, PROFILE_TYPE_WALL_TIME, PROFILE_UNIT_NANOSECONDS},
    {RECORDER_WALL_SAMPLES, PROFILE_TYPE_WALL_SAMPLES, PROFILE_UNIT_COUNT},
    {RECORDER_GVL_WAIT_NS, PROFILE_TYPE_GVL_WAIT_TIME, PROFILE_UNIT_NANOSECONDS},
    {RECORDER_ALLOC_SAMPLES, PROFILE_TYPE_ALLOC_SAMPLES, PROFILE_UNIT_COUNT},
    {RECORDER_ALLOC_SAMPLES_UNSCALED, PROFILE_TYPE_ALLOC_SAMPLES_UNSCALED, PROFILE_UNIT_COUNT},
    {RECORDER_HEAP_LIVE_SAMPLES, PROFILE_TYPE_HEAP_LIVE_SAMPLES, PROFILE_UNIT_COUNT},
    {RECORDER_HEAP_LIVE_BYTES, PROFILE_TYPE_HEAP_LIVE_SIZE, PROFILE_UNIT_BYTES},
};
_Static_assert(sizeof(SAMPLE_TYPES) / sizeof(SAMPLE_TYPES[0]) == RECORDER_VALUE_COUNT, "every recorder value has a sample type");

static bool sample_type_included(const export_run *run, int value_index) {
  switch (value_index) {
    case RECORDER_GVL_WAIT_NS: return vm_times_gvl_waits();
    case RECORDER_ALLOC_SAMPLES:
    case RECORDER_ALLOC_SAMPLES_UNSCALED: return run->times->allocations;
    case RECORDER_HEAP_LIVE_SAMPLES:
    case RECORDER_HEAP_LIVE_BYTES: return run->times->heap;
    default: return true;
  }
}

static void add_header(export_run *run) {
  pprof_builder *builder = run->builder;
  run->value_count = 0;
  for (size_t i = 0; i < RECORDER_VALUE_COUNT; i++) {
    if (!sample_type_included(run, SAMPLE_TYPES[i].value_index)) continue;
    check(pprof_add_sample_type(builder, SAMPLE_TYPES[i].type, SAMPLE_TYPES[i].unit) == 0);
    run->value_indexes[run->value_count++] = SAMPLE_TYPES[i].value_index;
  }
  check(pprof_set_period(builder, PROFILE_TYPE_WALL_TIME, PROFILE_UNIT_NANOSECONDS, run->times->period_ns) == 0);
  check(pprof_set_default_sample_type(builder, PROFILE_TYPE_CPU_TIME) == 0);
  pprof_set_time(builder, run->times->start_epoch_ns, run->times->duration_ns);
  run->label_thread_id = pprof_cstring(builder, PROFILE_LABEL_THREAD_ID);
  run->label_thread_name = pprof_cstring(builder, PROFILE_LABEL_THREAD_NAME);
  run->label_state = pprof_cstring(builder, PROFILE_LABEL_STATE);
  run->label_gc_type = pprof_cstring(builder, PROFILE_LABEL_GC_TYPE);
  run->label_gc_reason = pprof_cstring(builder, PROFILE_LABEL_GC_REASON);
  run->label_trace_id = pprof_cstring(builder, PROFILE_LABEL_TRACE_ID);
  run->label_span_id = pprof_cstring(builder, PROFILE_LABEL_SPAN_ID);
  run->label_local_root_span_id = pprof_cstring(builder, PROFILE_LABEL_LOCAL_ROOT_SPAN_ID);
  run->label_allocation_class = pprof_cstring(builder, PROFILE_LABEL_ALLOCATION_CLASS);
  run->label_end_timestamp = pprof_cstring(builder, PROFILE_LABEL_END_TIMESTAMP_NS);
  check(run->label_allocation_class > 0 && run->label_end_timestamp > 0);
  check(run->label_thread_id > 0 && run->label_thread_name > 0 && run->label_state > 0 && run->label_gc_type > 0 &&
        run->label_gc_reason > 0 && run->label_trace_id > 0 && run->label_span_id > 0 &&
        run->label_local_root_span_id > 0);
}

static void add_locations(export_run *run) {
  size_t count = recorder_location_count(run->rec);
  run->location_ids = checked_calloc(count, sizeof(uint64_t));
  for (size_t i = 0; i < count; i++) {
    recorder_frame frame = recorder_location(run->rec, i);
    run->location_ids[i] = location_for(run, function_for(run, frame.frame_id), frame.line);
  }
}

static void add_thread_names(export_run *run) {
  size_t count = recorder_thread_count(run->rec);
  run->thread_names = checked_calloc(count, sizeof(int64_t));
  for (size_t i = 0; i < count; i++) {
    run->thread_names[i] = pprof_cstring(run->builder, recorder_thread_at(run->rec, i).name);
    check(run->thread_names[i] >= 0);
  }
}

// The string labels of label set id into out (at most
// SAMPLE_MAX_LABELS); returns how many. An id the table does not
// hold, or an entry that is not [String, String, ...], adds none.
static size_t add_label_set(export_run *run, uint32_t id, pprof_label *out) {
  if (id == 0 || !RB_TYPE_P(run->label_sets, T_ARRAY) || id >= (uint32_t)RARRAY_LEN(run->label_sets)) return 0;
  VALUE pairs = RARRAY_AREF(run->label_sets, id);
  if (!RB_TYPE_P(pairs, T_ARRAY)) return 0;
  size_t count = 0;
  for (long i = 0; i + 1 < RARRAY_LEN(pairs) && count < SAMPLE_MAX_LABELS; i += 2) {
    int64_t key = intern_ruby_string(run->builder, RARRAY_AREF(pairs, i));
    int64_t value = intern_ruby_string(run->builder, RARRAY_AREF(pairs, i + 1));
    if (key > 0 && value > 0) out[count++] = (pprof_label){.key = key, .str = value};
  }
  return count;
}

// 16 lower-case hex digits per 64-bit half, as tracers print ids.
static int64_t hex_string(export_run *run, const uint64_t *halves, size_t count) {
  char text[2 * 16 + 1];
  size_t used = 0;
  for (size_t i = 0; i < count; i++) {
    used += (size_t)snprintf(text + used, sizeof(text) - used, "%016llx", (unsigned long long)halves[i]);
  }
  int64_t index = pprof_cstring(run->builder, text);
  check(index > 0);
  return index;
}

// The trace context's labels into out; returns how many (0 without a span).
static size_t add_trace_labels(export_run *run, const trace_context *trace, pprof_label *out) {
  if (!trace_context_is_set(trace)) return 0;
  size_t count = 0;
  if (trace->trace_id_high != 0 || trace->trace_id_low != 0) {
    const uint64_t trace_id[2] = {trace->trace_id_high, trace->trace_id_low};
    out[count++] = (pprof_label){.key = run->label_trace_id, .str = hex_string(run, trace_id, 2)};
  }
  out[count++] = (pprof_label){.key = run->label_span_id, .str = hex_string(run, &trace->span_id, 1)};
  if (trace->local_root_span_id != 0) {
    out[count++] = (pprof_label){.key = run->label_local_root_span_id,
                                 .str = hex_string(run, &trace->local_root_span_id, 1)};
  }
  return count;
}

// The class's name, once per class: "(VM internal)" for the VM's hidden
// objects (no class), the class path otherwise ("#<Class:0x...>" for an
// anonymous one), named without calling a Ruby method.
static int64_t class_name_index(export_run *run, uint64_t object_class) {
  st_data_t found;
  if (st_lookup(run->class_names, (st_data_t)object_class, &found)) return (int64_t)found;
  int64_t index;
  VALUE klass = (VALUE)object_class;
  if (object_class == SAMPLE_CLASS_UNKNOWN) {
    index = pprof_cstring(run->builder, "(unknown)");
  } else if (object_class <= SAMPLE_CLASS_LAST_SENTINEL || !(RB_TYPE_P(klass, T_CLASS) || RB_TYPE_P(klass, T_ICLASS))) {
    index = pprof_cstring(run->builder, "(VM internal)");
  } else {
    index = intern_ruby_string(run->builder, rb_class_path(rb_class_real(klass)));
  }
  check(index > 0);
  st_insert(run->class_names, (st_data_t)object_class, (st_data_t)index);
  return index;
}

// Groups the timeline's entries by sample (a counting sort: the entries
// stay in the order they were taken within each sample).
static void group_timeline(export_run *run) {
  run->timeline = recorder_timeline(run->rec);
  if (run->timeline == NULL) return;
  size_t samples = recorder_sample_count(run->rec), entries = timeline_log_count(run->timeline);
  run->timeline_starts = checked_calloc(samples + 1, sizeof(size_t));
  run->timeline_order = checked_calloc(entries ? entries : 1, sizeof(size_t));
  for (size_t e = 0; e < entries; e++) {
    uint32_t sample = timeline_log_at(run->timeline, e).sample_index;
    if (sample < samples) run->timeline_starts[sample + 1]++;
  }
  for (size_t s = 0; s < samples; s++) run->timeline_starts[s + 1] += run->timeline_starts[s];
  size_t *next = checked_calloc(samples ? samples : 1, sizeof(size_t));
  for (size_t s = 0; s < samples; s++) next[s] = run->timeline_starts[s];
  for (size_t e = 0; e < entries; e++) {
    uint32_t sample = timeline_log_at(run->timeline, e).sample_index;
    if (sample < samples) run->timeline_order[next[sample]++] = e;
  }
  free(next);
}

// The labels every pprof sample of this recorder sample carries; returns
// how many. labels has room for them and one more (the timestamp).
static size_t sample_labels(export_run *run, const recorder_sample *sample, pprof_label *labels) {
  recorder_thread thread = recorder_thread_at(run->rec, sample->thread_index);
  int64_t state = pprof_cstring(run->builder, thread_state_name(sample->state));
  check(state > 0);
  labels[0] = (pprof_label){.key = run->label_thread_id, .num = thread.thread_id};
  labels[1] = (pprof_label){.key = run->label_thread_name, .str = run->thread_names[sample->thread_index]};
  labels[2] = (pprof_label){.key = run->label_state, .str = state};
  size_t label_count = 3;
  const char *gc_type, *gc_reason;
  if (thread_state_gc_labels(sample->state, &gc_type, &gc_reason)) {
    labels[label_count++] = (pprof_label){.key = run->label_gc_type, .str = pprof_cstring(run->builder, gc_type)};
    labels[label_count++] = (pprof_label){.key = run->label_gc_reason, .str = pprof_cstring(run->builder, gc_reason)};
    check(labels[3].str > 0 && labels[4].str > 0);
  }
  if (sample->object_class != 0 || sample->values[RECORDER_ALLOC_SAMPLES] != 0 ||
      sample->values[RECORDER_ALLOC_SAMPLES_UNSCALED] != 0 || sample->values[RECORDER_HEAP_LIVE_SAMPLES] != 0) {
    labels[label_count++] =
        (pprof_label){.key = run->label_allocation_class, .str = class_name_index(run, sample->object_class)};
  }
  label_count += add_trace_labels(run, &sample->trace, labels + label_count);
  label_count += add_label_set(run, sample->label_set, labels + label_count);
  return label_count;
}

static void add_pprof_sample(export_run *run, const recorder_sample *sample, const int64_t *recorder_values,
                             const pprof_label *labels, size_t label_count) {
  int64_t values[RECORDER_VALUE_COUNT];
  for (size_t v = 0; v < run->value_count; v++) values[v] = recorder_values[run->value_indexes[v]];
  check(pprof_add_sample(run->builder, run->stack, sample->depth, values, run->value_count, labels, label_count) == 0);
}

// A sample with a timeline is written as each of its moments, a pprof
// sample with the "end_timestamp_ns" label (epoch nanoseconds), plus what
// no moment holds (the log's dropped entries, allocation values) as one
// more without it: the totals are the aggregate's either way.
static void add_sample_with_moments(export_run *run, const recorder_sample *sample, pprof_label *labels,
                                    size_t label_count, size_t index) {
  size_t first = run->timeline_starts[index], end = run->timeline_starts[index + 1];
  int64_t untimed[RECORDER_VALUE_COUNT];
  memcpy(untimed, sample->values, sizeof(untimed));
  for (size_t i = first; i < end; i++) {
    timeline_entry entry = timeline_log_at(run->timeline, run->timeline_order[i]);
    untimed[RECORDER_CPU_TIME_NS] -= entry.cpu_ns;
    untimed[RECORDER_CPU_SAMPLES] -= entry.cpu_samples;
    untimed[RECORDER_WALL_TIME_NS] -= entry.wall_ns;
    untimed[RECORDER_WALL_SAMPLES] -= entry.wall_samples;
    untimed[RECORDER_GVL_WAIT_NS] -= entry.gvl_wait_ns;
  }
  bool any_untimed = first == end;
  for (size_t v = 0; v < run->value_count; v++) any_untimed = any_untimed || untimed[run->value_indexes[v]] != 0;
  if (any_untimed) add_pprof_sample(run, sample, untimed, labels, label_count);
  for (size_t i = first; i < end; i++) {
    timeline_entry entry = timeline_log_at(run->timeline, run->timeline_order[i]);
    const int64_t timed[RECORDER_VALUE_COUNT] = {
        [RECORDER_CPU_TIME_NS] = entry.cpu_ns,   [RECORDER_CPU_SAMPLES] = entry.cpu_samples,
        [RECORDER_WALL_TIME_NS] = entry.wall_ns, [RECORDER_WALL_SAMPLES] = entry.wall_samples,
        [RECORDER_GVL_WAIT_NS] = entry.gvl_wait_ns,
    };
    labels[label_count] = (pprof_label){.key = run->label_end_timestamp,
                                        .num = entry.at_ns + run->times->monotonic_to_epoch_ns};
    add_pprof_sample(run, sample, timed, labels, label_count + 1);
  }
}

static void add_samples(export_run *run) {
  size_t count = recorder_sample_count(run->rec);
  size_t stack_capacity = 0;
  for (size_t i = 0; i < count; i++) {
    recorder_sample sample = recorder_sample_at(run->rec, i);
    if (sample.depth > stack_capacity) {
      free(run->stack);
      run->stack = NULL;
      stack_capacity = sample.depth;
      run->stack = checked_calloc(stack_capacity, sizeof(uint64_t));
    }
    for (uint32_t depth = 0; depth < sample.depth; depth++) {
      run->stack[depth] = run->location_ids[sample.location_indexes[depth]];
    }
    pprof_label labels[5 + 3 + 1 + SAMPLE_MAX_LABELS + 1];
    size_t label_count = sample_labels(run, &sample, labels);
    if (run->timeline) {
      add_sample_with_moments(run, &sample, labels, label_count, i);
    } else {
      add_pprof_sample(run, &sample, sample.values, labels, label_count);
    }
  }
}

static void add_comments(export_run *run) {
  if (NIL_P(run->comments)) return;
  for (long i = 0; i < RARRAY_LEN(run->comments); i++) {
    VALUE comment = RARRAY_AREF(run->comments, i);
    check(pprof_add_comment(run->builder, RSTRING_PTR(comment)) == 0);
  }
}

static VALUE build(VALUE arg) {
  export_run *run = (export_run *)arg;
  run->builder = pprof_builder_new();
  check(run->builder != NULL);
  run->function_ids = st_init_numtable();
  run->functions_by_fields = st_init_table(&function_fields_type);
  run->locations_by_fields = st_init_numtable();
  run->class_names = st_init_numtable();
  add_header(run);
  add_locations(run);
  add_thread_names(run);
  group_timeline(run);
  add_samples(run);
  add_comments(run);
  // The expensive part (serializing and gzip) is pure C on the builder's
  // own copies: let the application run meanwhile.
  rb_thread_call_without_gvl(encode_without_gvl, run, NULL, NULL);
  check(run->encode_status == 0);
  VALUE bytes = rb_str_new((const char *)run->gzip, (long)run->gzip_length);
  rb_enc_associate(bytes, rb_ascii8bit_encoding());
  return bytes;
}

static VALUE release(VALUE arg) {
  export_run *run = (export_run *)arg;
  if (run->builder) pprof_builder_free(run->builder);
  if (run->function_ids) st_free_table(run->function_ids);
  if (run->functions_by_fields) {
    st_foreach(run->functions_by_fields, free_function_fields, 0);
    st_free_table(run->functions_by_fields);
  }
  if (run->locations_by_fields) st_free_table(run->locations_by_fields);
  if (run->class_names) st_free_table(run->class_names);
  free(run->location_ids);
  free(run->stack);
  free(run->thread_names);
  free(run->timeline_starts);
  free(run->timeline_order);
  free(run->gzip);
  return Qnil;
}

void profile_export_check_comments(VALUE comments) {
  if (NIL_P(comments)) return;
  Check_Type(comments, T_ARRAY);
  for (long i = 0; i < RARRAY_LEN(comments); i++) {
    VALUE comment = RARRAY_AREF(comments, i);
    Check_Type(comment, T_STRING);
    StringValueCStr(comment); // raises ArgumentError on an embedded NUL
  }
}

VALUE profile_export_pprof(const recorder *rec, const profile_export_times *times, VALUE comments, VALUE label_sets) {
  export_run run = {.rec = rec, .times = times, .comments = comments, .label_sets = label_sets};
  return rb_ensure(build, (VALUE)&run, release, (VALUE)&run);
}

static VALUE frozen_pair_hash(const char *const pairs[][2], size_t count) {
  VALUE hash = rb_hash_new();
  for (size_t i = 0; i < count; i++) {
    rb_hash_aset(hash, ID2SYM(rb_intern(pairs[i][0])), rb_obj_freeze(rb_str_new_cstr(pairs[i][1])));
  }
  return rb_obj_freeze(hash);
}

VALUE profile_export_names(void) {
  static const char *const types[][2] = {
      {"cpu_time", PROFILE_TYPE_CPU_TIME},       {"cpu_samples", PROFILE_TYPE_CPU_SAMPLES},
      {"wall_time", PROFILE_TYPE_WALL_TIME},     {"wall_samples", PROFILE_TYPE_WALL_SAMPLES},
      {"gvl_wait_time", PROFILE_TYPE_GVL_WAIT_TIME}, {"alloc_samples", PROFILE_TYPE_ALLOC_SAMPLES},
      {"alloc_samples_unscaled", PROFILE_TYPE_ALLOC_SAMPLES_UNSCALED},
      {"heap_live_samples", PROFILE_TYPE_HEAP_LIVE_SAMPLES}, {"heap_live_size", PROFILE_TYPE_HEAP_LIVE_SIZE},
  };
  static const char *const units[][2] = {{"nanoseconds", PROFILE_UNIT_NANOSECONDS}, {"count", PROFILE_UNIT_COUNT},
                                          {"bytes", PROFILE_UNIT_BYTES}};
  static const char *const labels[][2] = {
      {"thread_id", PROFILE_LABEL_THREAD_ID}, {"thread_name", PROFILE_LABEL_THREAD_NAME},
      {"state", PROFILE_LABEL_STATE},         {"gc_type", PROFILE_LABEL_GC_TYPE},
      {"gc_reason", PROFILE_LABEL_GC_REASON}, {"trace_id", PROFILE_LABEL_TRACE_ID},
      {"span_id", PROFILE_LABEL_SPAN_ID},     {"local_root_span_id", PROFILE_LABEL_LOCAL_ROOT_SPAN_ID},
      {"allocation_class", PROFILE_LABEL_ALLOCATION_CLASS},
      {"end_timestamp_ns", PROFILE_LABEL_END_TIMESTAMP_NS},
  };
  VALUE names = rb_hash_new();
  rb_hash_aset(names, ID2SYM(rb_intern("sample_types")), frozen_pair_hash(types, sizeof(types) / sizeof(types[0])));
  rb_hash_aset(names, ID2SYM(rb_intern("units")), frozen_pair_hash(units, sizeof(units) / sizeof(units[0])));
  rb_hash_aset(names, ID2SYM(rb_intern("labels")), frozen_pair_hash(labels, sizeof(labels) / sizeof(labels[0])));
  return rb_obj_freeze(names);
}
