// pprof_builder.c: builds a profile as perftools.profiles.Profile
// (protobuf) and gzips it (pprof_builder.h), on the wire format of
// pprof_wire.h.
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
#include "pprof_builder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_fields.h"
#include "pprof_wire.h"
#include "utf8_text.h"

#define FNV_OFFSET_BASIS 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

// Slot counts stay powers of two so a hash maps to a slot with a mask.
#define INITIAL_STRING_SLOTS 256
// The table grows when it would become more than half full: linear probing
// degrades quickly beyond that.
#define STRING_TABLE_MAX_LOAD_DIVISOR 2

typedef struct {
  size_t offset; // into the builder's string arena
  size_t len;
  uint64_t hash;
} string_entry;

struct pprof_builder {
  wire_buffer string_bytes;
  string_entry *strings;
  size_t string_count;
  size_t string_capacity;
  size_t *slots; // string index + 1; 0 marks an empty slot
  size_t slot_count;

  wire_buffer sample_types; // encoded PROFILE_SAMPLE_TYPE fields
  wire_buffer samples;      // encoded PROFILE_SAMPLE fields
  wire_buffer locations;    // encoded PROFILE_LOCATION fields
  wire_buffer functions;    // encoded PROFILE_FUNCTION fields
  wire_buffer comments;     // encoded PROFILE_COMMENT fields
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

// ---- messages ----

static size_t value_type_size(int64_t type, int64_t unit) {
  return wire_optional_varint_field_size(VALUE_TYPE_TYPE, (uint64_t)type) +
         wire_optional_varint_field_size(VALUE_TYPE_UNIT, (uint64_t)unit);
}

static void put_value_type(wire_buffer *buffer, uint32_t field, int64_t type, int64_t unit) {
  wire_put_len_header(buffer, field, value_type_size(type, unit));
  wire_put_optional_varint_field(buffer, VALUE_TYPE_TYPE, (uint64_t)type);
  wire_put_optional_varint_field(buffer, VALUE_TYPE_UNIT, (uint64_t)unit);
}

// A numeric label always carries its num, even 0, so that it cannot be
// mistaken for a label that lacks a value.
static size_t label_size(const pprof_label *label) {
  size_t size = wire_optional_varint_field_size(LABEL_KEY, (uint64_t)label->key);
  if (label->str) return size + wire_varint_field_size(LABEL_STR, (uint64_t)label->str);
  return size + wire_varint_field_size(LABEL_NUM, (uint64_t)label->num) +
         wire_optional_varint_field_size(LABEL_NUM_UNIT, (uint64_t)label->num_unit);
}

static void put_label(wire_buffer *buffer, const pprof_label *label) {
  wire_put_len_header(buffer, SAMPLE_LABEL, label_size(label));
  wire_put_optional_varint_field(buffer, LABEL_KEY, (uint64_t)label->key);
  if (label->str) {
    wire_put_varint_field(buffer, LABEL_STR, (uint64_t)label->str);
  } else {
    wire_put_varint_field(buffer, LABEL_NUM, (uint64_t)label->num);
    wire_put_optional_varint_field(buffer, LABEL_NUM_UNIT, (uint64_t)label->num_unit);
  }
}

static size_t packed_ids_size(const uint64_t *ids, size_t count) {
  size_t size = 0;
  for (size_t i = 0; i < count; i++) size += wire_varint_size(ids[i]);
  return size;
}

static size_t packed_values_size(const int64_t *values, size_t count) {
  size_t size = 0;
  for (size_t i = 0; i < count; i++) size += wire_varint_size((uint64_t)values[i]);
  return size;
}

static size_t sample_size(const uint64_t *location_ids, size_t location_count, const int64_t *values,
                          size_t value_count, const pprof_label *labels, size_t label_count) {
  size_t size = 0;
  if (location_count) size += wire_len_field_size(SAMPLE_LOCATION_ID, packed_ids_size(location_ids, location_count));
  if (value_count) size += wire_len_field_size(SAMPLE_VALUE, packed_values_size(values, value_count));
  for (size_t i = 0; i < label_count; i++) size += wire_len_field_size(SAMPLE_LABEL, label_size(&labels[i]));
  return size;
}

static void put_sample(wire_buffer *buffer, size_t size, const uint64_t *location_ids, size_t location_count,
                       const int64_t *values, size_t value_count, const pprof_label *labels,
                       size_t label_count) {
  wire_put_len_header(buffer, PROFILE_SAMPLE, size);
  if (location_count) {
    wire_put_len_header(buffer, SAMPLE_LOCATION_ID, packed_ids_size(location_ids, location_count));
    for (size_t i = 0; i < location_count; i++) wire_put_varint(buffer, location_ids[i]);
  }
  if (value_count) {
    wire_put_len_header(buffer, SAMPLE_VALUE, packed_values_size(values, value_count));
    for (size_t i = 0; i < value_count; i++) wire_put_varint(buffer, (uint64_t)values[i]);
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
  if (wire_buffer_reserve(&builder->string_bytes, len) != 0) return -1;
  if (reserve_string_entry(builder) != 0) return -1;
  if ((builder->string_count + 1) * STRING_TABLE_MAX_LOAD_DIVISOR > builder->slot_count)
    return grow_string_slots(builder);
  return 0;
}

// A string that is not valid UTF-8 goes in with each invalid byte replaced
// by U+FFFD (utf8_text.h: one such byte made a Collector refuse the whole
// profile); the original is not in the table.
static int64_t intern_scrubbed(pprof_builder *builder, const char *s, size_t len) {
  size_t capacity = utf8_text_scrubbed_capacity(len);
  char *scrubbed = capacity ? malloc(capacity) : NULL;
  if (!scrubbed) return -1;
  int64_t index = pprof_string(builder, scrubbed, utf8_text_scrub(s, len, scrubbed));
  free(scrubbed);
  return index;
}

int64_t pprof_string(pprof_builder *builder, const char *s, size_t len) {
  if (!s) len = 0; // a NULL string is taken as the empty string
  if (!utf8_text_valid(s, len)) return intern_scrubbed(builder, s, len);
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
  wire_put_bytes(&builder->string_bytes, s, len);
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
  wire_buffer_release(&builder->string_bytes);
  free(builder->strings);
  free(builder->slots);
  wire_buffer_release(&builder->sample_types);
  wire_buffer_release(&builder->samples);
  wire_buffer_release(&builder->locations);
  wire_buffer_release(&builder->functions);
  wire_buffer_release(&builder->comments);
  free(builder);
}

int pprof_add_sample_type(pprof_builder *builder, const char *type, const char *unit) {
  int64_t type_index = pprof_cstring(builder, type);
  int64_t unit_index = pprof_cstring(builder, unit);
  if (type_index < 0 || unit_index < 0) return -1;
  size_t size = wire_len_field_size(PROFILE_SAMPLE_TYPE, value_type_size(type_index, unit_index));
  if (wire_buffer_reserve(&builder->sample_types, size) != 0) return -1;
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
  if (wire_buffer_reserve(&builder->comments, wire_varint_field_size(PROFILE_COMMENT, (uint64_t)index)) != 0) return -1;
  wire_put_varint_field(&builder->comments, PROFILE_COMMENT, (uint64_t)index);
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
  size_t size = wire_varint_field_size(FUNCTION_ID, id) +
                wire_optional_varint_field_size(FUNCTION_NAME, (uint64_t)name) +
                wire_optional_varint_field_size(FUNCTION_FILENAME, (uint64_t)filename) +
                wire_optional_varint_field_size(FUNCTION_START_LINE, (uint64_t)start_line);
  if (wire_buffer_reserve(&builder->functions, wire_len_field_size(PROFILE_FUNCTION, size)) != 0) return 0;
  wire_buffer *out = &builder->functions;
  wire_put_len_header(out, PROFILE_FUNCTION, size);
  wire_put_varint_field(out, FUNCTION_ID, id);
  wire_put_optional_varint_field(out, FUNCTION_NAME, (uint64_t)name);
  wire_put_optional_varint_field(out, FUNCTION_FILENAME, (uint64_t)filename);
  wire_put_optional_varint_field(out, FUNCTION_START_LINE, (uint64_t)start_line);
  builder->function_count = id;
  return id;
}

uint64_t pprof_add_location(pprof_builder *builder, uint64_t function_id, int64_t line) {
  uint64_t id = builder->location_count + 1;
  size_t line_size = wire_optional_varint_field_size(LINE_FUNCTION_ID, function_id) +
                     wire_optional_varint_field_size(LINE_LINE, (uint64_t)line);
  size_t size = wire_varint_field_size(LOCATION_ID, id) + wire_len_field_size(LOCATION_LINE, line_size);
  if (wire_buffer_reserve(&builder->locations, wire_len_field_size(PROFILE_LOCATION, size)) != 0) return 0;
  wire_buffer *out = &builder->locations;
  wire_put_len_header(out, PROFILE_LOCATION, size);
  wire_put_varint_field(out, LOCATION_ID, id);
  wire_put_len_header(out, LOCATION_LINE, line_size);
  wire_put_optional_varint_field(out, LINE_FUNCTION_ID, function_id);
  wire_put_optional_varint_field(out, LINE_LINE, (uint64_t)line);
  builder->location_count = id;
  return id;
}

int pprof_add_sample(pprof_builder *builder, const uint64_t *location_ids, size_t location_count,
                     const int64_t *values, size_t value_count, const pprof_label *labels,
                     size_t label_count) {
  size_t size = sample_size(location_ids, location_count, values, value_count, labels, label_count);
  if (wire_buffer_reserve(&builder->samples, wire_len_field_size(PROFILE_SAMPLE, size)) != 0) return -1;
  put_sample(&builder->samples, size, location_ids, location_count, values, value_count, labels, label_count);
  return 0;
}

// ---- serialization ----

static size_t string_table_size(const pprof_builder *builder) {
  size_t size = 0;
  for (size_t i = 0; i < builder->string_count; i++)
    size += wire_len_field_size(PROFILE_STRING_TABLE, builder->strings[i].len);
  return size;
}

static int write_string_table(const pprof_builder *builder, wire_gzip *writer) {
  uint8_t header_bytes[WIRE_MAX_LEN_HEADER_SIZE];
  for (size_t i = 0; i < builder->string_count; i++) {
    const string_entry *entry = &builder->strings[i];
    wire_buffer header = {header_bytes, 0, sizeof(header_bytes)};
    wire_put_len_header(&header, PROFILE_STRING_TABLE, entry->len);
    if (wire_gzip_put(writer, header.data, header.len) != 0) return -1;
    if (wire_gzip_put(writer, string_data(builder, entry), entry->len) != 0) return -1;
  }
  return 0;
}

static size_t trailer_size(const pprof_builder *builder) {
  size_t size = wire_optional_varint_field_size(PROFILE_TIME_NANOS, (uint64_t)builder->time_nanos) +
                wire_optional_varint_field_size(PROFILE_DURATION_NANOS, (uint64_t)builder->duration_nanos) +
                wire_optional_varint_field_size(PROFILE_PERIOD, (uint64_t)builder->period) + builder->comments.len +
                wire_optional_varint_field_size(PROFILE_DEFAULT_SAMPLE_TYPE, (uint64_t)builder->default_sample_type);
  if (builder->has_period_type)
    size += wire_len_field_size(PROFILE_PERIOD_TYPE, value_type_size(builder->period_type, builder->period_unit));
  return size;
}

// The scalar fields that follow the string table (9 to 14).
static int write_trailer(const pprof_builder *builder, wire_gzip *writer) {
  wire_buffer trailer = {0};
  if (wire_buffer_reserve(&trailer, trailer_size(builder)) != 0) return -1;
  wire_put_optional_varint_field(&trailer, PROFILE_TIME_NANOS, (uint64_t)builder->time_nanos);
  wire_put_optional_varint_field(&trailer, PROFILE_DURATION_NANOS, (uint64_t)builder->duration_nanos);
  if (builder->has_period_type)
    put_value_type(&trailer, PROFILE_PERIOD_TYPE, builder->period_type, builder->period_unit);
  wire_put_optional_varint_field(&trailer, PROFILE_PERIOD, (uint64_t)builder->period);
  wire_put_bytes(&trailer, builder->comments.data, builder->comments.len);
  wire_put_optional_varint_field(&trailer, PROFILE_DEFAULT_SAMPLE_TYPE, (uint64_t)builder->default_sample_type);
  int rc = wire_gzip_put(writer, trailer.data, trailer.len);
  wire_buffer_release(&trailer);
  return rc;
}

static size_t profile_size(const pprof_builder *builder) {
  return builder->sample_types.len + builder->samples.len + builder->locations.len + builder->functions.len +
         string_table_size(builder) + trailer_size(builder);
}

static int write_profile(const pprof_builder *builder, wire_gzip *writer) {
  const wire_buffer *parts[] = {&builder->sample_types, &builder->samples, &builder->locations,
                                &builder->functions};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    if (wire_gzip_put(writer, parts[i]->data, parts[i]->len) != 0) return -1;
  if (write_string_table(builder, writer) != 0) return -1;
  return write_trailer(builder, writer);
}

int pprof_encode_gzip(pprof_builder *builder, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  wire_gzip writer;
  int rc = wire_gzip_open(&writer, profile_size(builder));
  if (rc == 0) rc = write_profile(builder, &writer);
  if (rc == 0) rc = wire_gzip_finish(&writer);
  if (rc == 0) {
    *out = writer.out.data;
    *out_len = writer.out.len;
    writer.out.data = NULL; // handed to the caller
  }
  wire_gzip_close(&writer);
  return rc;
}
