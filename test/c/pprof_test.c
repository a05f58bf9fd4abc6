// modules: pprof.c
//
// pprof_test.c: unit tests of pprof.c. Pure C, built under AddressSanitizer
// and UndefinedBehaviorSanitizer by `rake test:c`.
//
// Every test decodes what the builder encoded: it gunzips with zlib and walks
// the protobuf with a reader written here, independent of the encoder, so a
// field written under the wrong number or wire type shows up as a failure.
// The last test also hands a profile to `go tool pprof` when go is installed.
#include "pprof.h"
#include "test_harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define GUNZIP_WINDOW_BITS (15 + 16) // 32 KiB window, gzip wrapper expected
#define GUNZIP_INITIAL_SIZE 4096
#define WIRE_VARINT 0
#define WIRE_FIXED64 1
#define WIRE_LEN 2
#define WIRE_FIXED32 5
#define FIXED64_SIZE 8
#define FIXED32_SIZE 4
#define VARINT_MAX_BYTES 10
#define MAX_SAMPLE_ITEMS 16
#define MANY_SAMPLES 100000
#define MANY_STRINGS 10000
#define SHELL_COMMAND_SIZE 512

// ---- gunzip ----

// Returns a malloc'd copy of the inflated data, or NULL on any zlib error.
static uint8_t *gunzip(const uint8_t *data, size_t len, size_t *out_len) {
  z_stream stream;
  memset(&stream, 0, sizeof(stream));
  if (inflateInit2(&stream, GUNZIP_WINDOW_BITS) != Z_OK) return NULL;
  size_t cap = GUNZIP_INITIAL_SIZE, used = 0;
  uint8_t *out = malloc(cap);
  stream.next_in = (Bytef *)(uintptr_t)data;
  stream.avail_in = (uInt)len;
  int rc = Z_OK;
  while (out && rc == Z_OK) {
    if (used == cap) {
      uint8_t *bigger = realloc(out, cap * 2);
      if (!bigger) break;
      out = bigger;
      cap *= 2;
    }
    stream.next_out = out + used;
    stream.avail_out = (uInt)(cap - used);
    rc = inflate(&stream, Z_NO_FLUSH);
    used = cap - stream.avail_out;
  }
  inflateEnd(&stream);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  *out_len = used;
  return out;
}

// ---- a minimal protobuf reader ----

typedef struct {
  const uint8_t *p;
  const uint8_t *end;
  bool broken;
} reader;

typedef struct {
  uint32_t number;
  int wire;
  uint64_t value;      // varint and fixed fields
  const uint8_t *data; // length-delimited fields
  size_t len;
} field;

static uint64_t read_varint(reader *r) {
  uint64_t value = 0;
  for (int i = 0; i < VARINT_MAX_BYTES; i++) {
    if (r->p >= r->end) break;
    uint8_t byte = *r->p++;
    value |= (uint64_t)(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) return value;
  }
  r->broken = true;
  return 0;
}

static reader reader_over(const uint8_t *data, size_t len) {
  reader r = {data, data + len, false};
  return r;
}

// Reads the next field; returns false at the end or when the input is broken.
static bool next_field(reader *r, field *f) {
  if (r->broken || r->p >= r->end) return false;
  uint64_t tag = read_varint(r);
  f->number = (uint32_t)(tag >> 3);
  f->wire = (int)(tag & 7);
  f->data = NULL;
  f->len = 0;
  f->value = 0;
  size_t left;
  switch (f->wire) {
  case WIRE_VARINT:
    f->value = read_varint(r);
    break;
  case WIRE_LEN:
    f->len = (size_t)read_varint(r);
    left = (size_t)(r->end - r->p);
    if (f->len > left) r->broken = true;
    f->data = r->p;
    if (!r->broken) r->p += f->len;
    break;
  case WIRE_FIXED64:
  case WIRE_FIXED32:
    left = (size_t)(r->end - r->p);
    if (left < (f->wire == WIRE_FIXED64 ? FIXED64_SIZE : FIXED32_SIZE)) r->broken = true;
    else r->p += f->wire == WIRE_FIXED64 ? FIXED64_SIZE : FIXED32_SIZE;
    break;
  default:
    r->broken = true;
  }
  return !r->broken;
}

// Reads a repeated integer field that may be packed (LEN) or not (VARINT).
static size_t read_repeated(const field *f, uint64_t *into, size_t count, size_t max) {
  if (f->wire == WIRE_VARINT) {
    if (count < max) into[count++] = f->value;
    return count;
  }
  reader packed = reader_over(f->data, f->len);
  while (packed.p < packed.end && !packed.broken) {
    uint64_t value = read_varint(&packed);
    if (count < max) into[count++] = value;
  }
  return count;
}

// ---- the decoded profile ----

typedef struct {
  const uint8_t *data;
  size_t len;
} slice;

typedef struct {
  slice *items;
  size_t count;
  size_t cap;
} slice_list;

typedef struct {
  uint8_t *raw;
  size_t raw_len;
  bool broken;
  char **strings;
  size_t string_count;
  size_t string_cap;
  slice_list sample_types, samples, locations, functions;
  int64_t time_nanos, duration_nanos, period, default_sample_type;
  bool has_period_type;
  slice period_type;
  uint64_t comments[MAX_SAMPLE_ITEMS];
  size_t comment_count;
  size_t mapping_count;
} decoded_profile;

typedef struct {
  int64_t type, unit;
} decoded_value_type;

typedef struct {
  uint64_t id;
  int64_t name, system_name, filename, start_line;
} decoded_function;

typedef struct {
  uint64_t id, mapping_id, address, function_id;
  int64_t line;
  size_t line_count;
} decoded_location;

typedef struct {
  uint64_t location_ids[MAX_SAMPLE_ITEMS];
  size_t location_count;
  uint64_t values[MAX_SAMPLE_ITEMS];
  size_t value_count;
  pprof_label labels[MAX_SAMPLE_ITEMS];
  size_t label_count;
} decoded_sample;

static void slice_list_push(slice_list *list, const field *f, bool *broken) {
  if (list->count == list->cap) {
    size_t cap = list->cap ? list->cap * 2 : 16;
    slice *items = realloc(list->items, cap * sizeof(slice));
    if (!items) {
      *broken = true;
      return;
    }
    list->items = items;
    list->cap = cap;
  }
  list->items[list->count].data = f->data;
  list->items[list->count].len = f->len;
  list->count++;
}

static void push_string(decoded_profile *d, const field *f) {
  if (d->string_count == d->string_cap) {
    size_t cap = d->string_cap ? d->string_cap * 2 : 16;
    char **strings = realloc(d->strings, cap * sizeof(char *));
    if (!strings) {
      d->broken = true;
      return;
    }
    d->strings = strings;
    d->string_cap = cap;
  }
  char *copy = malloc(f->len + 1);
  if (!copy) {
    d->broken = true;
    return;
  }
  if (f->len) memcpy(copy, f->data, f->len);
  copy[f->len] = '\0';
  d->strings[d->string_count++] = copy;
}

static void decode_profile_field(decoded_profile *d, const field *f) {
  switch (f->number) {
  case 1: slice_list_push(&d->sample_types, f, &d->broken); break;
  case 2: slice_list_push(&d->samples, f, &d->broken); break;
  case 3: d->mapping_count++; break;
  case 4: slice_list_push(&d->locations, f, &d->broken); break;
  case 5: slice_list_push(&d->functions, f, &d->broken); break;
  case 6: push_string(d, f); break;
  case 9: d->time_nanos = (int64_t)f->value; break;
  case 10: d->duration_nanos = (int64_t)f->value; break;
  case 11:
    d->has_period_type = true;
    d->period_type.data = f->data;
    d->period_type.len = f->len;
    break;
  case 12: d->period = (int64_t)f->value; break;
  case 13: d->comment_count = read_repeated(f, d->comments, d->comment_count, MAX_SAMPLE_ITEMS); break;
  case 14: d->default_sample_type = (int64_t)f->value; break;
  default: d->broken = true;
  }
}

// Gunzips and decodes; d->broken says whether anything went wrong.
static void decode_profile(const uint8_t *gz, size_t gz_len, decoded_profile *d) {
  memset(d, 0, sizeof(*d));
  d->raw = gunzip(gz, gz_len, &d->raw_len);
  if (!d->raw) {
    d->broken = true;
    return;
  }
  reader r = reader_over(d->raw, d->raw_len);
  field f;
  while (next_field(&r, &f)) decode_profile_field(d, &f);
  if (r.broken) d->broken = true;
}

static void free_decoded(decoded_profile *d) {
  for (size_t i = 0; i < d->string_count; i++) free(d->strings[i]);
  free(d->strings);
  free(d->sample_types.items);
  free(d->samples.items);
  free(d->locations.items);
  free(d->functions.items);
  free(d->raw);
}

static const char *string_at(const decoded_profile *d, int64_t index) {
  if (index < 0 || (size_t)index >= d->string_count) return "<string index out of range>";
  return d->strings[index];
}

static decoded_value_type decode_value_type(slice s) {
  decoded_value_type vt = {0, 0};
  reader r = reader_over(s.data, s.len);
  field f;
  while (next_field(&r, &f)) {
    if (f.number == 1) vt.type = (int64_t)f.value;
    if (f.number == 2) vt.unit = (int64_t)f.value;
  }
  return vt;
}

static decoded_function decode_function(slice s) {
  decoded_function fn = {0, 0, 0, 0, 0};
  reader r = reader_over(s.data, s.len);
  field f;
  while (next_field(&r, &f)) {
    switch (f.number) {
    case 1: fn.id = f.value; break;
    case 2: fn.name = (int64_t)f.value; break;
    case 3: fn.system_name = (int64_t)f.value; break;
    case 4: fn.filename = (int64_t)f.value; break;
    case 5: fn.start_line = (int64_t)f.value; break;
    }
  }
  return fn;
}

static decoded_location decode_location(slice s) {
  decoded_location loc = {0, 0, 0, 0, 0, 0};
  reader r = reader_over(s.data, s.len);
  field f, g;
  while (next_field(&r, &f)) {
    if (f.number == 1) loc.id = f.value;
    if (f.number == 2) loc.mapping_id = f.value;
    if (f.number == 3) loc.address = f.value;
    if (f.number != 4) continue;
    loc.line_count++;
    reader line = reader_over(f.data, f.len);
    while (next_field(&line, &g)) {
      if (g.number == 1) loc.function_id = g.value;
      if (g.number == 2) loc.line = (int64_t)g.value;
    }
  }
  return loc;
}

static pprof_label decode_label(const field *outer) {
  pprof_label label = {0, 0, 0, 0};
  reader r = reader_over(outer->data, outer->len);
  field f;
  while (next_field(&r, &f)) {
    if (f.number == 1) label.key = (int64_t)f.value;
    if (f.number == 2) label.str = (int64_t)f.value;
    if (f.number == 3) label.num = (int64_t)f.value;
    if (f.number == 4) label.num_unit = (int64_t)f.value;
  }
  return label;
}

static void decode_sample(slice s, decoded_sample *sample) {
  memset(sample, 0, sizeof(*sample));
  reader r = reader_over(s.data, s.len);
  field f;
  while (next_field(&r, &f)) {
    if (f.number == 1)
      sample->location_count = read_repeated(&f, sample->location_ids, sample->location_count, MAX_SAMPLE_ITEMS);
    if (f.number == 2)
      sample->value_count = read_repeated(&f, sample->values, sample->value_count, MAX_SAMPLE_ITEMS);
    if (f.number == 3 && sample->label_count < MAX_SAMPLE_ITEMS) sample->labels[sample->label_count++] = decode_label(&f);
  }
}

// Encodes builder and decodes the result into d; false if either step failed.
static bool round_trip(pprof_builder *builder, decoded_profile *d) {
  uint8_t *gz = NULL;
  size_t gz_len = 0;
  memset(d, 0, sizeof(*d));
  if (!CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0)) return false;
  decode_profile(gz, gz_len, d);
  free(gz);
  return CHECK(!d->broken);
}

// ---- tests ----

static void test_empty_profile_has_only_the_empty_string(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  decoded_profile d;
  if (round_trip(builder, &d)) {
    CHECK_EQ_INT(d.string_count, 1);
    CHECK_EQ_STR(string_at(&d, 0), "");
    CHECK_EQ_INT(d.samples.count, 0);
    CHECK_EQ_INT(d.functions.count, 0);
    CHECK_EQ_INT(d.locations.count, 0);
    CHECK_EQ_INT(d.mapping_count, 0);
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

static void test_strings_are_interned(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  CHECK_EQ_INT(pprof_cstring(builder, ""), 0);
  CHECK_EQ_INT(pprof_cstring(builder, NULL), 0);
  CHECK_EQ_INT(pprof_cstring(builder, "main"), 1);
  CHECK_EQ_INT(pprof_cstring(builder, "app.rb"), 2);
  CHECK_EQ_INT(pprof_cstring(builder, "main"), 1);
  CHECK_EQ_INT(pprof_string(builder, "app.rb plus more", 6), 2);
  // Embedded NUL bytes are part of the string, not its end.
  CHECK_EQ_INT(pprof_string(builder, "a\0b", 3), 3);
  CHECK_EQ_INT(pprof_string(builder, "a\0c", 3), 4);
  CHECK_EQ_INT(pprof_string(builder, "a", 1), 5);

  decoded_profile d;
  if (round_trip(builder, &d)) {
    CHECK_EQ_INT(d.string_count, 6);
    CHECK_EQ_STR(string_at(&d, 0), "");
    CHECK_EQ_STR(string_at(&d, 1), "main");
    CHECK_EQ_STR(string_at(&d, 2), "app.rb");
    CHECK_EQ_STR(string_at(&d, 5), "a");
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

// Enough strings to grow the hash table and the arena several times.
static void test_many_strings_keep_their_indexes(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  char name[32];
  int wrong_first = 0, wrong_second = 0;
  for (int i = 0; i < MANY_STRINGS; i++) {
    snprintf(name, sizeof(name), "method_%d", i);
    if (pprof_cstring(builder, name) != i + 1) wrong_first++;
  }
  for (int i = 0; i < MANY_STRINGS; i++) {
    snprintf(name, sizeof(name), "method_%d", i);
    if (pprof_cstring(builder, name) != i + 1) wrong_second++;
  }
  CHECK_EQ_INT(wrong_first, 0);
  CHECK_EQ_INT(wrong_second, 0);

  decoded_profile d;
  if (round_trip(builder, &d)) {
    CHECK_EQ_INT(d.string_count, MANY_STRINGS + 1);
    CHECK_EQ_STR(string_at(&d, 1), "method_0");
    CHECK_EQ_STR(string_at(&d, MANY_STRINGS), "method_9999");
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

static void test_functions_and_locations_get_sequential_ids(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  int64_t main_name = pprof_cstring(builder, "Object#main");
  int64_t work_name = pprof_cstring(builder, "Worker#run");
  int64_t file = pprof_cstring(builder, "/app/main.rb");
  CHECK_EQ_INT(pprof_add_function(builder, main_name, file, 3), 1);
  CHECK_EQ_INT(pprof_add_function(builder, work_name, file, 20), 2);
  CHECK_EQ_INT(pprof_add_location(builder, 1, 5), 1);
  CHECK_EQ_INT(pprof_add_location(builder, 2, 22), 2);
  CHECK_EQ_INT(pprof_add_location(builder, 2, 0), 3);

  decoded_profile d;
  if (round_trip(builder, &d) && CHECK_EQ_INT(d.functions.count, 2) && CHECK_EQ_INT(d.locations.count, 3)) {
    decoded_function second = decode_function(d.functions.items[1]);
    CHECK_EQ_INT(second.id, 2);
    CHECK_EQ_STR(string_at(&d, second.name), "Worker#run");
    CHECK_EQ_INT(second.system_name, 0); // none: see pprof_add_function
    CHECK_EQ_STR(string_at(&d, second.filename), "/app/main.rb");
    CHECK_EQ_INT(second.start_line, 20);

    decoded_location first = decode_location(d.locations.items[0]);
    CHECK_EQ_INT(first.id, 1);
    CHECK_EQ_INT(first.function_id, 1);
    CHECK_EQ_INT(first.line, 5);
    CHECK_EQ_INT(first.line_count, 1);
    CHECK_EQ_INT(first.mapping_id, 0);
    CHECK_EQ_INT(first.address, 0);

    decoded_location third = decode_location(d.locations.items[2]);
    CHECK_EQ_INT(third.id, 3);
    CHECK_EQ_INT(third.function_id, 2);
    CHECK_EQ_INT(third.line, 0);
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

static void test_samples_keep_values_and_labels(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  CHECK_EQ_INT(pprof_add_sample_type(builder, "cpu-time", "nanoseconds"), 0);
  CHECK_EQ_INT(pprof_add_sample_type(builder, "cpu-samples", "count"), 0);
  CHECK_EQ_INT(pprof_add_sample_type(builder, "wall-time", "nanoseconds"), 0);
  uint64_t fn = pprof_add_function(builder, pprof_cstring(builder, "f"), 0, 0);
  uint64_t locations[] = {pprof_add_location(builder, fn, 1), pprof_add_location(builder, fn, 2),
                          pprof_add_location(builder, fn, 3)};
  uint64_t leaf_first[] = {locations[2], locations[0], locations[1]};
  int64_t values[] = {10000000, 1, -5};
  pprof_label labels[] = {
      {pprof_cstring(builder, "thread id"), 0, 7, 0},
      {pprof_cstring(builder, "thread name"), pprof_cstring(builder, "worker"), 0, 0},
      {pprof_cstring(builder, "bytes"), 0, 4096, pprof_cstring(builder, "bytes")},
      {pprof_cstring(builder, "zero"), 0, 0, 0},
  };
  CHECK_EQ_INT(pprof_add_sample(builder, leaf_first, 3, values, 3, labels, 4), 0);
  CHECK_EQ_INT(pprof_add_sample(builder, NULL, 0, values, 3, NULL, 0), 0);

  decoded_profile d;
  if (round_trip(builder, &d) && CHECK_EQ_INT(d.sample_types.count, 3) && CHECK_EQ_INT(d.samples.count, 2)) {
    decoded_value_type wall = decode_value_type(d.sample_types.items[2]);
    CHECK_EQ_STR(string_at(&d, wall.type), "wall-time");
    CHECK_EQ_STR(string_at(&d, wall.unit), "nanoseconds");

    decoded_sample sample;
    decode_sample(d.samples.items[0], &sample);
    CHECK_EQ_INT(sample.location_count, 3);
    CHECK_EQ_INT(sample.location_ids[0], 3);
    CHECK_EQ_INT(sample.location_ids[1], 1);
    CHECK_EQ_INT(sample.location_ids[2], 2);
    CHECK_EQ_INT(sample.value_count, 3);
    CHECK_EQ_INT((int64_t)sample.values[0], 10000000);
    CHECK_EQ_INT((int64_t)sample.values[2], -5);
    CHECK_EQ_INT(sample.label_count, 4);
    CHECK_EQ_STR(string_at(&d, sample.labels[0].key), "thread id");
    CHECK_EQ_INT(sample.labels[0].str, 0);
    CHECK_EQ_INT(sample.labels[0].num, 7);
    CHECK_EQ_STR(string_at(&d, sample.labels[1].key), "thread name");
    CHECK_EQ_STR(string_at(&d, sample.labels[1].str), "worker");
    CHECK_EQ_INT(sample.labels[2].num, 4096);
    CHECK_EQ_STR(string_at(&d, sample.labels[2].num_unit), "bytes");
    CHECK_EQ_STR(string_at(&d, sample.labels[3].key), "zero");
    CHECK_EQ_INT(sample.labels[3].num, 0);

    decode_sample(d.samples.items[1], &sample);
    CHECK_EQ_INT(sample.location_count, 0);
    CHECK_EQ_INT(sample.value_count, 3);
    CHECK_EQ_INT(sample.label_count, 0);
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

// ---- renaming label keys ----

// A profile whose label key "endpoint" is also a label value and a function
// name: only its use as a key may change.
static pprof_builder *build_profile_to_rename(void) {
  pprof_builder *builder = pprof_builder_new();
  if (builder == NULL) return NULL;
  pprof_add_sample_type(builder, "cpu-time", "nanoseconds");
  uint64_t fn = pprof_add_function(builder, pprof_cstring(builder, "endpoint"), 0, 0);
  uint64_t location = pprof_add_location(builder, fn, 3);
  int64_t values[] = {250};
  pprof_label labelled[] = {
      {pprof_cstring(builder, "thread id"), 0, 7, 0},
      {pprof_cstring(builder, "endpoint"), pprof_cstring(builder, "GET /users"), 0, 0},
      {pprof_cstring(builder, "kind"), pprof_cstring(builder, "endpoint"), 0, 0},
  };
  pprof_add_sample(builder, &location, 1, values, 1, labelled, 3);
  pprof_add_sample(builder, &location, 1, values, 1, labelled, 1); // no renamed key: copied as it was
  pprof_set_time(builder, 1234, 5678);
  return builder;
}

static void test_rename_label_keys(void) {
  pprof_builder *builder = build_profile_to_rename();
  if (!CHECK(builder != NULL)) return;
  uint8_t *gz = NULL, *renamed = NULL;
  size_t gz_len = 0, renamed_len = 0;
  CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0);
  pprof_rename renames[] = {{"endpoint", "trace endpoint", false}, {"absent", "never", false}};
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(gz, gz_len, renames, 2, 1 << 20, &renamed, &renamed_len), PPROF_RENAMED);
  decoded_profile d;
  memset(&d, 0, sizeof(d));
  if (CHECK(renamed != NULL)) decode_profile(renamed, renamed_len, &d);
  if (CHECK(!d.broken) && CHECK_EQ_INT(d.samples.count, 2) && CHECK_EQ_INT(d.functions.count, 1)) {
    decoded_sample sample;
    decode_sample(d.samples.items[0], &sample);
    CHECK_EQ_INT(sample.label_count, 3);
    CHECK_EQ_STR(string_at(&d, sample.labels[0].key), "thread id");
    CHECK_EQ_INT(sample.labels[0].num, 7);
    CHECK_EQ_STR(string_at(&d, sample.labels[1].key), "trace endpoint");
    CHECK_EQ_STR(string_at(&d, sample.labels[1].str), "GET /users");
    CHECK_EQ_STR(string_at(&d, sample.labels[2].key), "kind");
    CHECK_EQ_STR(string_at(&d, sample.labels[2].str), "endpoint");
    CHECK_EQ_INT(sample.location_count, 1);
    CHECK_EQ_INT((int64_t)sample.values[0], 250);
    decode_sample(d.samples.items[1], &sample);
    CHECK_EQ_INT(sample.label_count, 1);
    CHECK_EQ_STR(string_at(&d, sample.labels[0].key), "thread id");
    decoded_function function = decode_function(d.functions.items[0]);
    CHECK_EQ_STR(string_at(&d, function.name), "endpoint");
    CHECK_EQ_INT(d.time_nanos, 1234);
    CHECK_EQ_INT(d.duration_nanos, 5678);
  }
  free_decoded(&d);
  free(renamed);

  // No old name in the profile: nothing is written.
  pprof_rename absent[] = {{"absent", "never", false}};
  renamed = (uint8_t *)1;
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(gz, gz_len, absent, 1, 1 << 20, &renamed, &renamed_len),
               PPROF_NOTHING_TO_RENAME);
  CHECK(renamed == NULL);
  // Larger than the bound once inflated, truncated, or not gzip at all.
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(gz, gz_len, renames, 1, 16, &renamed, &renamed_len),
               PPROF_RENAME_MALFORMED);
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(gz, gz_len / 2, renames, 1, 1 << 20, &renamed, &renamed_len),
               PPROF_RENAME_MALFORMED);
  const uint8_t junk[] = "not a profile";
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(junk, sizeof(junk), renames, 1, 1 << 20, &renamed, &renamed_len),
               PPROF_RENAME_MALFORMED);
  CHECK(renamed == NULL);
  free(gz);
  pprof_builder_free(builder);
}

// A numeric rename: hex string values of 1 to 16 digits become the label's
// number, bit for bit (a span id above 2^63 reads back negative, as in
// Datadog's profiler); a value that is not such a string stays a string
// under the new key; a string also used elsewhere keeps its meaning there.
static void test_rename_hex_values_to_numbers(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  pprof_add_sample_type(builder, "cpu-time", "nanoseconds");
  uint64_t fn = pprof_add_function(builder, pprof_cstring(builder, "00000000000000ff"), 0, 0);
  uint64_t location = pprof_add_location(builder, fn, 3);
  int64_t values[] = {250};
  int64_t span = pprof_cstring(builder, "span_id"), root = pprof_cstring(builder, "local_root_span_id");
  pprof_label big[] = {{span, pprof_cstring(builder, "fedcba9876543210"), 0, 0},
                       {root, pprof_cstring(builder, "00000000000000ff"), 0, 0},
                       {pprof_cstring(builder, "trace_id"), pprof_cstring(builder, "4bf92f3577b34da6a3ce929d0e0e4736"), 0, 0}};
  pprof_label odd[] = {{span, pprof_cstring(builder, "not hex"), 0, 0},
                       {root, pprof_cstring(builder, "11112222333344445"), 0, 0}}; // 17 digits
  pprof_add_sample(builder, &location, 1, values, 1, big, 3);
  pprof_add_sample(builder, &location, 1, values, 1, odd, 2);
  uint8_t *gz = NULL, *renamed = NULL;
  size_t gz_len = 0, renamed_len = 0;
  CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0);
  pprof_rename renames[] = {{"span_id", "span id", true}, {"local_root_span_id", "local root span id", true}};
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(gz, gz_len, renames, 2, 1 << 20, &renamed, &renamed_len), PPROF_RENAMED);
  decoded_profile d;
  memset(&d, 0, sizeof(d));
  if (CHECK(renamed != NULL)) decode_profile(renamed, renamed_len, &d);
  if (CHECK(!d.broken) && CHECK_EQ_INT(d.samples.count, 2)) {
    decoded_sample sample;
    decode_sample(d.samples.items[0], &sample);
    CHECK_EQ_INT(sample.label_count, 3);
    CHECK_EQ_STR(string_at(&d, sample.labels[0].key), "span id");
    CHECK_EQ_INT(sample.labels[0].str, 0);
    CHECK(sample.labels[0].num == (int64_t)0xfedcba9876543210ULL);
    CHECK_EQ_STR(string_at(&d, sample.labels[1].key), "local root span id");
    CHECK_EQ_INT(sample.labels[1].str, 0);
    CHECK_EQ_INT(sample.labels[1].num, 255);
    CHECK_EQ_STR(string_at(&d, sample.labels[2].key), "trace_id");
    CHECK_EQ_STR(string_at(&d, sample.labels[2].str), "4bf92f3577b34da6a3ce929d0e0e4736");
    decode_sample(d.samples.items[1], &sample);
    CHECK_EQ_INT(sample.label_count, 2);
    CHECK_EQ_STR(string_at(&d, sample.labels[0].key), "span id");
    CHECK_EQ_STR(string_at(&d, sample.labels[0].str), "not hex");
    CHECK_EQ_STR(string_at(&d, sample.labels[1].key), "local root span id");
    CHECK_EQ_STR(string_at(&d, sample.labels[1].str), "11112222333344445");
    decoded_function function = decode_function(d.functions.items[0]);
    CHECK_EQ_STR(string_at(&d, function.name), "00000000000000ff");
  }
  free_decoded(&d);
  free(renamed);
  free(gz);
  pprof_builder_free(builder);
}

// gzips len bytes into a malloc'd buffer; *gz_len is its size.
static uint8_t *gzip_bytes(const uint8_t *raw, size_t len, size_t *gz_len) {
  uLongf gz_cap = compressBound(len) + 32;
  uint8_t *gz = malloc(gz_cap);
  z_stream stream;
  memset(&stream, 0, sizeof(stream));
  if (gz == NULL || deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(gz);
    return NULL;
  }
  stream.next_in = (Bytef *)raw;
  stream.avail_in = (uInt)len;
  stream.next_out = gz;
  stream.avail_out = (uInt)gz_cap;
  int rc = deflate(&stream, Z_FINISH);
  *gz_len = gz_cap - stream.avail_out;
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) {
    free(gz);
    return NULL;
  }
  return gz;
}

// Protobuf cut short inside a sample: refused, never read past the end.
static void test_rename_refuses_truncated_protobuf(void) {
  // field 2 (sample), LEN 10, then only 2 bytes of payload.
  const uint8_t raw[] = {(2 << 3) | 2, 10, (3 << 3) | 2, 2};
  size_t gz_len = 0;
  uint8_t *gz = gzip_bytes(raw, sizeof(raw), &gz_len);
  if (!CHECK(gz != NULL)) return;
  uint8_t *renamed = NULL;
  size_t renamed_len = 0;
  pprof_rename renames[] = {{"endpoint", "trace endpoint", false}};
  CHECK_EQ_INT(pprof_rename_label_keys_gzip(gz, gz_len, renames, 1, 1 << 20, &renamed, &renamed_len),
               PPROF_RENAME_MALFORMED);
  CHECK(renamed == NULL);
  free(gz);
}

// Every byte of a real profile's protobuf set to a few other values in turn:
// each result is one of the documented ones, and the sanitizers see no read
// out of bounds.
static void test_rename_survives_corrupt_bytes(void) {
  pprof_builder *builder = build_profile_to_rename();
  if (!CHECK(builder != NULL)) return;
  uint8_t *gz = NULL;
  size_t gz_len = 0, raw_len = 0;
  CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0);
  uint8_t *raw = gunzip(gz, gz_len, &raw_len);
  const uint8_t replacements[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
  // A numeric rename too: its value lookup must survive corrupt indexes.
  pprof_rename renames[] = {{"endpoint", "trace endpoint", false}, {"kind", "kind number", true}};
  int unexpected = 0;
  for (size_t i = 0; raw != NULL && i < raw_len; i++) {
    uint8_t original = raw[i];
    for (size_t r = 0; r < sizeof(replacements); r++) {
      raw[i] = replacements[r];
      size_t corrupt_len = 0, renamed_len = 0;
      uint8_t *corrupt = gzip_bytes(raw, raw_len, &corrupt_len), *renamed = NULL;
      if (corrupt == NULL) continue;
      enum pprof_rename_result rc =
          pprof_rename_label_keys_gzip(corrupt, corrupt_len, renames, 2, 1 << 20, &renamed, &renamed_len);
      if (rc != PPROF_RENAMED && rc != PPROF_NOTHING_TO_RENAME && rc != PPROF_RENAME_MALFORMED) unexpected++;
      if ((rc == PPROF_RENAMED) != (renamed != NULL)) unexpected++;
      free(renamed);
      free(corrupt);
    }
    raw[i] = original;
  }
  CHECK(raw != NULL);
  CHECK_EQ_INT(unexpected, 0);
  free(raw);
  free(gz);
  pprof_builder_free(builder);
}

static void test_header_fields(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  CHECK_EQ_INT(pprof_add_sample_type(builder, "cpu-time", "nanoseconds"), 0);
  CHECK_EQ_INT(pprof_set_period(builder, "cpu-time", "nanoseconds", 10000000), 0);
  CHECK_EQ_INT(pprof_set_default_sample_type(builder, "cpu-time"), 0);
  CHECK_EQ_INT(pprof_add_comment(builder, "sonde 0.1.0"), 0);
  CHECK_EQ_INT(pprof_add_comment(builder, "rate: 100 Hz"), 0);
  pprof_set_time(builder, 1700000000123456789, 2500000000);

  decoded_profile d;
  if (round_trip(builder, &d)) {
    CHECK_EQ_INT(d.time_nanos, 1700000000123456789);
    CHECK_EQ_INT(d.duration_nanos, 2500000000);
    CHECK_EQ_INT(d.period, 10000000);
    CHECK(d.has_period_type);
    decoded_value_type period_type = decode_value_type(d.period_type);
    CHECK_EQ_STR(string_at(&d, period_type.type), "cpu-time");
    CHECK_EQ_STR(string_at(&d, period_type.unit), "nanoseconds");
    CHECK_EQ_STR(string_at(&d, d.default_sample_type), "cpu-time");
    CHECK_EQ_INT(d.comment_count, 2);
    CHECK_EQ_STR(string_at(&d, (int64_t)d.comments[0]), "sonde 0.1.0");
    CHECK_EQ_STR(string_at(&d, (int64_t)d.comments[1]), "rate: 100 Hz");
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

// Builds a profile of count samples over a three-frame stack.
static pprof_builder *build_profile_with_samples(int count) {
  pprof_builder *builder = pprof_builder_new();
  if (!builder) return NULL;
  pprof_add_sample_type(builder, "cpu-time", "nanoseconds");
  pprof_add_sample_type(builder, "cpu-samples", "count");
  int64_t file = pprof_cstring(builder, "/app/loop.rb");
  uint64_t stack[3];
  for (int i = 0; i < 3; i++) {
    char name[32]; // room for any int: gcc 14 checks it under -Werror
    snprintf(name, sizeof(name), "level%d", i);
    stack[i] = pprof_add_location(builder, pprof_add_function(builder, pprof_cstring(builder, name), file, i + 1),
                                  10 + i);
  }
  pprof_label label = {pprof_cstring(builder, "thread id"), 0, 1, 0};
  for (int i = 0; i < count; i++) {
    int64_t values[] = {i, 1};
    if (pprof_add_sample(builder, stack, 3, values, 2, &label, 1) != 0) {
      pprof_builder_free(builder);
      return NULL;
    }
  }
  pprof_set_time(builder, 1, 2);
  return builder;
}

static void test_many_samples(void) {
  pprof_builder *builder = build_profile_with_samples(MANY_SAMPLES);
  if (!CHECK(builder != NULL)) return;
  decoded_profile d;
  if (round_trip(builder, &d) && CHECK_EQ_INT(d.samples.count, MANY_SAMPLES)) {
    int64_t sum = 0, count = 0;
    int bad_stacks = 0;
    decoded_sample sample;
    for (size_t i = 0; i < d.samples.count; i++) {
      decode_sample(d.samples.items[i], &sample);
      sum += (int64_t)sample.values[0];
      count += (int64_t)sample.values[1];
      if (sample.location_count != 3 || sample.location_ids[2] != 3) bad_stacks++;
    }
    CHECK_EQ_INT(sum, (int64_t)MANY_SAMPLES * (MANY_SAMPLES - 1) / 2);
    CHECK_EQ_INT(count, MANY_SAMPLES);
    CHECK_EQ_INT(bad_stacks, 0);
    decode_sample(d.samples.items[MANY_SAMPLES - 1], &sample);
    CHECK_EQ_INT(sample.values[0], MANY_SAMPLES - 1);
  }
  free_decoded(&d);
  pprof_builder_free(builder);
}

static void test_encoding_is_repeatable(void) {
  pprof_builder *builder = build_profile_with_samples(1000);
  if (!CHECK(builder != NULL)) return;
  uint8_t *first = NULL, *second = NULL, *third = NULL;
  size_t first_len = 0, second_len = 0, third_len = 0;
  CHECK_EQ_INT(pprof_encode_gzip(builder, &first, &first_len), 0);
  CHECK_EQ_INT(pprof_encode_gzip(builder, &second, &second_len), 0);
  CHECK_EQ_INT(first_len, second_len);
  CHECK(first && second && first_len == second_len && memcmp(first, second, first_len) == 0);

  // The builder stays usable after encoding.
  int64_t values[] = {5, 1};
  uint64_t leaf = 1;
  CHECK_EQ_INT(pprof_add_sample(builder, &leaf, 1, values, 2, NULL, 0), 0);
  CHECK_EQ_INT(pprof_encode_gzip(builder, &third, &third_len), 0);
  decoded_profile d;
  decode_profile(third, third_len, &d);
  CHECK(!d.broken);
  CHECK_EQ_INT(d.samples.count, 1001);
  free_decoded(&d);
  free(first);
  free(second);
  free(third);
  pprof_builder_free(builder);
}

static void test_free_accepts_null(void) {
  pprof_builder_free(NULL);
  CHECK(1);
}

// The real consumer: go tool pprof must read what we write.
static void test_go_tool_pprof_reads_the_profile(void) {
  if (system("command -v go > /dev/null 2>&1") != 0) {
    printf("note: go is not on PATH; skipping the go tool pprof check\n");
    return;
  }
  pprof_builder *builder = build_profile_with_samples(100);
  if (!CHECK(builder != NULL)) return;
  pprof_set_period(builder, "cpu-time", "nanoseconds", 10000000);
  pprof_add_comment(builder, "written by pprof_test");
  uint8_t *gz = NULL;
  size_t gz_len = 0;
  CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0);

  char path[] = "/tmp/sonde_pprof_test_XXXXXX";
  int fd = mkstemp(path);
  if (CHECK(fd >= 0)) {
    CHECK_EQ_INT(write(fd, gz, gz_len), (long long)gz_len);
    close(fd);
    char command[SHELL_COMMAND_SIZE];
    snprintf(command, sizeof(command), "go tool pprof -raw '%s' > /dev/null 2>&1", path);
    CHECK_EQ_INT(system(command), 0);
    snprintf(command, sizeof(command), "go tool pprof -raw '%s' 2>&1 | grep -q 'level2'", path);
    CHECK_EQ_INT(system(command), 0);
    unlink(path);
  }
  free(gz);
  pprof_builder_free(builder);
}

int main(void) {
  RUN(test_empty_profile_has_only_the_empty_string);
  RUN(test_strings_are_interned);
  RUN(test_many_strings_keep_their_indexes);
  RUN(test_functions_and_locations_get_sequential_ids);
  RUN(test_samples_keep_values_and_labels);
  RUN(test_header_fields);
  RUN(test_rename_label_keys);
  RUN(test_rename_hex_values_to_numbers);
  RUN(test_rename_refuses_truncated_protobuf);
  RUN(test_rename_survives_corrupt_bytes);
  RUN(test_many_samples);
  RUN(test_encoding_is_repeatable);
  RUN(test_free_accepts_null);
  RUN(test_go_tool_pprof_reads_the_profile);
  return test_summary("pprof");
}
