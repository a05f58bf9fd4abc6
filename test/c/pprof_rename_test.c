// modules: pprof_rename.c pprof_builder.c pprof_wire.c utf8_text.c
//
// pprof_rename_test.c: unit tests of pprof_rename.c. Pure C, built under
// AddressSanitizer and UndefinedBehaviorSanitizer by `rake test:c`.
//
// The profiles to rename come from the builder (pprof_builder.c, tested on
// its own) or are protobuf bytes written here; what the renamer returns is
// read with pprof_decoder.h, independent of both.
#include "pprof_rename.h"
#include "pprof_builder.h"
#include "pprof_decoder.h"
#include "test_harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

int main(void) {
  RUN(test_rename_label_keys);
  RUN(test_rename_hex_values_to_numbers);
  RUN(test_rename_refuses_truncated_protobuf);
  RUN(test_rename_survives_corrupt_bytes);
  return test_summary("pprof_rename");
}
