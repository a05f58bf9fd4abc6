// pprof.c: encodes a profile as perftools.profiles.Profile (protobuf) and
// gzips it with zlib.
//
// Constraints: pure C, no Ruby objects and no Ruby API, no global state. The
// recorder serializes one slot with the GVL released while sampling goes on
// in the other, so nothing here may call into Ruby. It must never take the
// host process down either: every allocation and every zlib call is checked
// and failure is returned to the caller.
//
// How: each function, location and sample is encoded into its own growable
// buffer the moment it is added, so the builder never holds the data twice.
// Every add computes the exact encoded size first and reserves it, so running
// out of memory leaves no half-written message behind. Strings are interned
// in an open-addressing hash table (FNV-1a, linear probing) whose bytes live
// in one arena. pprof_encode_gzip streams the profile's fields, in the order
// of profile.proto, through zlib; the raw protobuf is never built in full.
#define ZLIB_CONST
#include "pprof.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

// Protobuf wire format: a tag is (field number << 3) | wire type.
enum wire_type { WIRE_VARINT = 0, WIRE_LEN = 2 };
#define TAG_TYPE_BITS 3
#define VARINT_PAYLOAD_BITS 7
#define VARINT_PAYLOAD_MASK 0x7fu
#define VARINT_CONTINUE 0x80u
// A tag of a field below 16 plus a 64-bit length fits in 1 + 10 bytes.
#define MAX_LEN_HEADER_SIZE 11

// Field numbers of profile.proto (package perftools.profiles).
enum profile_field {
  PROFILE_SAMPLE_TYPE = 1,
  PROFILE_SAMPLE = 2,
  PROFILE_LOCATION = 4,
  PROFILE_FUNCTION = 5,
  PROFILE_STRING_TABLE = 6,
  PROFILE_TIME_NANOS = 9,
  PROFILE_DURATION_NANOS = 10,
  PROFILE_PERIOD_TYPE = 11,
  PROFILE_PERIOD = 12,
  PROFILE_COMMENT = 13,
  PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum value_type_field { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum sample_field { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum label_field { LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3, LABEL_NUM_UNIT = 4 };
enum location_field { LOCATION_ID = 1, LOCATION_LINE = 4 };
enum line_field { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum function_field {
  FUNCTION_ID = 1,
  FUNCTION_NAME = 2,
  FUNCTION_SYSTEM_NAME = 3,
  FUNCTION_FILENAME = 4,
  FUNCTION_START_LINE = 5,
};

#define FNV_OFFSET_BASIS 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

#define INITIAL_BUFFER_CAPACITY 256
// Slot counts stay powers of two so a hash maps to a slot with a mask.
#define INITIAL_STRING_SLOTS 256
// The table grows when it would become more than half full: linear probing
// degrades quickly beyond that.
#define STRING_TABLE_MAX_LOAD_DIVISOR 2

// gzip: a 32 KiB window (15 bits); adding 16 asks zlib for a gzip wrapper
// instead of a zlib one. Memory level 8 is zlib's own default.
#define GZIP_WINDOW_BITS (15 + 16)
#define GZIP_MEM_LEVEL 8
// Small pieces (string-table headers) are gathered before they reach zlib so
// that deflate is called per chunk, not per string.
#define STAGING_SIZE (64 * 1024)
// zlib counts bytes in uInt; never hand it more than this at once.
#define MAX_DEFLATE_CHUNK (1u << 30)
// pprof data compresses well; start the output at a quarter of the input and
// let it grow if that guess is wrong.
#define EXPECTED_COMPRESSION_RATIO 4

typedef struct {
  uint8_t *data;
  size_t len;
  size_t cap;
} byte_buffer;

typedef struct {
  size_t offset; // into the builder's string arena
  size_t len;
  uint64_t hash;
} string_entry;

struct pprof_builder {
  byte_buffer string_bytes;
  string_entry *strings;
  size_t string_count;
  size_t string_capacity;
  size_t *slots; // string index + 1; 0 marks an empty slot
  size_t slot_count;

  byte_buffer sample_types; // encoded PROFILE_SAMPLE_TYPE fields
  byte_buffer samples;      // encoded PROFILE_SAMPLE fields
  byte_buffer locations;    // encoded PROFILE_LOCATION fields
  byte_buffer functions;    // encoded PROFILE_FUNCTION fields
  byte_buffer comments;     // encoded PROFILE_COMMENT fields
  uint64_t function_count;
  uint64_t location_count;

  int64_t time_nanos;
  int64_t duration_nanos;
  bool has_period_type;
  int64_t period_type;
  int64_t period_unit;
  int64_t period;
  int64_t default_sample_type;
};

// ---- growable byte buffers ----

// Makes room for extra more bytes. Returns 0, or -1 when out of memory (the
// buffer is then unchanged).
static int buffer_reserve(byte_buffer *buffer, size_t extra) {
  if (extra <= buffer->cap - buffer->len) return 0;
  if (extra > SIZE_MAX - buffer->len) return -1;
  size_t needed = buffer->len + extra;
  size_t cap = buffer->cap ? buffer->cap : INITIAL_BUFFER_CAPACITY;
  while (cap < needed) cap = cap > SIZE_MAX / 2 ? needed : cap * 2;
  uint8_t *data = realloc(buffer->data, cap);
  if (!data) return -1;
  buffer->data = data;
  buffer->cap = cap;
  return 0;
}

static void buffer_release(byte_buffer *buffer) {
  free(buffer->data);
  buffer->data = NULL;
  buffer->len = buffer->cap = 0;
}

// ---- protobuf encoding ----
// The put_* functions write into space the caller reserved beforehand with
// the matching *_size functions, so they cannot fail.

static size_t varint_size(uint64_t value) {
  size_t size = 1;
  while (value >= VARINT_CONTINUE) {
    value >>= VARINT_PAYLOAD_BITS;
    size++;
  }
  return size;
}

static uint64_t tag_of(uint32_t field, enum wire_type type) {
  return ((uint64_t)field << TAG_TYPE_BITS) | (uint64_t)type;
}

static size_t varint_field_size(uint32_t field, uint64_t value) {
  return varint_size(tag_of(field, WIRE_VARINT)) + varint_size(value);
}

// proto3 leaves fields at their zero value out of the encoding.
static size_t optional_varint_field_size(uint32_t field, uint64_t value) {
  return value ? varint_field_size(field, value) : 0;
}

static size_t len_field_size(uint32_t field, size_t len) {
  return varint_size(tag_of(field, WIRE_LEN)) + varint_size(len) + len;
}

static void put_varint(byte_buffer *buffer, uint64_t value) {
  while (value >= VARINT_CONTINUE) {
    buffer->data[buffer->len++] = (uint8_t)((value & VARINT_PAYLOAD_MASK) | VARINT_CONTINUE);
    value >>= VARINT_PAYLOAD_BITS;
  }
  buffer->data[buffer->len++] = (uint8_t)value;
}

static void put_varint_field(byte_buffer *buffer, uint32_t field, uint64_t value) {
  put_varint(buffer, tag_of(field, WIRE_VARINT));
  put_varint(buffer, value);
}

static void put_optional_varint_field(byte_buffer *buffer, uint32_t field, uint64_t value) {
  if (value) put_varint_field(buffer, field, value);
}

// Writes the tag and length of a length-delimited field; its len bytes of
// payload must follow.
static void put_len_header(byte_buffer *buffer, uint32_t field, size_t len) {
  put_varint(buffer, tag_of(field, WIRE_LEN));
  put_varint(buffer, len);
}

static void put_bytes(byte_buffer *buffer, const void *data, size_t len) {
  if (len == 0) return; // data may be NULL then, which memcpy does not allow
  memcpy(buffer->data + buffer->len, data, len);
  buffer->len += len;
}

// ---- messages ----

static size_t value_type_size(int64_t type, int64_t unit) {
  return optional_varint_field_size(VALUE_TYPE_TYPE, (uint64_t)type) +
         optional_varint_field_size(VALUE_TYPE_UNIT, (uint64_t)unit);
}

static void put_value_type(byte_buffer *buffer, uint32_t field, int64_t type, int64_t unit) {
  put_len_header(buffer, field, value_type_size(type, unit));
  put_optional_varint_field(buffer, VALUE_TYPE_TYPE, (uint64_t)type);
  put_optional_varint_field(buffer, VALUE_TYPE_UNIT, (uint64_t)unit);
}

// A numeric label always carries its num, even 0, so that it cannot be
// mistaken for a label that lacks a value.
static size_t label_size(const pprof_label *label) {
  size_t size = optional_varint_field_size(LABEL_KEY, (uint64_t)label->key);
  if (label->str) return size + varint_field_size(LABEL_STR, (uint64_t)label->str);
  return size + varint_field_size(LABEL_NUM, (uint64_t)label->num) +
         optional_varint_field_size(LABEL_NUM_UNIT, (uint64_t)label->num_unit);
}

static void put_label(byte_buffer *buffer, const pprof_label *label) {
  put_len_header(buffer, SAMPLE_LABEL, label_size(label));
  put_optional_varint_field(buffer, LABEL_KEY, (uint64_t)label->key);
  if (label->str) {
    put_varint_field(buffer, LABEL_STR, (uint64_t)label->str);
  } else {
    put_varint_field(buffer, LABEL_NUM, (uint64_t)label->num);
    put_optional_varint_field(buffer, LABEL_NUM_UNIT, (uint64_t)label->num_unit);
  }
}

static size_t packed_ids_size(const uint64_t *ids, size_t count) {
  size_t size = 0;
  for (size_t i = 0; i < count; i++) size += varint_size(ids[i]);
  return size;
}

static size_t packed_values_size(const int64_t *values, size_t count) {
  size_t size = 0;
  for (size_t i = 0; i < count; i++) size += varint_size((uint64_t)values[i]);
  return size;
}

static size_t sample_size(const uint64_t *location_ids, size_t location_count, const int64_t *values,
                          size_t value_count, const pprof_label *labels, size_t label_count) {
  size_t size = 0;
  if (location_count) size += len_field_size(SAMPLE_LOCATION_ID, packed_ids_size(location_ids, location_count));
  if (value_count) size += len_field_size(SAMPLE_VALUE, packed_values_size(values, value_count));
  for (size_t i = 0; i < label_count; i++) size += len_field_size(SAMPLE_LABEL, label_size(&labels[i]));
  return size;
}

static void put_sample(byte_buffer *buffer, size_t size, const uint64_t *location_ids, size_t location_count,
                       const int64_t *values, size_t value_count, const pprof_label *labels,
                       size_t label_count) {
  put_len_header(buffer, PROFILE_SAMPLE, size);
  if (location_count) {
    put_len_header(buffer, SAMPLE_LOCATION_ID, packed_ids_size(location_ids, location_count));
    for (size_t i = 0; i < location_count; i++) put_varint(buffer, location_ids[i]);
  }
  if (value_count) {
    put_len_header(buffer, SAMPLE_VALUE, packed_values_size(values, value_count));
    for (size_t i = 0; i < value_count; i++) put_varint(buffer, (uint64_t)values[i]);
  }
  for (size_t i = 0; i < label_count; i++) put_label(buffer, &labels[i]);
}

// ---- the string table ----

static uint64_t fnv1a(const char *s, size_t len) {
  uint64_t hash = FNV_OFFSET_BASIS;
  for (size_t i = 0; i < len; i++) {
    hash ^= (uint8_t)s[i];
    hash *= FNV_PRIME;
  }
  return hash;
}

// The arena stays NULL while only empty strings are interned, hence the
// check: pointer arithmetic on NULL is undefined.
static const uint8_t *string_data(const pprof_builder *builder, const string_entry *entry) {
  return entry->len ? builder->string_bytes.data + entry->offset : NULL;
}

static bool string_matches(const pprof_builder *builder, const string_entry *entry, const char *s, size_t len,
                           uint64_t hash) {
  return entry->hash == hash && entry->len == len && (len == 0 || memcmp(string_data(builder, entry), s, len) == 0);
}

// Returns the slot that holds s, or the empty slot where s would go.
static size_t find_string_slot(const pprof_builder *builder, const char *s, size_t len, uint64_t hash) {
  size_t mask = builder->slot_count - 1;
  size_t slot = (size_t)hash & mask;
  while (builder->slots[slot]) {
    if (string_matches(builder, &builder->strings[builder->slots[slot] - 1], s, len, hash)) return slot;
    slot = (slot + 1) & mask;
  }
  return slot;
}

static int grow_string_slots(pprof_builder *builder) {
  if (builder->slot_count > SIZE_MAX / 2 / sizeof(size_t)) return -1;
  size_t slot_count = builder->slot_count * 2;
  size_t *slots = calloc(slot_count, sizeof(size_t));
  if (!slots) return -1;
  size_t mask = slot_count - 1;
  for (size_t i = 0; i < builder->string_count; i++) {
    size_t slot = (size_t)builder->strings[i].hash & mask;
    while (slots[slot]) slot = (slot + 1) & mask;
    slots[slot] = i + 1;
  }
  free(builder->slots);
  builder->slots = slots;
  builder->slot_count = slot_count;
  return 0;
}

static int reserve_string_entry(pprof_builder *builder) {
  if (builder->string_count < builder->string_capacity) return 0;
  size_t capacity = builder->string_capacity ? builder->string_capacity * 2 : INITIAL_STRING_SLOTS;
  if (capacity > SIZE_MAX / sizeof(string_entry)) return -1;
  string_entry *strings = realloc(builder->strings, capacity * sizeof(string_entry));
  if (!strings) return -1;
  builder->strings = strings;
  builder->string_capacity = capacity;
  return 0;
}

// Makes sure one more string fits everywhere before anything changes, so a
// failure leaves the table as it was.
static int reserve_new_string(pprof_builder *builder, size_t len) {
  if (buffer_reserve(&builder->string_bytes, len) != 0) return -1;
  if (reserve_string_entry(builder) != 0) return -1;
  if ((builder->string_count + 1) * STRING_TABLE_MAX_LOAD_DIVISOR > builder->slot_count)
    return grow_string_slots(builder);
  return 0;
}

int64_t pprof_string(pprof_builder *builder, const char *s, size_t len) {
  if (!s) len = 0; // a NULL string is taken as the empty string
  uint64_t hash = fnv1a(s, len);
  size_t slot = find_string_slot(builder, s, len, hash);
  if (builder->slots[slot]) return (int64_t)(builder->slots[slot] - 1);

  size_t slots_before = builder->slot_count;
  if (reserve_new_string(builder, len) != 0) return -1;
  if (builder->slot_count != slots_before) slot = find_string_slot(builder, s, len, hash);

  string_entry *entry = &builder->strings[builder->string_count];
  entry->offset = builder->string_bytes.len;
  entry->len = len;
  entry->hash = hash;
  put_bytes(&builder->string_bytes, s, len);
  builder->slots[slot] = ++builder->string_count;
  return (int64_t)(builder->string_count - 1);
}

int64_t pprof_cstring(pprof_builder *builder, const char *s) {
  return pprof_string(builder, s, s ? strlen(s) : 0);
}

// ---- the builder ----

pprof_builder *pprof_builder_new(void) {
  pprof_builder *builder = calloc(1, sizeof(pprof_builder));
  if (!builder) return NULL;
  builder->slots = calloc(INITIAL_STRING_SLOTS, sizeof(size_t));
  if (!builder->slots) {
    free(builder);
    return NULL;
  }
  builder->slot_count = INITIAL_STRING_SLOTS;
  // pprof requires string_table[0] == "".
  if (pprof_string(builder, "", 0) != 0) {
    pprof_builder_free(builder);
    return NULL;
  }
  return builder;
}

void pprof_builder_free(pprof_builder *builder) {
  if (!builder) return;
  buffer_release(&builder->string_bytes);
  free(builder->strings);
  free(builder->slots);
  buffer_release(&builder->sample_types);
  buffer_release(&builder->samples);
  buffer_release(&builder->locations);
  buffer_release(&builder->functions);
  buffer_release(&builder->comments);
  free(builder);
}

int pprof_add_sample_type(pprof_builder *builder, const char *type, const char *unit) {
  int64_t type_index = pprof_cstring(builder, type);
  int64_t unit_index = pprof_cstring(builder, unit);
  if (type_index < 0 || unit_index < 0) return -1;
  size_t size = len_field_size(PROFILE_SAMPLE_TYPE, value_type_size(type_index, unit_index));
  if (buffer_reserve(&builder->sample_types, size) != 0) return -1;
  put_value_type(&builder->sample_types, PROFILE_SAMPLE_TYPE, type_index, unit_index);
  return 0;
}

int pprof_set_period(pprof_builder *builder, const char *type, const char *unit, int64_t period) {
  int64_t type_index = pprof_cstring(builder, type);
  int64_t unit_index = pprof_cstring(builder, unit);
  if (type_index < 0 || unit_index < 0) return -1;
  builder->has_period_type = true;
  builder->period_type = type_index;
  builder->period_unit = unit_index;
  builder->period = period;
  return 0;
}

int pprof_set_default_sample_type(pprof_builder *builder, const char *type) {
  int64_t index = pprof_cstring(builder, type);
  if (index < 0) return -1;
  builder->default_sample_type = index;
  return 0;
}

int pprof_add_comment(pprof_builder *builder, const char *comment) {
  int64_t index = pprof_cstring(builder, comment);
  if (index < 0) return -1;
  if (buffer_reserve(&builder->comments, varint_field_size(PROFILE_COMMENT, (uint64_t)index)) != 0) return -1;
  put_varint_field(&builder->comments, PROFILE_COMMENT, (uint64_t)index);
  return 0;
}

void pprof_set_time(pprof_builder *builder, int64_t time_nanos, int64_t duration_nanos) {
  builder->time_nanos = time_nanos;
  builder->duration_nanos = duration_nanos;
}

uint64_t pprof_add_function(pprof_builder *builder, int64_t name, int64_t filename, int64_t start_line) {
  uint64_t id = builder->function_count + 1;
  // No system_name: Ruby has no mangled name for it to hold, and a
  // system_name equal to name tells `go tool pprof` the name still needs
  // demangling: it then takes names with <...> or (...) for C++ and cuts
  // those parts out ("block (2 levels) in <class:PPU>" became "block  in ",
  // "<main>" became ""). An empty system_name marks the name as final.
  size_t size = varint_field_size(FUNCTION_ID, id) + optional_varint_field_size(FUNCTION_NAME, (uint64_t)name) +
                optional_varint_field_size(FUNCTION_FILENAME, (uint64_t)filename) +
                optional_varint_field_size(FUNCTION_START_LINE, (uint64_t)start_line);
  if (buffer_reserve(&builder->functions, len_field_size(PROFILE_FUNCTION, size)) != 0) return 0;
  byte_buffer *out = &builder->functions;
  put_len_header(out, PROFILE_FUNCTION, size);
  put_varint_field(out, FUNCTION_ID, id);
  put_optional_varint_field(out, FUNCTION_NAME, (uint64_t)name);
  put_optional_varint_field(out, FUNCTION_FILENAME, (uint64_t)filename);
  put_optional_varint_field(out, FUNCTION_START_LINE, (uint64_t)start_line);
  builder->function_count = id;
  return id;
}

uint64_t pprof_add_location(pprof_builder *builder, uint64_t function_id, int64_t line) {
  uint64_t id = builder->location_count + 1;
  size_t line_size = optional_varint_field_size(LINE_FUNCTION_ID, function_id) +
                     optional_varint_field_size(LINE_LINE, (uint64_t)line);
  size_t size = varint_field_size(LOCATION_ID, id) + len_field_size(LOCATION_LINE, line_size);
  if (buffer_reserve(&builder->locations, len_field_size(PROFILE_LOCATION, size)) != 0) return 0;
  byte_buffer *out = &builder->locations;
  put_len_header(out, PROFILE_LOCATION, size);
  put_varint_field(out, LOCATION_ID, id);
  put_len_header(out, LOCATION_LINE, line_size);
  put_optional_varint_field(out, LINE_FUNCTION_ID, function_id);
  put_optional_varint_field(out, LINE_LINE, (uint64_t)line);
  builder->location_count = id;
  return id;
}

int pprof_add_sample(pprof_builder *builder, const uint64_t *location_ids, size_t location_count,
                     const int64_t *values, size_t value_count, const pprof_label *labels,
                     size_t label_count) {
  size_t size = sample_size(location_ids, location_count, values, value_count, labels, label_count);
  if (buffer_reserve(&builder->samples, len_field_size(PROFILE_SAMPLE, size)) != 0) return -1;
  put_sample(&builder->samples, size, location_ids, location_count, values, value_count, labels, label_count);
  return 0;
}

// ---- gzip output ----

typedef struct {
  z_stream stream;
  bool stream_open;
  byte_buffer out;
  byte_buffer staging;
} gzip_writer;

// Feeds len bytes (at most MAX_DEFLATE_CHUNK) to zlib, growing the output as
// needed. With Z_FINISH it returns only once the gzip trailer is written.
static int deflate_chunk(gzip_writer *writer, const uint8_t *data, size_t len, int flush) {
  z_stream *stream = &writer->stream;
  stream->next_in = data;
  stream->avail_in = (uInt)len;
  for (;;) {
    if (writer->out.len == writer->out.cap && buffer_reserve(&writer->out, 1) != 0) return -1;
    size_t room = writer->out.cap - writer->out.len;
    uInt offered = room > MAX_DEFLATE_CHUNK ? MAX_DEFLATE_CHUNK : (uInt)room;
    stream->next_out = writer->out.data + writer->out.len;
    stream->avail_out = offered;
    int rc = deflate(stream, flush);
    writer->out.len += offered - stream->avail_out;
    if (rc == Z_STREAM_END) return 0;
    // Z_BUF_ERROR only means no progress was possible this round; the output
    // grows before the next one.
    if (rc != Z_OK && rc != Z_BUF_ERROR) return -1;
    if (flush != Z_FINISH && stream->avail_in == 0) return 0;
  }
}

static int deflate_bytes(gzip_writer *writer, const uint8_t *data, size_t len, int flush) {
  while (len > MAX_DEFLATE_CHUNK) {
    if (deflate_chunk(writer, data, MAX_DEFLATE_CHUNK, Z_NO_FLUSH) != 0) return -1;
    data += MAX_DEFLATE_CHUNK;
    len -= MAX_DEFLATE_CHUNK;
  }
  return deflate_chunk(writer, data, len, flush);
}

static int gzip_writer_open(gzip_writer *writer, size_t expected_input) {
  memset(writer, 0, sizeof(*writer));
  if (deflateInit2(&writer->stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, GZIP_WINDOW_BITS, GZIP_MEM_LEVEL,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return -1;
  writer->stream_open = true;
  if (buffer_reserve(&writer->staging, STAGING_SIZE) != 0) return -1;
  return buffer_reserve(&writer->out, expected_input / EXPECTED_COMPRESSION_RATIO + INITIAL_BUFFER_CAPACITY);
}

static int gzip_writer_flush_staging(gzip_writer *writer) {
  if (writer->staging.len == 0) return 0;
  int rc = deflate_bytes(writer, writer->staging.data, writer->staging.len, Z_NO_FLUSH);
  writer->staging.len = 0;
  return rc;
}

static int gzip_writer_put(gzip_writer *writer, const uint8_t *data, size_t len) {
  if (len > writer->staging.cap - writer->staging.len) {
    if (gzip_writer_flush_staging(writer) != 0) return -1;
    // Large pieces go straight to zlib rather than through the staging copy.
    if (len >= writer->staging.cap) return deflate_bytes(writer, data, len, Z_NO_FLUSH);
  }
  put_bytes(&writer->staging, data, len);
  return 0;
}

static int gzip_writer_finish(gzip_writer *writer) {
  int rc = deflate_bytes(writer, writer->staging.data, writer->staging.len, Z_FINISH);
  writer->staging.len = 0;
  return rc;
}

static void gzip_writer_close(gzip_writer *writer) {
  if (writer->stream_open) deflateEnd(&writer->stream);
  writer->stream_open = false;
  buffer_release(&writer->staging);
  buffer_release(&writer->out);
}

// ---- serialization ----

static size_t string_table_size(const pprof_builder *builder) {
  size_t size = 0;
  for (size_t i = 0; i < builder->string_count; i++)
    size += len_field_size(PROFILE_STRING_TABLE, builder->strings[i].len);
  return size;
}

static int write_string_table(const pprof_builder *builder, gzip_writer *writer) {
  uint8_t header_bytes[MAX_LEN_HEADER_SIZE];
  for (size_t i = 0; i < builder->string_count; i++) {
    const string_entry *entry = &builder->strings[i];
    byte_buffer header = {header_bytes, 0, sizeof(header_bytes)};
    put_len_header(&header, PROFILE_STRING_TABLE, entry->len);
    if (gzip_writer_put(writer, header.data, header.len) != 0) return -1;
    if (gzip_writer_put(writer, string_data(builder, entry), entry->len) != 0) return -1;
  }
  return 0;
}

static size_t trailer_size(const pprof_builder *builder) {
  size_t size = optional_varint_field_size(PROFILE_TIME_NANOS, (uint64_t)builder->time_nanos) +
                optional_varint_field_size(PROFILE_DURATION_NANOS, (uint64_t)builder->duration_nanos) +
                optional_varint_field_size(PROFILE_PERIOD, (uint64_t)builder->period) + builder->comments.len +
                optional_varint_field_size(PROFILE_DEFAULT_SAMPLE_TYPE, (uint64_t)builder->default_sample_type);
  if (builder->has_period_type)
    size += len_field_size(PROFILE_PERIOD_TYPE, value_type_size(builder->period_type, builder->period_unit));
  return size;
}

// The scalar fields that follow the string table (9 to 14).
static int write_trailer(const pprof_builder *builder, gzip_writer *writer) {
  byte_buffer trailer = {0};
  if (buffer_reserve(&trailer, trailer_size(builder)) != 0) return -1;
  put_optional_varint_field(&trailer, PROFILE_TIME_NANOS, (uint64_t)builder->time_nanos);
  put_optional_varint_field(&trailer, PROFILE_DURATION_NANOS, (uint64_t)builder->duration_nanos);
  if (builder->has_period_type)
    put_value_type(&trailer, PROFILE_PERIOD_TYPE, builder->period_type, builder->period_unit);
  put_optional_varint_field(&trailer, PROFILE_PERIOD, (uint64_t)builder->period);
  put_bytes(&trailer, builder->comments.data, builder->comments.len);
  put_optional_varint_field(&trailer, PROFILE_DEFAULT_SAMPLE_TYPE, (uint64_t)builder->default_sample_type);
  int rc = gzip_writer_put(writer, trailer.data, trailer.len);
  buffer_release(&trailer);
  return rc;
}

static size_t profile_size(const pprof_builder *builder) {
  return builder->sample_types.len + builder->samples.len + builder->locations.len + builder->functions.len +
         string_table_size(builder) + trailer_size(builder);
}

static int write_profile(const pprof_builder *builder, gzip_writer *writer) {
  const byte_buffer *parts[] = {&builder->sample_types, &builder->samples, &builder->locations,
                                &builder->functions};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    if (gzip_writer_put(writer, parts[i]->data, parts[i]->len) != 0) return -1;
  if (write_string_table(builder, writer) != 0) return -1;
  return write_trailer(builder, writer);
}

int pprof_encode_gzip(pprof_builder *builder, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  gzip_writer writer;
  int rc = gzip_writer_open(&writer, profile_size(builder));
  if (rc == 0) rc = write_profile(builder, &writer);
  if (rc == 0) rc = gzip_writer_finish(&writer);
  if (rc == 0) {
    *out = writer.out.data;
    *out_len = writer.out.len;
    writer.out.data = NULL; // handed to the caller
  }
  gzip_writer_close(&writer);
  return rc;
}

// ---- renaming label keys of an encoded profile ----
// Reads the protobuf with bounds checked at every step (the input is bytes
// from elsewhere, not this builder's), writes through the same buffers and
// gzip writer as the encoder.

#define WIRE_FIXED64 1
#define WIRE_FIXED32 5
#define FIXED64_SIZE 8
#define FIXED32_SIZE 4
#define VARINT_MAX_BYTES 10
#define INFLATE_CHUNK (256 * 1024)

// One field as read: its number and type, its value (varint) or payload
// (length-delimited: data, len), and where the whole field begins and ends.
typedef struct {
  uint32_t number;
  uint32_t type;
  uint64_t value;
  const uint8_t *payload;
  size_t payload_len;
  const uint8_t *start;
  const uint8_t *end;
} wire_field;

static bool read_varint(const uint8_t **cursor, const uint8_t *end, uint64_t *value) {
  uint64_t result = 0;
  const uint8_t *p = *cursor;
  for (int i = 0; i < VARINT_MAX_BYTES; i++) {
    if (p >= end) return false;
    uint8_t byte = *p++;
    result |= (uint64_t)(byte & VARINT_PAYLOAD_MASK) << (VARINT_PAYLOAD_BITS * i);
    if (byte < VARINT_CONTINUE) {
      *cursor = p;
      *value = result;
      return true;
    }
  }
  return false;
}

// Reads the field at *cursor and moves past it; false when it is malformed.
static bool read_field(const uint8_t **cursor, const uint8_t *end, wire_field *field) {
  const uint8_t *p = *cursor;
  uint64_t tag;
  field->start = p;
  if (!read_varint(&p, end, &tag) || (tag >> TAG_TYPE_BITS) == 0 || (tag >> TAG_TYPE_BITS) > UINT32_MAX) return false;
  field->number = (uint32_t)(tag >> TAG_TYPE_BITS);
  field->type = (uint32_t)(tag & ((1u << TAG_TYPE_BITS) - 1));
  field->payload = NULL;
  field->payload_len = 0;
  field->value = 0;
  size_t left;
  switch (field->type) {
    case WIRE_VARINT:
      if (!read_varint(&p, end, &field->value)) return false;
      break;
    case WIRE_LEN:
      if (!read_varint(&p, end, &field->value) || field->value > (uint64_t)(end - p)) return false;
      field->payload = p;
      field->payload_len = (size_t)field->value;
      p += field->payload_len;
      break;
    case WIRE_FIXED64:
    case WIRE_FIXED32:
      left = (size_t)(end - p);
      if (left < (field->type == WIRE_FIXED64 ? FIXED64_SIZE : FIXED32_SIZE)) return false;
      p += field->type == WIRE_FIXED64 ? FIXED64_SIZE : FIXED32_SIZE;
      break;
    default:
      return false;
  }
  field->end = p;
  *cursor = p;
  return true;
}

static int put_raw(byte_buffer *buffer, const uint8_t *data, size_t len) {
  if (buffer_reserve(buffer, len) != 0) return -1;
  put_bytes(buffer, data, len);
  return 0;
}

static int put_len_field(byte_buffer *buffer, uint32_t field, const uint8_t *data, size_t len) {
  if (buffer_reserve(buffer, len_field_size(field, len)) != 0) return -1;
  put_len_header(buffer, field, len);
  put_bytes(buffer, data, len);
  return 0;
}

// Inflates gzip data into out, refusing more than max bytes.
static enum pprof_rename_result inflate_bounded(const uint8_t *data, size_t len, size_t max, byte_buffer *out) {
  z_stream stream;
  memset(&stream, 0, sizeof(stream));
  if (inflateInit2(&stream, GZIP_WINDOW_BITS) != Z_OK) return PPROF_RENAME_NO_MEMORY;
  enum pprof_rename_result result = PPROF_RENAME_MALFORMED;
  stream.next_in = data;
  stream.avail_in = len > MAX_DEFLATE_CHUNK ? MAX_DEFLATE_CHUNK : (uInt)len;
  size_t fed = stream.avail_in;
  for (;;) {
    if (out->len >= max) break; // too large once inflated
    if (buffer_reserve(out, INFLATE_CHUNK) != 0) {
      result = PPROF_RENAME_NO_MEMORY;
      break;
    }
    size_t room = out->cap - out->len;
    if (room > max - out->len) room = max - out->len;
    stream.next_out = out->data + out->len;
    stream.avail_out = room > MAX_DEFLATE_CHUNK ? MAX_DEFLATE_CHUNK : (uInt)room;
    uInt offered = stream.avail_out;
    int rc = inflate(&stream, Z_NO_FLUSH);
    out->len += offered - stream.avail_out;
    if (rc == Z_STREAM_END) {
      result = PPROF_RENAMED;
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
    if (stream.avail_in == 0) {
      if (fed == len) break; // truncated
      size_t next = len - fed > MAX_DEFLATE_CHUNK ? MAX_DEFLATE_CHUNK : len - fed;
      stream.next_in = data + fed;
      stream.avail_in = (uInt)next;
      fed += next;
    }
  }
  inflateEnd(&stream);
  return result;
}

// The string-table entries that match an old name: index -> which rename.
// With a numeric rename, every entry's bytes too (values are looked up by
// index).
typedef struct {
  uint64_t *indexes;
  size_t *renames;
  size_t count;
  size_t capacity;
  const pprof_rename *table; // the caller's renames
  bool any_numeric;
  const uint8_t **strings; // string index -> its bytes, when any_numeric
  size_t *string_lengths;
  size_t strings_capacity;
} rename_matches;

static int add_match(rename_matches *matches, uint64_t index, size_t rename) {
  if (matches->count == matches->capacity) {
    size_t capacity = matches->capacity ? matches->capacity * 2 : 4;
    uint64_t *indexes = realloc(matches->indexes, capacity * sizeof(*indexes));
    if (indexes == NULL) return -1;
    matches->indexes = indexes;
    size_t *renames = realloc(matches->renames, capacity * sizeof(*renames));
    if (renames == NULL) return -1;
    matches->renames = renames;
    matches->capacity = capacity;
  }
  matches->indexes[matches->count] = index;
  matches->renames[matches->count] = rename;
  matches->count++;
  return 0;
}

static int add_string(rename_matches *matches, uint64_t index, const uint8_t *data, size_t len) {
  if (index >= matches->strings_capacity) {
    size_t capacity = matches->strings_capacity ? matches->strings_capacity * 2 : 256;
    const uint8_t **strings = realloc(matches->strings, capacity * sizeof(*strings));
    if (strings == NULL) return -1;
    matches->strings = strings;
    size_t *lengths = realloc(matches->string_lengths, capacity * sizeof(*lengths));
    if (lengths == NULL) return -1;
    matches->string_lengths = lengths;
    matches->strings_capacity = capacity;
  }
  matches->strings[index] = data;
  matches->string_lengths[index] = len;
  return 0;
}

// Which match old key index is, or -1 when it is not renamed. The new
// strings follow the string_count existing ones, one per match, so match
// i's new key is string_count + i.
static long match_of_key(const rename_matches *matches, uint64_t key) {
  for (size_t i = 0; i < matches->count; i++)
    if (matches->indexes[i] == key) return (long)i;
  return -1;
}

static enum pprof_rename_result find_matches(const byte_buffer *raw, const pprof_rename *renames, size_t count,
                                             rename_matches *matches, uint64_t *string_count) {
  const uint8_t *p = raw->data, *end = raw->data + raw->len;
  uint64_t index = 0;
  wire_field field;
  matches->table = renames;
  for (size_t r = 0; r < count; r++) matches->any_numeric |= renames[r].hex_to_number;
  while (p < end) {
    if (!read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
    if (field.number != PROFILE_STRING_TABLE) continue;
    if (field.type != WIRE_LEN) return PPROF_RENAME_MALFORMED;
    if (matches->any_numeric && add_string(matches, index, field.payload, field.payload_len) != 0)
      return PPROF_RENAME_NO_MEMORY;
    for (size_t r = 0; r < count; r++) {
      if (strlen(renames[r].old_name) == field.payload_len &&
          memcmp(renames[r].old_name, field.payload, field.payload_len) == 0) {
        if (add_match(matches, index, r) != 0) return PPROF_RENAME_NO_MEMORY;
        break;
      }
    }
    index++;
  }
  *string_count = index;
  return matches->count ? PPROF_RENAMED : PPROF_NOTHING_TO_RENAME;
}

// The number a string of 1 to 16 hex digits spells, as the label's int64
// (bit for bit: span ids use all 64 bits); false for anything else.
static bool hex_value(const uint8_t *text, size_t len, int64_t *value) {
  if (len == 0 || len > 16) return false;
  uint64_t result = 0;
  for (size_t i = 0; i < len; i++) {
    uint8_t c = text[i];
    uint64_t digit = c >= '0' && c <= '9' ? (uint64_t)(c - '0')
                     : c >= 'a' && c <= 'f' ? (uint64_t)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (uint64_t)(c - 'A' + 10)
                                            : 16;
    if (digit == 16) return false;
    result = (result << 4) | digit;
  }
  memcpy(value, &result, sizeof(*value));
  return true;
}

// Appends label (its payload) to out with its key renamed (and, for a
// numeric rename, its value made a number); *changed says whether it was.
static enum pprof_rename_result rewrite_label(const wire_field *label, const rename_matches *matches,
                                              uint64_t string_count, byte_buffer *out, bool *changed) {
  const uint8_t *end = label->payload + label->payload_len;
  *changed = false;
  // First the key and the value, wherever they are in the label.
  uint64_t key = 0, str = 0;
  wire_field field;
  for (const uint8_t *p = label->payload; p < end;) {
    if (!read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
    if (field.type != WIRE_VARINT) continue;
    if (field.number == LABEL_KEY) key = field.value;
    if (field.number == LABEL_STR) str = field.value;
  }
  long match = match_of_key(matches, key);
  if (match < 0) return PPROF_RENAMED;
  int64_t number = 0;
  bool to_number = matches->table[matches->renames[match]].hex_to_number && str != 0 && str < string_count &&
                   str < matches->strings_capacity &&
                   hex_value(matches->strings[str], matches->string_lengths[str], &number);
  uint64_t new_key = string_count + (uint64_t)match;
  for (const uint8_t *p = label->payload; p < end;) {
    if (!read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
    bool varint = field.type == WIRE_VARINT;
    if (varint && field.number == LABEL_KEY) {
      if (buffer_reserve(out, varint_field_size(LABEL_KEY, new_key)) != 0) return PPROF_RENAME_NO_MEMORY;
      put_varint_field(out, LABEL_KEY, new_key);
    } else if (to_number && varint && (field.number == LABEL_STR || field.number == LABEL_NUM)) {
      continue; // replaced by the number, below
    } else if (put_raw(out, field.start, (size_t)(field.end - field.start)) != 0) {
      return PPROF_RENAME_NO_MEMORY;
    }
  }
  if (to_number) {
    if (buffer_reserve(out, varint_field_size(LABEL_NUM, (uint64_t)number)) != 0) return PPROF_RENAME_NO_MEMORY;
    put_varint_field(out, LABEL_NUM, (uint64_t)number);
  }
  *changed = true;
  return PPROF_RENAMED;
}

// Appends the sample field to out, its labels rewritten where their key is.
static enum pprof_rename_result rewrite_sample(const wire_field *sample, const rename_matches *matches,
                                               uint64_t string_count, byte_buffer *scratch, byte_buffer *label,
                                               byte_buffer *out) {
  const uint8_t *p = sample->payload, *end = sample->payload + sample->payload_len;
  bool any_changed = false;
  scratch->len = 0;
  wire_field field;
  while (p < end) {
    if (!read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
    bool changed = false;
    if (field.number == SAMPLE_LABEL && field.type == WIRE_LEN) {
      label->len = 0;
      enum pprof_rename_result rc = rewrite_label(&field, matches, string_count, label, &changed);
      if (rc != PPROF_RENAMED) return rc;
    }
    if (changed) {
      if (put_len_field(scratch, SAMPLE_LABEL, label->data, label->len) != 0) return PPROF_RENAME_NO_MEMORY;
      any_changed = true;
    } else if (put_raw(scratch, field.start, (size_t)(field.end - field.start)) != 0) {
      return PPROF_RENAME_NO_MEMORY;
    }
  }
  int rc = any_changed ? put_len_field(out, PROFILE_SAMPLE, scratch->data, scratch->len)
                       : put_raw(out, sample->start, (size_t)(sample->end - sample->start));
  return rc == 0 ? PPROF_RENAMED : PPROF_RENAME_NO_MEMORY;
}

static enum pprof_rename_result rewrite_profile(const byte_buffer *raw, const pprof_rename *renames,
                                                const rename_matches *matches, uint64_t string_count,
                                                byte_buffer *out) {
  byte_buffer scratch = {0}, label = {0};
  enum pprof_rename_result rc = PPROF_RENAMED;
  if (buffer_reserve(out, raw->len + raw->len / 8 + INITIAL_BUFFER_CAPACITY) != 0) rc = PPROF_RENAME_NO_MEMORY;
  const uint8_t *p = raw->data, *end = raw->data + raw->len;
  wire_field field;
  while (rc == PPROF_RENAMED && p < end) {
    if (!read_field(&p, end, &field)) {
      rc = PPROF_RENAME_MALFORMED;
    } else if (field.number == PROFILE_SAMPLE && field.type == WIRE_LEN) {
      rc = rewrite_sample(&field, matches, string_count, &scratch, &label, out);
    } else if (put_raw(out, field.start, (size_t)(field.end - field.start)) != 0) {
      rc = PPROF_RENAME_NO_MEMORY;
    }
  }
  // The new names, in the order of their matches (match_of_key's order).
  for (size_t i = 0; rc == PPROF_RENAMED && i < matches->count; i++) {
    const char *name = renames[matches->renames[i]].new_name;
    if (put_len_field(out, PROFILE_STRING_TABLE, (const uint8_t *)name, strlen(name)) != 0)
      rc = PPROF_RENAME_NO_MEMORY;
  }
  buffer_release(&scratch);
  buffer_release(&label);
  return rc;
}

enum pprof_rename_result pprof_rename_label_keys_gzip(const uint8_t *gzipped, size_t gzipped_len,
                                                      const pprof_rename *renames, size_t count,
                                                      size_t max_inflated, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  byte_buffer raw = {0}, rewritten = {0};
  rename_matches matches = {0};
  uint64_t string_count = 0;
  enum pprof_rename_result rc = inflate_bounded(gzipped, gzipped_len, max_inflated, &raw);
  if (rc == PPROF_RENAMED) rc = find_matches(&raw, renames, count, &matches, &string_count);
  if (rc == PPROF_RENAMED) rc = rewrite_profile(&raw, renames, &matches, string_count, &rewritten);
  buffer_release(&raw);
  if (rc == PPROF_RENAMED) {
    gzip_writer writer;
    int gz = gzip_writer_open(&writer, rewritten.len);
    if (gz == 0) gz = gzip_writer_put(&writer, rewritten.data, rewritten.len);
    if (gz == 0) gz = gzip_writer_finish(&writer);
    if (gz == 0) {
      *out = writer.out.data;
      *out_len = writer.out.len;
      writer.out.data = NULL;
    } else {
      rc = PPROF_RENAME_NO_MEMORY;
    }
    gzip_writer_close(&writer);
  }
  buffer_release(&rewritten);
  free(matches.indexes);
  free(matches.renames);
  free(matches.strings);
  free(matches.string_lengths);
  return rc;
}
