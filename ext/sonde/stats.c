// stats.c: putting one stat into the stats Hash (stats.h).
//
// Contexts: with the GVL, from a source's add_stats (Sonde.stats, and the
// stop and flushes that keep the last stats). Allocates Ruby objects; never
// runs in a signal handler, during GC or without the GVL.
#include "stats.h"

static void put(VALUE stats, const char *key, VALUE value) { rb_hash_aset(stats, ID2SYM(rb_intern(key)), value); }

void stats_put_count(VALUE stats, const char *key, uint64_t count) {
  put(stats, key, ULL2NUM((unsigned long long)count));
}

void stats_put_signed(VALUE stats, const char *key, int64_t value) { put(stats, key, LL2NUM((long long)value)); }

void stats_put_flag(VALUE stats, const char *key, bool flag) { put(stats, key, flag ? Qtrue : Qfalse); }

void stats_put_number(VALUE stats, const char *key, double value) { put(stats, key, DBL2NUM(value)); }
