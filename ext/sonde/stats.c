// stats.c: putting one stat into the stats Hash (stats.h).
//
// Contexts: with the GVL, from a source's add_stats (Sonde.stats, and the
// stop and flushes that keep the last stats). Allocates Ruby objects; never
// runs in a signal handler, during GC or without the GVL.
#include "stats.h"

static void put(VALUE stats, ID key, VALUE value) { rb_hash_aset(stats, ID2SYM(key), value); }

void stats_put_count_id(VALUE stats, ID key, uint64_t count) { put(stats, key, ULL2NUM((unsigned long long)count)); }

void stats_put_signed_id(VALUE stats, ID key, int64_t value) { put(stats, key, LL2NUM((long long)value)); }

void stats_put_flag_id(VALUE stats, ID key, bool flag) { put(stats, key, flag ? Qtrue : Qfalse); }

void stats_put_number_id(VALUE stats, ID key, double value) { put(stats, key, DBL2NUM(value)); }
