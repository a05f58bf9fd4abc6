// profiler.h: Sonde::Native's methods (profiler.c) and its test hooks
// (testing.c).
#ifndef SONDE_PROFILER_H
#define SONDE_PROFILER_H

#include <ruby.h>

// Defines Sonde::Native.start, stop, flush, stats, ... on the module the
// loader gives, and registers the fork and exit hooks. Once, at load.
void profiler_define_methods(VALUE native);

// Defines Sonde::Native::Testing, the hooks tests use to reach paths a
// healthy run never takes. Once, at load.
void testing_define_methods(VALUE native);

#endif
