// thread_starts.c: the thread-start benchmark's C control
// (bench/thread_start_in_c.rb). A C program starts and joins threads one
// after another, as bench/thread_start_in_process.rb makes Ruby do, in
// rounds of slices: with nothing beside it (twice: the second is the
// noise), with one and with two native threads that only sleep. It prints
// each kind's process CPU per thread (us, median over rounds) and the
// median of its slice over the round's first unprofiled one.
//
//   thread_starts ROUNDS THREADS_PER_SLICE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { KINDS = 4, MAX_ROUNDS = 1000 };
static const char *const KIND_NAMES[KINDS] = {"none", "none (A/A)", "one sleeping thread", "two sleeping threads"};
static const int SLEEPERS[KINDS] = {0, 0, 1, 2};

// What each started thread does: the Ruby slices' block sums 8 squares.
static void *work(void *unused) {
  volatile long sum = 0;
  for (int i = 0; i < 8; i++) sum += i * i;
  return unused;
}

static void *sleep_until_cancelled(void *unused) {
  for (;;) sleep(3600); // a cancellation point
  return unused;
}

static double process_cpu_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *values, int count) {
  qsort(values, (size_t)count, sizeof(double), compare_doubles);
  return values[count / 2];
}

static double slice_us_per_thread(int threads) {
  double started = process_cpu_seconds();
  for (int i = 0; i < threads; i++) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, work, NULL) != 0) abort();
    pthread_join(thread, NULL);
  }
  return (process_cpu_seconds() - started) * 1e6 / threads;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 60, threads = argc > 2 ? atoi(argv[2]) : 2000;
  if (rounds < 1 || rounds > MAX_ROUNDS || threads < 1) {
    fprintf(stderr, "usage: thread_starts ROUNDS(1-%d) THREADS_PER_SLICE\n", MAX_ROUNDS);
    return 2;
  }
  static double us[KINDS][MAX_ROUNDS], ratios[KINDS][MAX_ROUNDS];
  srand(1);
  for (int round = 0; round < rounds; round++) {
    int order[KINDS] = {0, 1, 2, 3};
    for (int i = KINDS - 1; i > 0; i--) {
      int j = rand() % (i + 1), swap = order[i];
      order[i] = order[j];
      order[j] = swap;
    }
    for (int k = 0; k < KINDS; k++) {
      int kind = order[k];
      pthread_t sleepers[2];
      for (int i = 0; i < SLEEPERS[kind]; i++) pthread_create(&sleepers[i], NULL, sleep_until_cancelled, NULL);
      usleep(1000); // asleep before the slice
      us[kind][round] = slice_us_per_thread(threads);
      for (int i = 0; i < SLEEPERS[kind]; i++) {
        pthread_cancel(sleepers[i]);
        pthread_join(sleepers[i], NULL);
      }
    }
    for (int kind = 0; kind < KINDS; kind++) ratios[kind][round] = us[kind][round] / us[0][round];
  }
  for (int kind = 0; kind < KINDS; kind++) {
    printf("| %s | %.1f | %.3f |\n", KIND_NAMES[kind], median(us[kind], rounds), median(ratios[kind], rounds));
  }
  return 0;
}
