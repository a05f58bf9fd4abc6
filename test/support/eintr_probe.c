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
// EintrProbe.select_pipe(seconds) like poll_pipe, with select(2) (never
//   restarted either).
// EintrProbe.nanosleep_for(seconds) sleeps in nanosleep(2), going on with
//   the time left after each EINTR; returns how many it saw (nanosleep is
//   never restarted).
// EintrProbe.accept_socket(seconds) blocks in accept(2) on a loopback TCP
//   socket that a helper thread connects to after `seconds`; returns how
//   many accepts returned EINTR (restarted by SA_RESTART on a socket without
//   a receive timeout, so none are expected).
// EintrProbe.storm_start(hz) starts a helper thread that sends SIGPROF to
//   the calling thread hz times a second, wherever it is (in a blocking
//   call most of the time), as a signal aimed at the GVL holder does when
//   that thread has just let the GVL go. Needs a SIGPROF handler installed.
// EintrProbe.storm_stop stops it; returns how many signals it sent.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/socket.h>
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

static VALUE select_pipe(VALUE self, VALUE seconds) {
  int fds[2];
  if (pipe(fds) != 0) rb_sys_fail("pipe");
  long deadline = monotonic_ms() + (long)(NUM2DBL(seconds) * MILLIS_PER_SECOND);
  long interrupted = 0;
  for (long left; (left = deadline - monotonic_ms()) > 0;) {
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(fds[0], &readable);
    struct timeval timeout = {left / MILLIS_PER_SECOND, (left % MILLIS_PER_SECOND) * 1000};
    if (select(fds[0] + 1, &readable, NULL, NULL, &timeout) < 0 && errno == EINTR) interrupted++;
  }
  close(fds[0]);
  close(fds[1]);
  return LONG2NUM(interrupted);
}

static VALUE nanosleep_for(VALUE self, VALUE seconds) {
  double total = NUM2DBL(seconds);
  struct timespec left = {(time_t)total, (long)((total - (double)(time_t)total) * 1e9)};
  long interrupted = 0;
  while (nanosleep(&left, &left) != 0) {
    if (errno != EINTR) break;
    interrupted++;
  }
  return LONG2NUM(interrupted);
}

typedef struct {
  struct sockaddr_in address;
  long delay_ms;
} delayed_connect;

static void *connect_later(void *arg) {
  delayed_connect *job = arg;
  struct timespec delay = {job->delay_ms / MILLIS_PER_SECOND, (job->delay_ms % MILLIS_PER_SECOND) * 1000000};
  nanosleep(&delay, NULL);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  if (client >= 0) {
    int connected = connect(client, (struct sockaddr *)&job->address, sizeof(job->address));
    (void)connected;
    close(client);
  }
  return NULL;
}

static VALUE accept_socket(VALUE self, VALUE seconds) {
  int server = socket(AF_INET, SOCK_STREAM, 0);
  if (server < 0) rb_sys_fail("socket");
  delayed_connect job = {.delay_ms = (long)(NUM2DBL(seconds) * MILLIS_PER_SECOND)};
  job.address.sin_family = AF_INET;
  job.address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(job.address);
  if (bind(server, (struct sockaddr *)&job.address, sizeof(job.address)) != 0 || listen(server, 1) != 0 ||
      getsockname(server, (struct sockaddr *)&job.address, &length) != 0) {
    close(server);
    rb_sys_fail("bind/listen");
  }
  pthread_t connector;
  if (pthread_create(&connector, NULL, connect_later, &job) != 0) {
    close(server);
    rb_raise(rb_eRuntimeError, "pthread_create failed");
  }
  long interrupted = 0;
  int accepted;
  while ((accepted = accept(server, NULL, NULL)) < 0) {
    if (errno != EINTR) break;
    interrupted++;
  }
  pthread_join(connector, NULL);
  if (accepted >= 0) close(accepted);
  close(server);
  return LONG2NUM(interrupted);
}

typedef struct {
  pthread_t target;
  long interval_ns;
  volatile int stop;
  long sent;
} signal_storm;

static signal_storm storm;
static pthread_t storm_thread;
static int storm_running;

static void *send_signals(void *arg) {
  signal_storm *job = arg;
  struct timespec interval = {job->interval_ns / 1000000000L, job->interval_ns % 1000000000L};
  while (!job->stop) {
    if (pthread_kill(job->target, SIGPROF) == 0) job->sent++;
    nanosleep(&interval, NULL);
  }
  return NULL;
}

static VALUE storm_start(VALUE self, VALUE hz) {
  if (storm_running) rb_raise(rb_eRuntimeError, "a storm is already running");
  storm = (signal_storm){.target = pthread_self(), .interval_ns = 1000000000L / NUM2LONG(hz)};
  if (pthread_create(&storm_thread, NULL, send_signals, &storm) != 0) rb_raise(rb_eRuntimeError, "pthread_create failed");
  storm_running = 1;
  return Qnil;
}

static VALUE storm_stop(VALUE self) {
  if (!storm_running) return LONG2NUM(0);
  storm.stop = 1;
  pthread_join(storm_thread, NULL);
  storm_running = 0;
  return LONG2NUM(storm.sent);
}

void Init_eintr_probe(void) {
  VALUE probe = rb_define_module("EintrProbe");
  rb_define_module_function(probe, "poll_pipe", poll_pipe, 1);
  rb_define_module_function(probe, "read_pipe", read_pipe, 1);
  rb_define_module_function(probe, "select_pipe", select_pipe, 1);
  rb_define_module_function(probe, "nanosleep_for", nanosleep_for, 1);
  rb_define_module_function(probe, "accept_socket", accept_socket, 1);
  rb_define_module_function(probe, "storm_start", storm_start, 1);
  rb_define_module_function(probe, "storm_stop", storm_stop, 0);
}
