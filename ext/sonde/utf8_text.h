// utf8_text.h: byte strings made valid UTF-8 for what profiles carry.
//
// pprof's and OTLP's strings are protobuf `string` fields, which must be
// UTF-8: Go's protobuf decoder (a Collector, Pyroscope) refuses a whole
// message over one invalid byte. Ruby lets a thread, a method or a file be
// named with any bytes; those are written with each invalid byte replaced.
#ifndef SONDE_UTF8_TEXT_H
#define SONDE_UTF8_TEXT_H

#include <stdbool.h>
#include <stddef.h>

// Whether s[0..len) is valid UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF). NUL is a valid character.
bool utf8_text_valid(const char *s, size_t len);

// Room utf8_text_scrub needs for len bytes: each may become U+FFFD (3
// bytes). 0 when that does not fit in a size_t.
size_t utf8_text_scrubbed_capacity(size_t len);

// Copies s[0..len) into out (utf8_text_scrubbed_capacity(len) bytes), each
// byte that does not start a valid sequence replaced by U+FFFD; returns the
// length written.
size_t utf8_text_scrub(const char *s, size_t len, char *out);

#endif
