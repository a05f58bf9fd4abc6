// test_harness.h: the smallest harness the C unit tests need. Each CHECK
// counts a pass or prints the failing expression with its file and line; a
// test goes on after a failure so one run shows every broken check.
// test_summary prints "<suite>: N passed, M failed" and returns the exit code.
//
// Header-only and static, so each test binary gets its own counters; the
// functions are static inline so a test that does not use one of them still
// compiles under -Werror.
#ifndef SONDE_TEST_HARNESS_H
#define SONDE_TEST_HARNESS_H

#include <stdio.h>
#include <string.h>

static int test_passed_count;
static int test_failed_count;

static inline int test_check(int ok, const char *expression, const char *file, int line) {
  if (ok) {
    test_passed_count++;
  } else {
    test_failed_count++;
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expression);
  }
  return ok;
}

static inline int test_check_eq_int(long long actual, long long expected, const char *actual_text,
                                    const char *expected_text, const char *file, int line) {
  if (actual == expected) return test_check(1, actual_text, file, line);
  test_check(0, actual_text, file, line);
  fprintf(stderr, "    %s == %lld, expected %s == %lld\n", actual_text, actual, expected_text, expected);
  return 0;
}

static inline int test_check_eq_str(const char *actual, const char *expected, const char *actual_text,
                                    const char *expected_text, const char *file, int line) {
  int ok = actual && expected ? strcmp(actual, expected) == 0 : actual == expected;
  if (ok) return test_check(1, actual_text, file, line);
  test_check(0, actual_text, file, line);
  fprintf(stderr, "    %s == \"%s\", expected %s == \"%s\"\n", actual_text, actual ? actual : "(null)", expected_text,
          expected ? expected : "(null)");
  return 0;
}

// Each evaluates to 1 when the check passed, so a test can stop early:
// if (!CHECK(p != NULL)) return;
#define CHECK(cond) test_check(!!(cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ_INT(a, b) test_check_eq_int((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__)
#define CHECK_EQ_STR(a, b) test_check_eq_str((a), (b), #a, #b, __FILE__, __LINE__)

// Runs one test function (void fn(void)), naming it if any of its checks fail.
#define RUN(test_fn) test_run(test_fn, #test_fn)

static inline void test_run(void (*test_fn)(void), const char *name) {
  int failed_before = test_failed_count;
  test_fn();
  if (test_failed_count != failed_before)
    fprintf(stderr, "FAILED: %s (%d checks)\n", name, test_failed_count - failed_before);
}

static inline int test_summary(const char *suite) {
  printf("%s: %d passed, %d failed\n", suite, test_passed_count, test_failed_count);
  return test_failed_count ? 1 : 0;
}

#endif
