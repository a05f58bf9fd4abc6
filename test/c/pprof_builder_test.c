// modules: pprof_builder.c pprof_wire.c utf8_text.c
//
// pprof_builder_test.c: unit tests of pprof_builder.c. Pure C, built under
// AddressSanitizer and UndefinedBehaviorSanitizer by `rake test:c`.
//
// Every test decodes what the builder encoded with pprof_decoder.h, a reader
// independent of the encoder. The last test also hands a profile to
// `go tool pprof` when go is installed.
#include "pprof_builder.h"
#include "pprof_decoder.h"
#include "test_harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MANY_SAMPLES 100000
#define MANY_STRINGS 10000
#define SHELL_COMMAND_SIZE 512

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

// A thread named with bytes that are not UTF-8 (Ruby allows it) would
// make the whole profile unreadable to Go's protobuf decoder: each invalid
// byte goes in as U+FFFD, and the scrubbed text is interned like any other.
static void test_strings_that_are_not_utf8_are_scrubbed(void) {
  pprof_builder *builder = pprof_builder_new();
  if (!CHECK(builder != NULL)) return;
  CHECK_EQ_INT(pprof_string(builder, "w\xFF\xFE", 3), 1);
  CHECK_EQ_INT(pprof_cstring(builder, "w\xEF\xBF\xBD\xEF\xBF\xBD"), 1);
  CHECK_EQ_INT(pprof_cstring(builder, "w\xC3\xB6rker"), 2);

  decoded_profile d;
  if (round_trip(builder, &d)) {
    CHECK_EQ_INT(d.string_count, 3);
    CHECK_EQ_STR(string_at(&d, 1), "w\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK_EQ_STR(string_at(&d, 2), "w\xC3\xB6rker");
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
  pprof_add_comment(builder, "written by pprof_builder_test");
  uint8_t *gz = NULL;
  size_t gz_len = 0;
  CHECK_EQ_INT(pprof_encode_gzip(builder, &gz, &gz_len), 0);

  char path[] = "/tmp/sonde_pprof_builder_test_XXXXXX";
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
  RUN(test_strings_that_are_not_utf8_are_scrubbed);
  RUN(test_many_strings_keep_their_indexes);
  RUN(test_functions_and_locations_get_sequential_ids);
  RUN(test_samples_keep_values_and_labels);
  RUN(test_header_fields);
  RUN(test_many_samples);
  RUN(test_encoding_is_repeatable);
  RUN(test_free_accepts_null);
  RUN(test_go_tool_pprof_reads_the_profile);
  return test_summary("pprof_builder");
}
