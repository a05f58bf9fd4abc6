// pprof_builder.h: builds a profile in pprof's format
// (perftools.profiles.Profile, protobuf), gzip-compressed with zlib. Pure C:
// no Ruby, so it can run with the GVL released and is unit-tested under
// AddressSanitizer. Its user is profile_export.c.
//
// A builder collects the profile piece by piece; each piece is encoded as it
// is added, so the builder never holds a second copy of the data. Strings are
// interned: index 0 is always the empty string, as pprof requires.
#ifndef SONDE_PPROF_BUILDER_H
#define SONDE_PPROF_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pprof_builder pprof_builder;

// One label of a sample. key and str are string-table indexes; a label with
// str == 0 is numeric (num, with num_unit as a string index, 0 for none).
typedef struct {
  int64_t key;
  int64_t str;
  int64_t num;
  int64_t num_unit;
} pprof_label;

// Returns NULL when out of memory.
pprof_builder *pprof_builder_new(void);
void pprof_builder_free(pprof_builder *builder);

// Interns a string of len bytes (need not be NUL-terminated); returns its
// string-table index, or -1 when out of memory. Bytes that are not UTF-8
// go in as U+FFFD (utf8_text.h): protobuf strings must be UTF-8.
int64_t pprof_string(pprof_builder *builder, const char *s, size_t len);
int64_t pprof_cstring(pprof_builder *builder, const char *s);

// Each returns 0, or -1 when out of memory.
int pprof_add_sample_type(pprof_builder *builder, const char *type, const char *unit);
int pprof_set_period(pprof_builder *builder, const char *type, const char *unit, int64_t period);
int pprof_set_default_sample_type(pprof_builder *builder, const char *type);
int pprof_add_comment(pprof_builder *builder, const char *comment);
void pprof_set_time(pprof_builder *builder, int64_t time_nanos, int64_t duration_nanos);

// Adds a function; name and filename are string indexes. Returns its id
// (1, 2, 3, ...), or 0 when out of memory.
uint64_t pprof_add_function(pprof_builder *builder, int64_t name, int64_t filename, int64_t start_line);

// Adds a location with one line in one function. Returns its id (1, 2, ...),
// or 0 when out of memory.
uint64_t pprof_add_location(pprof_builder *builder, uint64_t function_id, int64_t line);

// Adds a sample. location_ids go leaf first, as pprof wants. values must have
// one entry per sample type added. Returns 0, or -1 when out of memory.
int pprof_add_sample(pprof_builder *builder, const uint64_t *location_ids, size_t location_count,
                     const int64_t *values, size_t value_count, const pprof_label *labels,
                     size_t label_count);

// Serializes the whole profile and gzips it into a malloc'd buffer the caller
// frees. Returns 0, or -1 when out of memory or zlib fails. The builder stays
// usable (it can be encoded again) until freed.
int pprof_encode_gzip(pprof_builder *builder, uint8_t **out, size_t *out_len);

#endif
