// exit_cpu.c: the CPU time ended threads spent after Ruby let them go
// (see the header). With the GVL only; reads /proc/self/task.
//
// Reading order is what keeps every race an undercount: the process's
// clock first (a thread's time after it is on no side), then the live
// threads (a thread read live and ending before the EXITED total is read
// is counted twice: smaller), then the EXITED total (a thread that ended
// while the live threads were read is in it).
#include "exit_cpu.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "clocks.h"
#include "vm.h"

typedef struct {
  int64_t tid;
  int64_t base_ns; // its CPU clock when the run started
  // A thread of the main Ractor then: its EXITED clock will count its life
  // before the run too, which its base then takes back out.
  bool ruby;
  bool gone;
  bool seen; // in the current call's listing
} start_thread;

struct exit_cpu {
  int64_t process_base_ns;
  int64_t exited_base_ns;
  start_thread *threads; // sorted by tid
  size_t count;
  int64_t gone_ruby_bases_ns; // bases of the start's Ruby threads gone since
  int64_t taken_ns;           // handed out so far
};

typedef void (*task_visitor)(int64_t tid, int64_t cpu_ns, void *data);

// Each thread of the process with its CPU clock; false if /proc cannot be read.
static bool each_task(task_visitor visit, void *data) {
  DIR *dir = opendir("/proc/self/task");
  if (dir == NULL) return false;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    char *end;
    long long tid = strtoll(entry->d_name, &end, 10);
    if (*end != '\0' || tid <= 0) continue;
    clockid_t clock;
    if (!clocks_thread_cpu_clock(tid, &clock)) continue;
    int64_t cpu = clocks_cpu_ns(clock);
    if (cpu >= 0) visit(tid, cpu, data); // -1: it ended since the listing
  }
  closedir(dir);
  return true;
}

static start_thread *find(exit_cpu *accounting, int64_t tid) {
  size_t low = 0, high = accounting->count;
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    if (accounting->threads[middle].tid < tid) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low < accounting->count && accounting->threads[low].tid == tid ? &accounting->threads[low] : NULL;
}

typedef struct {
  exit_cpu *accounting;
  size_t capacity;
  bool failed;
} start_listing;

static void add_start_thread(int64_t tid, int64_t cpu_ns, void *data) {
  start_listing *listing = data;
  exit_cpu *accounting = listing->accounting;
  if (accounting->count == listing->capacity) {
    size_t capacity = listing->capacity ? listing->capacity * 2 : 16;
    start_thread *grown = realloc(accounting->threads, capacity * sizeof(*grown));
    if (grown == NULL) {
      listing->failed = true;
      return;
    }
    accounting->threads = grown;
    listing->capacity = capacity;
  }
  accounting->threads[accounting->count++] = (start_thread){.tid = tid, .base_ns = cpu_ns};
}

static int by_tid(const void *a, const void *b) {
  int64_t left = ((const start_thread *)a)->tid, right = ((const start_thread *)b)->tid;
  return (left > right) - (left < right);
}

static void mark_ruby_thread(const vm_thread_info *info, void *data) {
  start_thread *thread = find(data, info->native_tid);
  if (thread != NULL) thread->ruby = true;
}

exit_cpu *exit_cpu_start(void) {
  int64_t exited = vm_exited_threads_clock_ns();
  if (exited < 0) return NULL;
  exit_cpu *accounting = calloc(1, sizeof(*accounting));
  if (accounting == NULL) return NULL;
  accounting->process_base_ns = clocks_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  start_listing listing = {.accounting = accounting};
  if (!each_task(add_start_thread, &listing) || listing.failed || accounting->process_base_ns < 0) {
    exit_cpu_free(accounting);
    return NULL;
  }
  qsort(accounting->threads, accounting->count, sizeof(*accounting->threads), by_tid);
  vm_each_thread(clocks_monotonic_ns(), mark_ruby_thread, accounting);
  accounting->exited_base_ns = vm_exited_threads_clock_ns();
  return accounting;
}

void exit_cpu_free(exit_cpu *accounting) {
  if (accounting == NULL) return;
  free(accounting->threads);
  free(accounting);
}

// Enough for the ring vm.h keeps.
#define RECENT_EXITS_MAX 256

typedef struct {
  exit_cpu *accounting;
  int64_t live_ns; // what live threads used since the start (or their birth)
  int64_t exited[RECENT_EXITS_MAX]; // sorted
  size_t exited_count;
} live_sum;

static int by_value(const void *a, const void *b) {
  int64_t left = *(const int64_t *)a, right = *(const int64_t *)b;
  return (left > right) - (left < right);
}

static void add_live_thread(int64_t tid, int64_t cpu_ns, void *data) {
  live_sum *sum = data;
  // Past its EXITED, its native thread still exiting: its clock is in the
  // EXITED total already.
  if (bsearch(&tid, sum->exited, sum->exited_count, sizeof(int64_t), by_value) != NULL) return;
  start_thread *thread = find(sum->accounting, tid);
  // A tid of a start thread gone since is a new thread's.
  int64_t base = thread != NULL && !thread->gone ? thread->base_ns : 0;
  if (thread != NULL) thread->seen = true;
  sum->live_ns += cpu_ns > base ? cpu_ns - base : 0;
}

int64_t exit_cpu_take_ns(exit_cpu *accounting) {
  if (accounting == NULL) return 0;
  int64_t process = clocks_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (size_t i = 0; i < accounting->count; i++) accounting->threads[i].seen = false;
  live_sum sum = {.accounting = accounting};
  sum.exited_count = vm_recently_exited_tids(sum.exited, RECENT_EXITS_MAX);
  qsort(sum.exited, sum.exited_count, sizeof(int64_t), by_value);
  if (process < 0 || !each_task(add_live_thread, &sum)) return 0;
  for (size_t i = 0; i < accounting->count; i++) {
    start_thread *thread = &accounting->threads[i];
    if (thread->seen || thread->gone) continue;
    thread->gone = true;
    if (thread->ruby) accounting->gone_ruby_bases_ns += thread->base_ns;
  }
  int64_t exited = vm_exited_threads_clock_ns() - accounting->exited_base_ns - accounting->gone_ruby_bases_ns;
  int64_t unaccounted = (process - accounting->process_base_ns) - sum.live_ns - exited;
  if (unaccounted <= accounting->taken_ns) return 0;
  int64_t fresh = unaccounted - accounting->taken_ns;
  accounting->taken_ns = unaccounted;
  return fresh;
}
