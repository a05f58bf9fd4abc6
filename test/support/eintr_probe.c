// eintr_probe.c: a test-only Ruby extension standing in for a C library
// that blocks in system calls while holding the GVL, and counts how often
// those calls fail with EINTR instead of retrying them.
//
// EintrProbe.poll_pipe(seconds) blocks in poll(2) on a pipe nobody writes,
//   in slices, for `seconds`; returns how many polls returned EINTR. poll is
//   never restarted by SA_RESTART, so every signal that lands shows.
// EintrProbe.read_pipe(seconds) blocks in read(2) on a pipe that a helper
//   thread writes to after `seconds`; returns how many reads returned EINTR
//   (SA_RESTART restarts read, so none are expected).
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <ruby.h>

#define MILLIS_PER_SECOND 1000

static long monotonic_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * MILLIS_PER_SECOND + now.tv_nsec / 1000000;
}

static VALUE poll_pipe(VALUE self, VALUE seconds) {
  int fds[2];
  if (pipe(fds) != 0) rb_sys_fail("pipe");
  long deadline = monotonic_ms() + (long)(NUM2DBL(seconds) * MILLIS_PER_SECOND);
  long interrupted = 0;
  for (long left; (left = deadline - monotonic_ms()) > 0;) {
    struct pollfd wait = {.fd = fds[0], .events = POLLIN};
    if (poll(&wait, 1, (int)left) < 0 && errno == EINTR) interrupted++;
  }
  close(fds[0]);
  close(fds[1]);
  return LONG2NUM(interrupted);
}

typedef struct {
  int fd;
  long delay_ms;
} delayed_write;

static void *write_later(void *arg) {
  delayed_write *job = arg;
  struct timespec delay = {job->delay_ms / MILLIS_PER_SECOND, (job->delay_ms % MILLIS_PER_SECOND) * 1000000};
  nanosleep(&delay, NULL);
  ssize_t written = write(job->fd, "x", 1);
  (void)written;
  return NULL;
}

static VALUE read_pipe(VALUE self, VALUE seconds) {
  int fds[2];
  if (pipe(fds) != 0) rb_sys_fail("pipe");
  delayed_write job = {fds[1], (long)(NUM2DBL(seconds) * MILLIS_PER_SECOND)};
  pthread_t writer;
  if (pthread_create(&writer, NULL, write_later, &job) != 0) rb_raise(rb_eRuntimeError, "pthread_create failed");
  long interrupted = 0;
  char byte;
  while (read(fds[0], &byte, 1) < 0) {
    if (errno != EINTR) break;
    interrupted++;
  }
  pthread_join(writer, NULL);
  close(fds[0]);
  close(fds[1]);
  return LONG2NUM(interrupted);
}

void Init_eintr_probe(void) {
  VALUE probe = rb_define_module("EintrProbe");
  rb_define_module_function(probe, "poll_pipe", poll_pipe, 1);
  rb_define_module_function(probe, "read_pipe", read_pipe, 1);
}
