// pprof_rename.c: renames sample label keys in an encoded, gzip'd profile
// (pprof_rename.h), for a backend that reads labels under its own names.
//
// Constraints: pure C, no Ruby objects and no Ruby API, no global state: it
// runs with the GVL released. Its input is bytes from elsewhere, not this
// process's builder: every read is bounds checked (pprof_wire.h's reader),
// the inflated size is capped, and a malformed profile is refused with a
// result, never read past its end. Every allocation and zlib call is checked.
//
// How: inflate (bounded), one pass over the string table to find the old
// names, one pass copying every field as it was but the labels whose key is
// renamed, the new names appended to the string table, and gzip again.
#include "pprof_rename.h"

#include <stdlib.h>
#include <string.h>

#include "pprof_fields.h"
#include "pprof_wire.h"

#define INFLATE_CHUNK (256 * 1024)

// Inflates gzip data into out, refusing more than max bytes.
static enum pprof_rename_result inflate_bounded(const uint8_t *data, size_t len, size_t max, wire_buffer *out) {
  z_stream stream;
  memset(&stream, 0, sizeof(stream));
  if (inflateInit2(&stream, WIRE_GZIP_WINDOW_BITS) != Z_OK) return PPROF_RENAME_NO_MEMORY;
  enum pprof_rename_result result = PPROF_RENAME_MALFORMED;
  stream.next_in = data;
  stream.avail_in = len > WIRE_MAX_ZLIB_CHUNK ? WIRE_MAX_ZLIB_CHUNK : (uInt)len;
  size_t fed = stream.avail_in;
  for (;;) {
    if (out->len >= max) break; // too large once inflated
    if (wire_buffer_reserve(out, INFLATE_CHUNK) != 0) {
      result = PPROF_RENAME_NO_MEMORY;
      break;
    }
    size_t room = out->cap - out->len;
    if (room > max - out->len) room = max - out->len;
    stream.next_out = out->data + out->len;
    stream.avail_out = room > WIRE_MAX_ZLIB_CHUNK ? WIRE_MAX_ZLIB_CHUNK : (uInt)room;
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
      size_t next = len - fed > WIRE_MAX_ZLIB_CHUNK ? WIRE_MAX_ZLIB_CHUNK : len - fed;
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

static enum pprof_rename_result find_matches(const wire_buffer *raw, const pprof_rename *renames, size_t count,
                                             rename_matches *matches, uint64_t *string_count) {
  const uint8_t *p = raw->data, *end = raw->data + raw->len;
  uint64_t index = 0;
  wire_field field;
  matches->table = renames;
  for (size_t r = 0; r < count; r++) matches->any_numeric |= renames[r].hex_to_number;
  while (p < end) {
    if (!wire_read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
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
                                              uint64_t string_count, wire_buffer *out, bool *changed) {
  const uint8_t *end = label->payload + label->payload_len;
  *changed = false;
  // First the key and the value, wherever they are in the label.
  uint64_t key = 0, str = 0;
  wire_field field;
  for (const uint8_t *p = label->payload; p < end;) {
    if (!wire_read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
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
    if (!wire_read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
    bool varint = field.type == WIRE_VARINT;
    if (varint && field.number == LABEL_KEY) {
      if (wire_buffer_reserve(out, wire_varint_field_size(LABEL_KEY, new_key)) != 0) return PPROF_RENAME_NO_MEMORY;
      wire_put_varint_field(out, LABEL_KEY, new_key);
    } else if (to_number && varint && (field.number == LABEL_STR || field.number == LABEL_NUM)) {
      continue; // replaced by the number, below
    } else if (wire_append_bytes(out, field.start, (size_t)(field.end - field.start)) != 0) {
      return PPROF_RENAME_NO_MEMORY;
    }
  }
  if (to_number) {
    if (wire_buffer_reserve(out, wire_varint_field_size(LABEL_NUM, (uint64_t)number)) != 0)
      return PPROF_RENAME_NO_MEMORY;
    wire_put_varint_field(out, LABEL_NUM, (uint64_t)number);
  }
  *changed = true;
  return PPROF_RENAMED;
}

// Appends the sample field to out, its labels rewritten where their key is.
static enum pprof_rename_result rewrite_sample(const wire_field *sample, const rename_matches *matches,
                                               uint64_t string_count, wire_buffer *scratch, wire_buffer *label,
                                               wire_buffer *out) {
  const uint8_t *p = sample->payload, *end = sample->payload + sample->payload_len;
  bool any_changed = false;
  scratch->len = 0;
  wire_field field;
  while (p < end) {
    if (!wire_read_field(&p, end, &field)) return PPROF_RENAME_MALFORMED;
    bool changed = false;
    if (field.number == SAMPLE_LABEL && field.type == WIRE_LEN) {
      label->len = 0;
      enum pprof_rename_result rc = rewrite_label(&field, matches, string_count, label, &changed);
      if (rc != PPROF_RENAMED) return rc;
    }
    if (changed) {
      if (wire_append_len_field(scratch, SAMPLE_LABEL, label->data, label->len) != 0) return PPROF_RENAME_NO_MEMORY;
      any_changed = true;
    } else if (wire_append_bytes(scratch, field.start, (size_t)(field.end - field.start)) != 0) {
      return PPROF_RENAME_NO_MEMORY;
    }
  }
  int rc = any_changed ? wire_append_len_field(out, PROFILE_SAMPLE, scratch->data, scratch->len)
                       : wire_append_bytes(out, sample->start, (size_t)(sample->end - sample->start));
  return rc == 0 ? PPROF_RENAMED : PPROF_RENAME_NO_MEMORY;
}

static enum pprof_rename_result rewrite_profile(const wire_buffer *raw, const pprof_rename *renames,
                                                const rename_matches *matches, uint64_t string_count,
                                                wire_buffer *out) {
  wire_buffer scratch = {0}, label = {0};
  enum pprof_rename_result rc = PPROF_RENAMED;
  if (wire_buffer_reserve(out, raw->len + raw->len / 8 + WIRE_INITIAL_BUFFER_CAPACITY) != 0)
    rc = PPROF_RENAME_NO_MEMORY;
  const uint8_t *p = raw->data, *end = raw->data + raw->len;
  wire_field field;
  while (rc == PPROF_RENAMED && p < end) {
    if (!wire_read_field(&p, end, &field)) {
      rc = PPROF_RENAME_MALFORMED;
    } else if (field.number == PROFILE_SAMPLE && field.type == WIRE_LEN) {
      rc = rewrite_sample(&field, matches, string_count, &scratch, &label, out);
    } else if (wire_append_bytes(out, field.start, (size_t)(field.end - field.start)) != 0) {
      rc = PPROF_RENAME_NO_MEMORY;
    }
  }
  // The new names, in the order of their matches (match_of_key's order).
  for (size_t i = 0; rc == PPROF_RENAMED && i < matches->count; i++) {
    const char *name = renames[matches->renames[i]].new_name;
    if (wire_append_len_field(out, PROFILE_STRING_TABLE, (const uint8_t *)name, strlen(name)) != 0)
      rc = PPROF_RENAME_NO_MEMORY;
  }
  wire_buffer_release(&scratch);
  wire_buffer_release(&label);
  return rc;
}

enum pprof_rename_result pprof_rename_label_keys_gzip(const uint8_t *gzipped, size_t gzipped_len,
                                                      const pprof_rename *renames, size_t count,
                                                      size_t max_inflated, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  wire_buffer raw = {0}, rewritten = {0};
  rename_matches matches = {0};
  uint64_t string_count = 0;
  enum pprof_rename_result rc = inflate_bounded(gzipped, gzipped_len, max_inflated, &raw);
  if (rc == PPROF_RENAMED) rc = find_matches(&raw, renames, count, &matches, &string_count);
  if (rc == PPROF_RENAMED) rc = rewrite_profile(&raw, renames, &matches, string_count, &rewritten);
  wire_buffer_release(&raw);
  if (rc == PPROF_RENAMED) {
    wire_gzip writer;
    int gz = wire_gzip_open(&writer, rewritten.len);
    if (gz == 0) gz = wire_gzip_put(&writer, rewritten.data, rewritten.len);
    if (gz == 0) gz = wire_gzip_finish(&writer);
    if (gz == 0) {
      *out = writer.out.data;
      *out_len = writer.out.len;
      writer.out.data = NULL;
    } else {
      rc = PPROF_RENAME_NO_MEMORY;
    }
    wire_gzip_close(&writer);
  }
  wire_buffer_release(&rewritten);
  free(matches.indexes);
  free(matches.renames);
  free(matches.strings);
  free(matches.string_lengths);
  return rc;
}
