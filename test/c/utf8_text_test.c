// modules: utf8_text.c
//
// utf8_text_test.c: unit tests of utf8_text.c. Pure C, built under
// AddressSanitizer and UndefinedBehaviorSanitizer by `rake test:c`. The
// cases are RFC 3629's edges: the shortest and longest form of each
// length, overlong forms, surrogates, past U+10FFFF, cut sequences.
#include "utf8_text.h"
#include "test_harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SCRUB_ROOM 64

static bool valid(const char *s) { return utf8_text_valid(s, strlen(s)); }

static void test_valid_text_of_every_length(void) {
  CHECK(valid(""));
  CHECK(valid("puma srv tp 001"));
  CHECK(valid("\xC2\x80"));         // U+0080, the shortest 2-byte form
  CHECK(valid("w\xC3\xB6rker"));    // "wörker"
  CHECK(valid("\xE0\xA0\x80"));     // U+0800
  CHECK(valid("\xED\x9F\xBF"));     // U+D7FF, just below the surrogates
  CHECK(valid("\xEF\xBF\xBD"));     // U+FFFD
  CHECK(valid("\xF0\x90\x80\x80")); // U+10000
  CHECK(valid("\xF4\x8F\xBF\xBF")); // U+10FFFF, the last code point
  CHECK(utf8_text_valid("a\0b", 3)); // NUL is a character
}

static void test_invalid_text(void) {
  CHECK(!valid("w\xFF\xFE"));        // bytes that are never UTF-8
  CHECK(!valid("\x80"));             // a lone continuation byte
  CHECK(!valid("\xC0\x80"));         // overlong NUL
  CHECK(!valid("\xC1\xBF"));         // overlong
  CHECK(!valid("\xE0\x9F\xBF"));     // overlong 3-byte form
  CHECK(!valid("\xED\xA0\x80"));     // a surrogate, U+D800
  CHECK(!valid("\xF0\x8F\xBF\xBF")); // overlong 4-byte form
  CHECK(!valid("\xF4\x90\x80\x80")); // past U+10FFFF
  CHECK(!valid("\xF5\x80\x80\x80"));
  CHECK(!valid("\xE2\x82"));         // cut short at the end
  CHECK(!valid("\xE2\x82x"));        // cut short by an ASCII byte
}

static void check_scrub(const char *input, size_t len, const char *expected) {
  char out[SCRUB_ROOM];
  if (!CHECK(utf8_text_scrubbed_capacity(len) <= sizeof(out))) return;
  size_t written = utf8_text_scrub(input, len, out);
  CHECK_EQ_INT(written, strlen(expected));
  CHECK(written == strlen(expected) && memcmp(out, expected, written) == 0);
  CHECK(utf8_text_valid(out, written));
}

static void test_scrub_replaces_each_invalid_byte(void) {
  check_scrub("w\xFF\xFE", 3, "w\xEF\xBF\xBD\xEF\xBF\xBD");
  check_scrub("\xE2\x82x", 3, "\xEF\xBF\xBD\xEF\xBF\xBDx"); // the cut sequence's two bytes
  check_scrub("a\xED\xA0\x80z", 5, "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
  check_scrub("w\xC3\xB6rker", 7, "w\xC3\xB6rker"); // valid text is copied as it is
  check_scrub("", 0, "");
}

static void test_capacity_never_overflows(void) {
  CHECK_EQ_INT(utf8_text_scrubbed_capacity(10), 30);
  CHECK_EQ_INT(utf8_text_scrubbed_capacity(SIZE_MAX / 3 + 1), 0);
}

int main(void) {
  RUN(test_valid_text_of_every_length);
  RUN(test_invalid_text);
  RUN(test_scrub_replaces_each_invalid_byte);
  RUN(test_capacity_never_overflows);
  return test_summary("utf8_text");
}
