// utf8_text.c: UTF-8 validation and scrubbing (see the header).
//
// Constraints: pure C, no Ruby API, no global state, no allocation (the
// caller gives the room). Runs where the profile is encoded, with the GVL
// released.
#include "utf8_text.h"

#include <stdint.h>

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; // U+FFFD
#define REPLACEMENT_LEN 3

// The length of the valid sequence at s[i] (1 to 4), or 0 when none starts
// there. The second byte's range is what excludes overlong forms (E0, F0),
// surrogates (ED) and code points past U+10FFFF (F4).
static size_t sequence_at(const unsigned char *s, size_t len, size_t i) {
  unsigned char lead = s[i];
  if (lead < 0x80) return 1;
  size_t need;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0; // a continuation byte, C0, C1 or F5..FF
  }
  if (len - i < need) return 0;
  if (s[i + 1] < low || s[i + 1] > high) return 0;
  for (size_t k = 2; k < need; k++) {
    if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
  }
  return need;
}

bool utf8_text_valid(const char *s, size_t len) {
  const unsigned char *bytes = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    size_t step = sequence_at(bytes, len, i);
    if (step == 0) return false;
    i += step;
  }
  return true;
}

size_t utf8_text_scrubbed_capacity(size_t len) { return len > SIZE_MAX / REPLACEMENT_LEN ? 0 : len * REPLACEMENT_LEN; }

size_t utf8_text_scrub(const char *s, size_t len, char *out) {
  const unsigned char *bytes = (const unsigned char *)s;
  size_t written = 0;
  for (size_t i = 0; i < len;) {
    size_t step = sequence_at(bytes, len, i);
    if (step == 0) {
      for (size_t k = 0; k < REPLACEMENT_LEN; k++) out[written++] = REPLACEMENT[k];
      i++;
      continue;
    }
    for (size_t k = 0; k < step; k++) out[written++] = s[i + k];
    i += step;
  }
  return written;
}
