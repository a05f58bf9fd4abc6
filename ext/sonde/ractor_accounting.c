// ractor_accounting.c: what a profile leaves out of other Ractors (see the
// header).
//
// Constraints: the GVL, on the main Ractor, in plain calls only (the header
// says which); may call Ruby methods and allocate.
//
// Why it is needed: each Ractor runs its threads in parallel with its own
// GVL, and nothing Sonde may safely do reads another Ractor's threads while
// they run (vm.h: vm_on_main_ractor). So those threads are left out, and
// the profile says how many Ractors ran and how much of the process's CPU
// (CLOCK_PROCESS_CPUTIME_ID: every thread, ended ones included) is not in
// it. The gap also holds Sonde's own threads' CPU and each thread's CPU
// since its last sample, a few percent at most in a program without
// Ractors.
#include "ractor_accounting.h"

#include <stdio.h>
#include <time.h>

#include <ruby/ractor.h>

#include "clocks.h"
#include "stats.h"

static uint64_t other_ractors_alive(void) {
  long count = NUM2LONG(rb_funcall(rb_cRactor, rb_intern("count"), 0));
  return count > 1 ? (uint64_t)(count - 1) : 0;
}

bool ractor_accounting_others_alive(void) { return other_ractors_alive() > 0; }

static int64_t process_cpu_ns(void) { return clocks_cpu_ns(CLOCK_PROCESS_CPUTIME_ID); }

static void note_alive(ractor_accounting *accounting, uint64_t alive) {
  if (alive > accounting->most_alive) accounting->most_alive = alive;
}

void ractor_accounting_start(ractor_accounting *accounting) {
  uint64_t alive = other_ractors_alive();
  *accounting = (ractor_accounting){.alive_at_start = alive, .alive_at_period_start = alive, .most_alive = alive};
  accounting->run_start_cpu_ns = accounting->period_start_cpu_ns = process_cpu_ns();
}

void ractor_accounting_note_created(ractor_accounting *accounting) {
  accounting->created++;
  accounting->created_in_period++;
}

// Ractors created by other Ractors are seen only while alive at a flush or
// the stop: the Ractor.new hook counts those the main Ractor makes.
static uint64_t ran_in_period(const ractor_accounting *accounting, uint64_t alive_now) {
  uint64_t known = accounting->alive_at_period_start + accounting->created_in_period;
  return known > alive_now ? known : alive_now;
}

static double seconds(int64_t ns) { return (double)ns / 1e9; }

VALUE ractor_accounting_end_period(ractor_accounting *accounting, const recorder *rec, VALUE comments, bool final) {
  uint64_t alive = other_ractors_alive();
  int64_t now_cpu = process_cpu_ns();
  int64_t profiled = recorder_total(rec, RECORDER_CPU_TIME_NS);
  int64_t process = now_cpu > accounting->period_start_cpu_ns ? now_cpu - accounting->period_start_cpu_ns : 0;
  uint64_t ran = ran_in_period(accounting, alive);
  VALUE result = NIL_P(comments) ? rb_ary_new() : rb_ary_dup(comments);
  if (ran > 0) {
    char note[320];
    snprintf(note, sizeof(note),
             "sonde: threads and allocations of other Ractors are not sampled (Sonde samples the main Ractor's only): "
             "%llu other Ractor%s ran; this profile holds %.3f s of the process's %.3f s of CPU time (%.0f%%)",
             (unsigned long long)ran, ran == 1 ? "" : "s", seconds(profiled), seconds(process),
             process > 0 ? 100.0 * (double)profiled / (double)process : 100.0);
    rb_ary_push(result, rb_str_new_cstr(note));
  }
  // Only once nothing above can raise: a failed period leaves the counts as they were.
  note_alive(accounting, alive);
  accounting->flushed_cpu_ns += profiled;
  accounting->period_start_cpu_ns = now_cpu;
  accounting->alive_at_period_start = alive;
  accounting->created_in_period = 0;
  if (final) accounting->final_period_taken = true;
  return RARRAY_LEN(result) == 0 && NIL_P(comments) ? Qnil : result;
}

void ractor_accounting_add_stats(const ractor_accounting *accounting, const recorder *active, VALUE stats) {
  uint64_t known = accounting->alive_at_start + accounting->created;
  uint64_t other = known > accounting->most_alive ? known : accounting->most_alive;
  int64_t profiled = accounting->flushed_cpu_ns +
                     (accounting->final_period_taken ? 0 : recorder_total(active, RECORDER_CPU_TIME_NS));
  int64_t now_cpu = process_cpu_ns();
  int64_t process = now_cpu > accounting->run_start_cpu_ns ? now_cpu - accounting->run_start_cpu_ns : 0;
  stats_put_count(stats, "other_ractors", other);
  stats_put_number(stats, "process_cpu_seconds", seconds(process));
  stats_put_number(stats, "profiled_cpu_seconds", seconds(profiled));
}
