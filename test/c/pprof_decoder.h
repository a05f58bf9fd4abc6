// pprof_decoder.h: an independent reader of gzip'd pprof profiles for the C
// unit tests (pprof_builder_test, pprof_rename_test). It gunzips with zlib
// and walks the protobuf with a reader written here, not Sonde's
// (pprof_wire.c), so a field written under the wrong number or wire type
// shows up as a failure rather than being read back the same wrong way.
//
// Header-only and static inline, like test_harness.h: a test that does not
// use one of its functions still compiles under -Werror.
#ifndef SONDE_TEST_PPROF_DECODER_H
#define SONDE_TEST_PPROF_DECODER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof_builder.h"
#include "test_harness.h"

#define GUNZIP_WINDOW_BITS (15 + 16) // 32 KiB window, gzip wrapper expected
#define GUNZIP_INITIAL_SIZE 4096
#define DECODER_WIRE_VARINT 0
#define DECODER_WIRE_FIXED64 1
#define DECODER_WIRE_LEN 2
#define DECODER_WIRE_FIXED32 5
#define FIXED64_SIZE 8
#define FIXED32_SIZE 4
#define VARINT_MAX_BYTES 10
#define MAX_SAMPLE_ITEMS 16

// ---- gunzip ----

// Returns a malloc'd copy of the inflated data, or NULL on any zlib error.
static inline uint8_t *gunzip(const uint8_t *data, size_t len, size_t *out_len) {
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

static inline uint64_t read_varint(reader *r) {
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

static inline reader reader_over(const uint8_t *data, size_t len) {
  reader r = {data, data + len, false};
  return r;
}

// Reads the next field; returns false at the end or when the input is broken.
static inline bool next_field(reader *r, field *f) {
  if (r->broken || r->p >= r->end) return false;
  uint64_t tag = read_varint(r);
  f->number = (uint32_t)(tag >> 3);
  f->wire = (int)(tag & 7);
  f->data = NULL;
  f->len = 0;
  f->value = 0;
  size_t left;
  switch (f->wire) {
  case DECODER_WIRE_VARINT:
    f->value = read_varint(r);
    break;
  case DECODER_WIRE_LEN:
    f->len = (size_t)read_varint(r);
    left = (size_t)(r->end - r->p);
    if (f->len > left) r->broken = true;
    f->data = r->p;
    if (!r->broken) r->p += f->len;
    break;
  case DECODER_WIRE_FIXED64:
  case DECODER_WIRE_FIXED32:
    left = (size_t)(r->end - r->p);
    if (left < (f->wire == DECODER_WIRE_FIXED64 ? FIXED64_SIZE : FIXED32_SIZE)) r->broken = true;
    else r->p += f->wire == DECODER_WIRE_FIXED64 ? FIXED64_SIZE : FIXED32_SIZE;
    break;
  default:
    r->broken = true;
  }
  return !r->broken;
}

// Reads a repeated integer field that may be packed (LEN) or not (VARINT).
static inline size_t read_repeated(const field *f, uint64_t *into, size_t count, size_t max) {
  if (f->wire == DECODER_WIRE_VARINT) {
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

static inline void slice_list_push(slice_list *list, const field *f, bool *broken) {
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

static inline void push_string(decoded_profile *d, const field *f) {
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

static inline void decode_profile_field(decoded_profile *d, const field *f) {
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
static inline void decode_profile(const uint8_t *gz, size_t gz_len, decoded_profile *d) {
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

static inline void free_decoded(decoded_profile *d) {
  for (size_t i = 0; i < d->string_count; i++) free(d->strings[i]);
  free(d->strings);
  free(d->sample_types.items);
  free(d->samples.items);
  free(d->locations.items);
  free(d->functions.items);
  free(d->raw);
}

static inline const char *string_at(const decoded_profile *d, int64_t index) {
  if (index < 0 || (size_t)index >= d->string_count) return "<string index out of range>";
  return d->strings[index];
}

static inline decoded_value_type decode_value_type(slice s) {
  decoded_value_type vt = {0, 0};
  reader r = reader_over(s.data, s.len);
  field f;
  while (next_field(&r, &f)) {
    if (f.number == 1) vt.type = (int64_t)f.value;
    if (f.number == 2) vt.unit = (int64_t)f.value;
  }
  return vt;
}

static inline decoded_function decode_function(slice s) {
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

static inline decoded_location decode_location(slice s) {
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

static inline pprof_label decode_label(const field *outer) {
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

static inline void decode_sample(slice s, decoded_sample *sample) {
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
static inline bool round_trip(pprof_builder *builder, decoded_profile *d) {
  uint8_t *gz = NULL;
  size_t gz_len = 0;
  memset(d, 0, sizeof(*d));
  if (!CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0)) return false;
  decode_profile(gz, gz_len, d);
  free(gz);
  return CHECK(!d->broken);
}

#endif
