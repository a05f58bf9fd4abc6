// pprof_rename.h: renames sample label keys in an encoded, gzip'd profile.
// Pure C: no Ruby, so it runs with the GVL released (pprof_rename_binding.c,
// its one user, releases it) and is unit-tested under AddressSanitizer.
#ifndef SONDE_PPROF_RENAME_H
#define SONDE_PPROF_RENAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Renames sample label keys in an encoded profile, for a backend that reads
// labels under its own names. renames holds count pairs {old, new} of
// NUL-terminated names. Every string-table entry equal to an old name that a
// sample uses as a label key is given, in that use only, a new entry with the
// new name appended after the last string, so no existing index moves and a
// string also used elsewhere (a label value, a function name) keeps its
// meaning there. A rename marked hex_to_number also turns the label's
// value, a string of 1 to 16 hex digits, into the label's number (a
// backend that reads span ids as numbers); a value that is not such a
// string stays a string. Everything but the rewritten labels is copied as
// it was.
typedef struct {
  const char *old_name;
  const char *new_name;
  bool hex_to_number;
} pprof_rename;

enum pprof_rename_result {
  PPROF_RENAMED = 0,           // *out is a malloc'd gzip'd profile the caller frees
  PPROF_NOTHING_TO_RENAME = 1, // no old name in the string table; *out is NULL
  PPROF_RENAME_MALFORMED = -1, // not gzip'd protobuf, or larger than max_inflated once inflated
  PPROF_RENAME_NO_MEMORY = -2,
};

enum pprof_rename_result pprof_rename_label_keys_gzip(const uint8_t *gzipped, size_t gzipped_len,
                                                      const pprof_rename *renames, size_t count,
                                                      size_t max_inflated, uint8_t **out, size_t *out_len);

#endif
