// cpu_timer_source.h: CPU samples from the thread that used the CPU, as an
// event source. Each profiled thread gets a CPU timer (cpu_timers.h) when
// Sonde meets it: at start for the threads alive then, at its first
// instruction for a thread born later (a thread-begin hook), or at the
// first pass that sees it. Its signals are read by the SIGPROF handler
// (signal_sampler.h) and recorded by the sampling pass.
#ifndef SONDE_CPU_TIMER_SOURCE_H
#define SONDE_CPU_TIMER_SOURCE_H

#include "event_source.h"

extern const event_source cpu_timer_source;

#endif
