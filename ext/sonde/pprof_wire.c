// pprof_wire.c: protobuf wire format and gzip for pprof files (pprof_wire.h).
//
// Constraints: pure C, no Ruby objects and no Ruby API, no global state: the
// recorder serializes with the GVL released while sampling goes on. It must
// never take the host process down: every allocation and every zlib call is
// checked and failure is returned to the caller, and the reader never reads
// past the end it is given (its input may be bytes from elsewhere).
#include "pprof_wire.h"

#include <stdlib.h>
#include <string.h>

#define VARINT_PAYLOAD_BITS 7
#define VARINT_PAYLOAD_MASK 0x7fu
#define VARINT_CONTINUE 0x80u
#define VARINT_MAX_BYTES 10
#define FIXED64_SIZE 8
#define FIXED32_SIZE 4

// Memory level 8 is zlib's own default.
#define GZIP_MEM_LEVEL 8
#define STAGING_SIZE (64 * 1024)
// pprof data compresses well; the output starts at a quarter of the input
// and grows if that guess is wrong.
#define EXPECTED_COMPRESSION_RATIO 4

// ---- growable byte buffers ----

int wire_buffer_reserve(wire_buffer *buffer, size_t extra) {
  if (extra <= buffer->cap - buffer->len) return 0;
  if (extra > SIZE_MAX - buffer->len) return -1;
  size_t needed = buffer->len + extra;
  size_t cap = buffer->cap ? buffer->cap : WIRE_INITIAL_BUFFER_CAPACITY;
  while (cap < needed) cap = cap > SIZE_MAX / 2 ? needed : cap * 2;
  uint8_t *data = realloc(buffer->data, cap);
  if (!data) return -1;
  buffer->data = data;
  buffer->cap = cap;
  return 0;
}

void wire_buffer_release(wire_buffer *buffer) {
  free(buffer->data);
  buffer->data = NULL;
  buffer->len = buffer->cap = 0;
}

// ---- sizes ----

size_t wire_varint_size(uint64_t value) {
  size_t size = 1;
  while (value >= VARINT_CONTINUE) {
    value >>= VARINT_PAYLOAD_BITS;
    size++;
  }
  return size;
}

static uint64_t tag_of(uint32_t field, enum wire_type type) {
  return ((uint64_t)field << WIRE_TAG_TYPE_BITS) | (uint64_t)type;
}

size_t wire_varint_field_size(uint32_t field, uint64_t value) {
  return wire_varint_size(tag_of(field, WIRE_VARINT)) + wire_varint_size(value);
}

size_t wire_optional_varint_field_size(uint32_t field, uint64_t value) {
  return value ? wire_varint_field_size(field, value) : 0;
}

size_t wire_len_field_size(uint32_t field, size_t len) {
  return wire_varint_size(tag_of(field, WIRE_LEN)) + wire_varint_size(len) + len;
}

// ---- writes into reserved space ----

void wire_put_varint(wire_buffer *buffer, uint64_t value) {
  while (value >= VARINT_CONTINUE) {
    buffer->data[buffer->len++] = (uint8_t)((value & VARINT_PAYLOAD_MASK) | VARINT_CONTINUE);
    value >>= VARINT_PAYLOAD_BITS;
  }
  buffer->data[buffer->len++] = (uint8_t)value;
}

void wire_put_varint_field(wire_buffer *buffer, uint32_t field, uint64_t value) {
  wire_put_varint(buffer, tag_of(field, WIRE_VARINT));
  wire_put_varint(buffer, value);
}

void wire_put_optional_varint_field(wire_buffer *buffer, uint32_t field, uint64_t value) {
  if (value) wire_put_varint_field(buffer, field, value);
}

void wire_put_len_header(wire_buffer *buffer, uint32_t field, size_t len) {
  wire_put_varint(buffer, tag_of(field, WIRE_LEN));
  wire_put_varint(buffer, len);
}

void wire_put_bytes(wire_buffer *buffer, const void *data, size_t len) {
  if (len == 0) return; // data may be NULL then, which memcpy does not allow
  memcpy(buffer->data + buffer->len, data, len);
  buffer->len += len;
}

// ---- writes that reserve first ----

int wire_append_bytes(wire_buffer *buffer, const uint8_t *data, size_t len) {
  if (wire_buffer_reserve(buffer, len) != 0) return -1;
  wire_put_bytes(buffer, data, len);
  return 0;
}

int wire_append_len_field(wire_buffer *buffer, uint32_t field, const uint8_t *data, size_t len) {
  if (wire_buffer_reserve(buffer, wire_len_field_size(field, len)) != 0) return -1;
  wire_put_len_header(buffer, field, len);
  wire_put_bytes(buffer, data, len);
  return 0;
}

// ---- reading ----

bool wire_read_varint(const uint8_t **cursor, const uint8_t *end, uint64_t *value) {
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

bool wire_read_field(const uint8_t **cursor, const uint8_t *end, wire_field *field) {
  const uint8_t *p = *cursor;
  uint64_t tag;
  field->start = p;
  if (!wire_read_varint(&p, end, &tag) || (tag >> WIRE_TAG_TYPE_BITS) == 0 || (tag >> WIRE_TAG_TYPE_BITS) > UINT32_MAX)
    return false;
  field->number = (uint32_t)(tag >> WIRE_TAG_TYPE_BITS);
  field->type = (uint32_t)(tag & ((1u << WIRE_TAG_TYPE_BITS) - 1));
  field->payload = NULL;
  field->payload_len = 0;
  field->value = 0;
  size_t left;
  switch (field->type) {
    case WIRE_VARINT:
      if (!wire_read_varint(&p, end, &field->value)) return false;
      break;
    case WIRE_LEN:
      if (!wire_read_varint(&p, end, &field->value) || field->value > (uint64_t)(end - p)) return false;
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

// ---- gzip output ----

// Feeds len bytes (at most WIRE_MAX_ZLIB_CHUNK) to zlib, growing the output
// as needed. With Z_FINISH it returns only once the gzip trailer is written.
static int deflate_chunk(wire_gzip *gzip, const uint8_t *data, size_t len, int flush) {
  z_stream *stream = &gzip->stream;
  stream->next_in = data;
  stream->avail_in = (uInt)len;
  for (;;) {
    if (gzip->out.len == gzip->out.cap && wire_buffer_reserve(&gzip->out, 1) != 0) return -1;
    size_t room = gzip->out.cap - gzip->out.len;
    uInt offered = room > WIRE_MAX_ZLIB_CHUNK ? WIRE_MAX_ZLIB_CHUNK : (uInt)room;
    stream->next_out = gzip->out.data + gzip->out.len;
    stream->avail_out = offered;
    int rc = deflate(stream, flush);
    gzip->out.len += offered - stream->avail_out;
    if (rc == Z_STREAM_END) return 0;
    // Z_BUF_ERROR only means no progress was possible this round; the output
    // grows before the next one.
    if (rc != Z_OK && rc != Z_BUF_ERROR) return -1;
    if (flush != Z_FINISH && stream->avail_in == 0) return 0;
  }
}

static int deflate_bytes(wire_gzip *gzip, const uint8_t *data, size_t len, int flush) {
  while (len > WIRE_MAX_ZLIB_CHUNK) {
    if (deflate_chunk(gzip, data, WIRE_MAX_ZLIB_CHUNK, Z_NO_FLUSH) != 0) return -1;
    data += WIRE_MAX_ZLIB_CHUNK;
    len -= WIRE_MAX_ZLIB_CHUNK;
  }
  return deflate_chunk(gzip, data, len, flush);
}

int wire_gzip_open(wire_gzip *gzip, size_t expected_input) {
  memset(gzip, 0, sizeof(*gzip));
  if (deflateInit2(&gzip->stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WIRE_GZIP_WINDOW_BITS, GZIP_MEM_LEVEL,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return -1;
  gzip->stream_open = true;
  if (wire_buffer_reserve(&gzip->staging, STAGING_SIZE) != 0) return -1;
  return wire_buffer_reserve(&gzip->out, expected_input / EXPECTED_COMPRESSION_RATIO + WIRE_INITIAL_BUFFER_CAPACITY);
}

static int flush_staging(wire_gzip *gzip) {
  if (gzip->staging.len == 0) return 0;
  int rc = deflate_bytes(gzip, gzip->staging.data, gzip->staging.len, Z_NO_FLUSH);
  gzip->staging.len = 0;
  return rc;
}

int wire_gzip_put(wire_gzip *gzip, const uint8_t *data, size_t len) {
  if (len > gzip->staging.cap - gzip->staging.len) {
    if (flush_staging(gzip) != 0) return -1;
    // Large pieces go straight to zlib rather than through the staging copy.
    if (len >= gzip->staging.cap) return deflate_bytes(gzip, data, len, Z_NO_FLUSH);
  }
  wire_put_bytes(&gzip->staging, data, len);
  return 0;
}

int wire_gzip_finish(wire_gzip *gzip) {
  int rc = deflate_bytes(gzip, gzip->staging.data, gzip->staging.len, Z_FINISH);
  gzip->staging.len = 0;
  return rc;
}

void wire_gzip_close(wire_gzip *gzip) {
  if (gzip->stream_open) deflateEnd(&gzip->stream);
  gzip->stream_open = false;
  wire_buffer_release(&gzip->staging);
  wire_buffer_release(&gzip->out);
}
