// stats.h: puts one stat into the Hash that Sonde.stats returns (each
// source's add_stats, event_source.h). One function per kind of value, so
// a value converts the same way in every file: the kind is in the name,
// not in a local macro's cast.
//
// With the GVL only (they allocate Ruby objects); key is a NUL-terminated
// name, stored as a Symbol.
#ifndef SONDE_STATS_H
#define SONDE_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

// A count or a total that cannot be negative: an Integer.
void stats_put_count(VALUE stats, const char *key, uint64_t count);
// A signed quantity (a sum of clock differences, which a clock read
// out of order can make negative): an Integer, negative when it is.
void stats_put_signed(VALUE stats, const char *key, int64_t value);
// true or false.
void stats_put_flag(VALUE stats, const char *key, bool flag);
// A rate, a share or seconds: a Float.
void stats_put_number(VALUE stats, const char *key, double value);

#endif
