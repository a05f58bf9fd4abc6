// modules: pprof_wire.c
//
// pprof_wire_test.c: unit tests of pprof_wire.c, protobuf's wire format and
// the gzip stream. Pure C, built under AddressSanitizer and
// UndefinedBehaviorSanitizer by `rake test:c`.
//
// The expected bytes are the worked examples of the protobuf encoding guide
// (protobuf.dev/programming-guides/encoding) and values worked out by hand;
// gzip output is inflated with zlib directly, not through anything of Sonde.
#include "pprof_wire.h"
#include "test_harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROUND_TRIP_FIELDS 2000
#define XORSHIFT_SEED 0x9e3779b97f4a7c15ull

static bool bytes_equal(const wire_buffer *buffer, const uint8_t *expected, size_t len) {
  return buffer->len == len && memcmp(buffer->data, expected, len) == 0;
}

// ---- growable buffers ----

static void test_reserve_grows_and_keeps_the_bytes(void) {
  wire_buffer buffer = {0};
  CHECK_EQ_INT(wire_buffer_reserve(&buffer, 3), 0);
  CHECK_EQ_INT(buffer.cap, WIRE_INITIAL_BUFFER_CAPACITY);
  wire_put_bytes(&buffer, "abc", 3);
  CHECK_EQ_INT(wire_buffer_reserve(&buffer, WIRE_INITIAL_BUFFER_CAPACITY * 3), 0);
  CHECK(buffer.cap >= 3 + WIRE_INITIAL_BUFFER_CAPACITY * 3);
  CHECK(bytes_equal(&buffer, (const uint8_t *)"abc", 3));
  // A request that cannot be met leaves the buffer as it was.
  uint8_t *data = buffer.data;
  size_t cap = buffer.cap;
  CHECK_EQ_INT(wire_buffer_reserve(&buffer, SIZE_MAX), -1);
  CHECK(buffer.data == data && buffer.cap == cap && buffer.len == 3);
  wire_put_bytes(&buffer, NULL, 0); // no bytes: NULL is allowed
  CHECK_EQ_INT(buffer.len, 3);
  wire_buffer_release(&buffer);
  CHECK(buffer.data == NULL && buffer.len == 0 && buffer.cap == 0);
  wire_buffer_release(&buffer); // an empty buffer too
}

// ---- encoding ----

static void check_varint(uint64_t value, const uint8_t *expected, size_t len) {
  wire_buffer buffer = {0};
  CHECK_EQ_INT(wire_varint_size(value), len);
  if (!CHECK_EQ_INT(wire_buffer_reserve(&buffer, len), 0)) return;
  wire_put_varint(&buffer, value);
  CHECK(bytes_equal(&buffer, expected, len));
  wire_buffer_release(&buffer);
}

static void test_varints(void) {
  check_varint(0, (const uint8_t[]){0x00}, 1);
  check_varint(1, (const uint8_t[]){0x01}, 1);
  check_varint(127, (const uint8_t[]){0x7f}, 1);
  check_varint(128, (const uint8_t[]){0x80, 0x01}, 2);
  check_varint(150, (const uint8_t[]){0x96, 0x01}, 2);
  check_varint(300, (const uint8_t[]){0xac, 0x02}, 2);
  check_varint(UINT64_MAX, (const uint8_t[]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10);
  // A negative int64 is its two's complement: always 10 bytes.
  CHECK_EQ_INT(wire_varint_size((uint64_t)(int64_t)-5), 10);
}

static void test_fields(void) {
  wire_buffer buffer = {0};
  // Field 1 = 150 (the guide's "08 96 01"); field 2 = "testing".
  const uint8_t expected[] = {0x08, 0x96, 0x01, 0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'};
  size_t size = wire_varint_field_size(1, 150) + wire_len_field_size(2, 7);
  CHECK_EQ_INT(size, sizeof(expected));
  if (!CHECK_EQ_INT(wire_buffer_reserve(&buffer, size), 0)) return;
  wire_put_varint_field(&buffer, 1, 150);
  wire_put_len_header(&buffer, 2, 7);
  wire_put_bytes(&buffer, "testing", 7);
  CHECK(bytes_equal(&buffer, expected, sizeof(expected)));

  // The appending forms reserve for themselves and write the same bytes.
  wire_buffer appended = {0};
  CHECK_EQ_INT(wire_append_bytes(&appended, expected, 3), 0);
  CHECK_EQ_INT(wire_append_len_field(&appended, 2, (const uint8_t *)"testing", 7), 0);
  CHECK(bytes_equal(&appended, expected, sizeof(expected)));

  // proto3 leaves a zero out: no bytes, and a size of 0 to match.
  size_t before = buffer.len;
  CHECK_EQ_INT(wire_optional_varint_field_size(3, 0), 0);
  wire_put_optional_varint_field(&buffer, 3, 0);
  CHECK_EQ_INT(buffer.len, before);
  CHECK_EQ_INT(wire_optional_varint_field_size(3, 1), 2);
  // A field number of 16 and up takes a two-byte tag.
  CHECK_EQ_INT(wire_varint_field_size(16, 1), 3);
  // An empty payload still has its tag and length; 128 bytes take a 2-byte length.
  CHECK_EQ_INT(wire_len_field_size(15, 0), 2);
  CHECK_EQ_INT(wire_len_field_size(15, 128), 1 + 2 + 128);
  wire_buffer_release(&buffer);
  wire_buffer_release(&appended);
}

// ---- reading ----

static void test_read_varint_bounds(void) {
  const uint8_t two[] = {0xac, 0x02};
  const uint8_t *p = two;
  uint64_t value = 0;
  CHECK(wire_read_varint(&p, two + 2, &value));
  CHECK_EQ_INT(value, 300);
  CHECK(p == two + 2);
  // Cut short: refused, and the cursor does not move.
  p = two;
  CHECK(!wire_read_varint(&p, two + 1, &value));
  CHECK(p == two);
  // Eleven bytes with the continuation bit: longer than any 64-bit varint.
  uint8_t eleven[11];
  memset(eleven, 0x80, sizeof(eleven));
  p = eleven;
  CHECK(!wire_read_varint(&p, eleven + sizeof(eleven), &value));
  CHECK(p == eleven);
}

static void test_read_field_of_each_type(void) {
  const uint8_t bytes[] = {
      0x08, 0x96, 0x01,                               // 1: varint 150
      0x12, 0x03, 'a',  'b',  'c',                    // 2: "abc"
      0x19, 1,    2,    3,    4,    5,    6,    7, 8, // 3: fixed64
      0x25, 1,    2,    3,    4,                      // 4: fixed32
  };
  const uint8_t *p = bytes, *end = bytes + sizeof(bytes);
  wire_field field;
  if (!CHECK(wire_read_field(&p, end, &field))) return;
  CHECK_EQ_INT(field.number, 1);
  CHECK_EQ_INT(field.type, WIRE_VARINT);
  CHECK_EQ_INT(field.value, 150);
  CHECK(field.start == bytes && field.end == bytes + 3);
  if (!CHECK(wire_read_field(&p, end, &field))) return;
  CHECK_EQ_INT(field.number, 2);
  CHECK_EQ_INT(field.type, WIRE_LEN);
  CHECK(field.payload == bytes + 5 && field.payload_len == 3);
  CHECK(field.start == bytes + 3 && field.end == bytes + 8);
  if (!CHECK(wire_read_field(&p, end, &field))) return;
  CHECK_EQ_INT(field.number, 3);
  CHECK_EQ_INT(field.type, WIRE_FIXED64);
  CHECK(field.end == bytes + 17);
  if (!CHECK(wire_read_field(&p, end, &field))) return;
  CHECK_EQ_INT(field.number, 4);
  CHECK_EQ_INT(field.type, WIRE_FIXED32);
  CHECK(p == end && field.end == end);
}

static bool reads(const uint8_t *bytes, size_t len) {
  const uint8_t *p = bytes;
  wire_field field;
  bool ok = wire_read_field(&p, bytes + len, &field);
  if (!ok) CHECK(p == bytes); // a refused field does not move the cursor
  return ok;
}

static void test_read_field_refuses_malformed(void) {
  CHECK(!reads((const uint8_t[]){0x00, 0x01}, 2));                // field number 0
  CHECK(!reads((const uint8_t[]){0x0b}, 1));                      // wire type 3 (group start)
  CHECK(!reads((const uint8_t[]){0x0e, 0x00}, 2));                // wire type 6
  CHECK(!reads((const uint8_t[]){0x12, 0x04, 'a', 'b', 'c'}, 5)); // length past the end
  CHECK(!reads((const uint8_t[]){0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 11));
  CHECK(!reads((const uint8_t[]){0x19, 1, 2, 3, 4, 5, 6, 7}, 8)); // fixed64 with 7 bytes
  CHECK(!reads((const uint8_t[]){0x25, 1, 2, 3}, 4));             // fixed32 with 3 bytes
  CHECK(!reads((const uint8_t[]){0x08}, 1));                      // varint value missing
  // Field number 2^32: above what a field number may be.
  CHECK(!reads((const uint8_t[]){0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00}, 7));
  // 2^32 - 1 still reads: the reader's bound is the field's uint32_t.
  CHECK(reads((const uint8_t[]){0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00}, 6));
}

static uint64_t xorshift64(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

// Values of every width, written as fields and read back: what the writer
// says a field takes is what it wrote, and the reader gets each value back.
static void test_fields_read_back_what_was_written(void) {
  uint64_t values[ROUND_TRIP_FIELDS], state = XORSHIFT_SEED;
  size_t expected_len = 0;
  for (int i = 0; i < ROUND_TRIP_FIELDS; i++) {
    values[i] = xorshift64(&state) >> (i % 64); // widths from 64 bits down to 1
    expected_len += wire_varint_field_size((uint32_t)(i % 100) + 1, values[i]);
  }
  wire_buffer buffer = {0};
  if (!CHECK_EQ_INT(wire_buffer_reserve(&buffer, expected_len), 0)) return;
  for (int i = 0; i < ROUND_TRIP_FIELDS; i++) wire_put_varint_field(&buffer, (uint32_t)(i % 100) + 1, values[i]);
  CHECK_EQ_INT(buffer.len, expected_len);
  const uint8_t *p = buffer.data, *end = buffer.data + buffer.len;
  int wrong = 0, read = 0;
  wire_field field;
  while (p < end && wire_read_field(&p, end, &field)) {
    if (field.number != (uint32_t)(read % 100) + 1 || field.type != WIRE_VARINT || field.value != values[read])
      wrong++;
    read++;
  }
  CHECK_EQ_INT(read, ROUND_TRIP_FIELDS);
  CHECK_EQ_INT(wrong, 0);
  wire_buffer_release(&buffer);
}

// ---- gzip ----

// Inflates gz with zlib and compares it with expected, byte for byte.
static bool gunzips_to(const uint8_t *gz, size_t gz_len, const uint8_t *expected, size_t len) {
  uint8_t *out = malloc(len + 1);
  z_stream stream;
  memset(&stream, 0, sizeof(stream));
  if (out == NULL || inflateInit2(&stream, WIRE_GZIP_WINDOW_BITS) != Z_OK) {
    free(out);
    return false;
  }
  stream.next_in = gz;
  stream.avail_in = (uInt)gz_len;
  stream.next_out = out;
  stream.avail_out = (uInt)(len + 1);
  int rc = inflate(&stream, Z_FINISH);
  bool same = rc == Z_STREAM_END && stream.total_out == len && stream.avail_in == 0 &&
              (len == 0 || memcmp(out, expected, len) == 0);
  inflateEnd(&stream);
  free(out);
  return same;
}

static void test_gzip_of_nothing(void) {
  wire_gzip gzip;
  CHECK_EQ_INT(wire_gzip_open(&gzip, 0), 0);
  CHECK_EQ_INT(wire_gzip_finish(&gzip), 0);
  CHECK(gunzips_to(gzip.out.data, gzip.out.len, NULL, 0));
  wire_gzip_close(&gzip);
}

// Pieces smaller than the staging buffer, exactly its size, and larger,
// in an order that makes both the staged and the direct path follow the
// other: the stream holds them in order.
static void test_gzip_keeps_pieces_in_order(void) {
  const size_t sizes[] = {1, 7, 65535, 3, 65536, 65537, 11, 300000, 2};
  size_t total = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) total += sizes[i];
  uint8_t *input = malloc(total);
  if (!CHECK(input != NULL)) return;
  uint64_t state = XORSHIFT_SEED;
  // Half random bytes (incompressible), half a repeating pattern.
  for (size_t i = 0; i < total; i++) input[i] = (i / 4096) % 2 ? (uint8_t)xorshift64(&state) : (uint8_t)(i % 13);
  wire_gzip gzip;
  // Sized for a tenth of the input: the output has to grow.
  int rc = wire_gzip_open(&gzip, total / 10);
  size_t offset = 0;
  for (size_t i = 0; rc == 0 && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    rc = wire_gzip_put(&gzip, input + offset, sizes[i]);
    offset += sizes[i];
  }
  if (rc == 0) rc = wire_gzip_finish(&gzip);
  CHECK_EQ_INT(rc, 0);
  CHECK(gunzips_to(gzip.out.data, gzip.out.len, input, total));
  // A caller that keeps the output takes it; close frees the rest.
  uint8_t *kept = gzip.out.data;
  gzip.out.data = NULL;
  wire_gzip_close(&gzip);
  free(kept);
  free(input);
}

int main(void) {
  RUN(test_reserve_grows_and_keeps_the_bytes);
  RUN(test_varints);
  RUN(test_fields);
  RUN(test_read_varint_bounds);
  RUN(test_read_field_of_each_type);
  RUN(test_read_field_refuses_malformed);
  RUN(test_fields_read_back_what_was_written);
  RUN(test_gzip_of_nothing);
  RUN(test_gzip_keeps_pieces_in_order);
  return test_summary("pprof_wire");
}
