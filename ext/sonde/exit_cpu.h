// exit_cpu.h: the CPU time ended threads spent after Ruby let them go.
//
// On Ruby 3.3+ a thread's last event (EXITED) is not its last CPU time: its
// native thread still exits after it (about 8 us on 3.4, 10% of a process
// that makes 15,000 threads a second), and no thread clock can be read
// once the thread is gone. That time is found from the process's clock:
// what the process used since the run began, less what its live threads
// used (each one's clock, every thread in /proc/self/task: Sonde's own,
// Ruby's timer thread and other Ractors' too) and what ended threads'
// clocks read at their EXITED events (vm_exited_threads_clock_ns). What is
// left is what threads spent after their EXITED, and the whole life of any
// non-Ruby thread that ended during the run.
//
// Every call needs the GVL (run start, flush, stop); each reads
// /proc/self/task and one clock per thread (system calls): never in a
// signal handler, never per sample.
#ifndef SONDE_EXIT_CPU_H
#define SONDE_EXIT_CPU_H

#include <stdint.h>

typedef struct exit_cpu exit_cpu;

// The baselines, at the start of a run. NULL where this Ruby reports no
// EXITED clocks (3.1, whose native threads are reused: the next thread
// counts the end of the last) or /proc/self/task cannot be read.
exit_cpu *exit_cpu_start(void);

void exit_cpu_free(exit_cpu *accounting);

// What ended threads spent after their EXITED event since the previous
// call (0 or more). Every error of the race with threads starting and
// ending while it reads makes it smaller for this call, never larger: the
// time is then handed out by a later call.
int64_t exit_cpu_take_ns(exit_cpu *accounting);

#endif
