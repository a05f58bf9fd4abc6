// stats.h: puts one stat into the Hash that Sonde.stats returns (each
// source's add_stats, event_source.h). One function per kind of value, so
// a value converts the same way in every file: the kind is in the name,
// not in a local macro's cast.
//
// With the GVL only (they allocate Ruby objects). key is a string literal:
// each stats_put_* below is a macro that looks its Symbol up once per call
// site (rb_intern's per-site cache) and calls the function of the same kind
// with the ID; a lookup per call doubled what Sonde.stats cost.
#ifndef SONDE_STATS_H
#define SONDE_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include <ruby.h>

// A count or a total that cannot be negative: an Integer.
void stats_put_count_id(VALUE stats, ID key, uint64_t count);
// A signed quantity (a sum of clock differences, which a clock read
// out of order can make negative): an Integer, negative when it is.
void stats_put_signed_id(VALUE stats, ID key, int64_t value);
// true or false.
void stats_put_flag_id(VALUE stats, ID key, bool flag);
// A rate, a share or seconds: a Float.
void stats_put_number_id(VALUE stats, ID key, double value);

#define stats_put_count(stats, key, count) stats_put_count_id((stats), rb_intern(key), (count))
#define stats_put_signed(stats, key, value) stats_put_signed_id((stats), rb_intern(key), (value))
#define stats_put_flag(stats, key, flag) stats_put_flag_id((stats), rb_intern(key), (flag))
#define stats_put_number(stats, key, value) stats_put_number_id((stats), rb_intern(key), (value))

#endif
