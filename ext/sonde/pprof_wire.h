// pprof_wire.h: the bytes of a pprof file: protobuf's wire format (varints,
// tags, length-delimited fields) written into growable buffers and read back
// with bounds checked, and the gzip stream that carries them. It knows no
// message of profile.proto (pprof_fields.h names those); the builder
// (pprof_builder.c) and the label renamer (pprof_rename.c) sit on it.
//
// Pure C, no Ruby, no global state: it runs with the GVL released. Writing
// is two-step so nothing can fail half-way: a caller computes a field's size
// with the *_size functions, reserves that much with wire_buffer_reserve
// (which can fail), then writes with the wire_put_* functions (which cannot).
#ifndef SONDE_PPROF_WIRE_H
#define SONDE_PPROF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
// zlib's const-correct API (next_in is const): every user of this header
// hands zlib bytes it must not write.
#ifndef ZLIB_CONST
#define ZLIB_CONST
#endif
#include <zlib.h>

// A tag is (field number << 3) | wire type.
enum wire_type { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };
#define WIRE_TAG_TYPE_BITS 3
// A tag of a field below 16 plus a 64-bit length fits in 1 + 10 bytes.
#define WIRE_MAX_LEN_HEADER_SIZE 11
// zlib counts bytes in uInt; it is never handed more than this at once.
#define WIRE_MAX_ZLIB_CHUNK (1u << 30)
// gzip: a 32 KiB window (15 bits); adding 16 asks zlib for a gzip wrapper
// instead of a zlib one.
#define WIRE_GZIP_WINDOW_BITS (15 + 16)
// The capacity a buffer starts at, and the slack the writers add to a guess.
#define WIRE_INITIAL_BUFFER_CAPACITY 256

typedef struct {
  uint8_t *data;
  size_t len;
  size_t cap;
} wire_buffer;

// Makes room for extra more bytes. Returns 0, or -1 when out of memory (the
// buffer is then unchanged).
int wire_buffer_reserve(wire_buffer *buffer, size_t extra);
// Frees the bytes and leaves an empty buffer. Accepts an empty one.
void wire_buffer_release(wire_buffer *buffer);

// ---- sizes: what a field takes once encoded ----
size_t wire_varint_size(uint64_t value);
size_t wire_varint_field_size(uint32_t field, uint64_t value);
// proto3 leaves fields at their zero value out: 0 bytes for value 0.
size_t wire_optional_varint_field_size(uint32_t field, uint64_t value);
// A length-delimited field of len bytes of payload, its header included.
size_t wire_len_field_size(uint32_t field, size_t len);

// ---- writes into reserved space: these cannot fail ----
void wire_put_varint(wire_buffer *buffer, uint64_t value);
void wire_put_varint_field(wire_buffer *buffer, uint32_t field, uint64_t value);
void wire_put_optional_varint_field(wire_buffer *buffer, uint32_t field, uint64_t value);
// The tag and length of a length-delimited field; its len bytes must follow.
void wire_put_len_header(wire_buffer *buffer, uint32_t field, size_t len);
// data may be NULL when len is 0.
void wire_put_bytes(wire_buffer *buffer, const void *data, size_t len);

// ---- writes that reserve first: each returns 0, or -1 when out of memory ----
int wire_append_bytes(wire_buffer *buffer, const uint8_t *data, size_t len);
int wire_append_len_field(wire_buffer *buffer, uint32_t field, const uint8_t *data, size_t len);

// ---- reading bytes from elsewhere, bounds checked at every step ----

// One field as read: its number and type, its value (varint; the length of
// a length-delimited one) or payload (length-delimited: payload,
// payload_len), and where the whole field begins and ends.
typedef struct {
  uint32_t number;
  uint32_t type;
  uint64_t value;
  const uint8_t *payload;
  size_t payload_len;
  const uint8_t *start;
  const uint8_t *end;
} wire_field;

// Reads a varint at *cursor, never past end, and moves past it. False when
// it runs off the end or is longer than 10 bytes (*cursor is then unchanged).
bool wire_read_varint(const uint8_t **cursor, const uint8_t *end, uint64_t *value);
// Reads the field at *cursor and moves past it. False when it is malformed:
// field number 0 or above 2^32-1, an unknown wire type, or a length or
// fixed-size value that runs past end.
bool wire_read_field(const uint8_t **cursor, const uint8_t *end, wire_field *field);

// ---- gzip output ----
// Small pieces are gathered in a staging buffer so that zlib is called per
// chunk, not per string; large ones go straight to zlib.
typedef struct {
  z_stream stream;
  bool stream_open;
  wire_buffer out;
  wire_buffer staging;
} wire_gzip;

// Opens a gzip stream whose output starts sized for expected_input bytes of
// input. Returns 0, or -1 (zlib or memory); wire_gzip_close is due either way.
int wire_gzip_open(wire_gzip *gzip, size_t expected_input);
// Returns 0, or -1 when out of memory or zlib fails.
int wire_gzip_put(wire_gzip *gzip, const uint8_t *data, size_t len);
// Writes what is staged and the gzip trailer: gzip->out then holds the whole
// gzip data. Returns 0, or -1.
int wire_gzip_finish(wire_gzip *gzip);
// Ends the stream and frees what gzip->out still holds (a caller that keeps
// the output takes gzip->out.data and sets it to NULL first).
void wire_gzip_close(wire_gzip *gzip);

#endif
