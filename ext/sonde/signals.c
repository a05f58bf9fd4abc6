// signals.c: installs, replaces and blocks SIGPROF.
//
// The handler here is where Sonde's code inside a signal handler starts. It
// saves and restores errno (the interrupted code may be about to read it),
// counts itself in and out (so that stop can wait until no handler is
// running before it frees what handlers read) and calls the one callback it
// was given, with the signal's siginfo; the callback is written before
// sigaction publishes the handler, so it is never seen half-set.
#define _GNU_SOURCE
#include "signals.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "current_ids.h"
#include "shared.h"

static signals_callback sampling_callback; // atomic

// Set by the trigger thread when it finds that another library replaced the
// sampling handler while Sonde ran, and by signals_give_up (a Ruby thread,
// under send_lock); cleared when the handler is installed, before the
// trigger exists. Atomic: read without the lock on both kinds of thread.
static bool sampling_handler_lost;

// Handlers running now, on any thread.
static unsigned handlers_running;

static void sampling_handler(int signal_number, siginfo_t *info, void *context) {
  int saved_errno = errno;
  shared_add_seq(&handlers_running, 1);
  signals_callback callback = shared_load_seq(&sampling_callback);
  if (callback != NULL) callback(info);
  shared_sub_seq(&handlers_running, 1);
  errno = saved_errno;
}

void signals_wait_for_running_handlers(void) {
  // A handler runs for microseconds; a thread stopped in one (by a
  // debugger) would hold this up, which is what must not be skipped.
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 50000};
  while (shared_load_seq(&handlers_running) != 0) nanosleep(&pause, NULL);
}

static void empty_handler(int signal_number, siginfo_t *info, void *context) {}

static bool is_ours(const struct sigaction *action) {
  if (!(action->sa_flags & SA_SIGINFO)) return false;
  return action->sa_sigaction == sampling_handler || action->sa_sigaction == empty_handler;
}

static bool is_default_or_ignored(const struct sigaction *action) {
  if (action->sa_flags & SA_SIGINFO) return false;
  return action->sa_handler == SIG_DFL || action->sa_handler == SIG_IGN;
}

// Names the foreign handler for the error message, by the library it is in.
static void describe_handler(const struct sigaction *action, char *out, size_t size) {
  void *address = (action->sa_flags & SA_SIGINFO) ? (void *)action->sa_sigaction : (void *)action->sa_handler;
  Dl_info info;
  if (dladdr(address, &info) != 0 && info.dli_fname != NULL) {
    snprintf(out, size, "%s in %s", info.dli_sname ? info.dli_sname : "a function", info.dli_fname);
  } else {
    snprintf(out, size, "a function at %p", address);
  }
}

static bool install(void (*handler)(int, siginfo_t *, void *)) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a syscall interrupted by our signal resumes instead of failing with EINTR.
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  action.sa_sigaction = handler;
  return sigaction(SIGPROF, &action, NULL) == 0;
}

sonde_status signals_install_sampling_handler(signals_callback on_signal, char *error, size_t error_size) {
  struct sigaction current;
  if (sigaction(SIGPROF, NULL, &current) != 0) {
    snprintf(error, error_size, "could not read the SIGPROF handler: %s", strerror(errno));
    return SONDE_SIGNAL_FAILED;
  }
  if (!is_ours(&current) && !is_default_or_ignored(&current)) {
    char who[512];
    describe_handler(&current, who, sizeof(who));
    snprintf(error, error_size,
             "another SIGPROF handler is installed (%s); is another profiler (StackProf, "
             "Datadog, ...) running? Stop it before starting Sonde, or start Sonde with signals: false",
             who);
    return SONDE_SIGNAL_CONFLICT;
  }
  shared_store_seq(&sampling_callback, on_signal);
  shared_store_seq(&sampling_handler_lost, false);
  if (!install(sampling_handler)) {
    snprintf(error, error_size, "could not install the SIGPROF handler: %s", strerror(errno));
    return SONDE_SIGNAL_FAILED;
  }
  return SONDE_OK;
}

bool signals_sampling_handler_in_place(void) {
  if (shared_load_seq(&sampling_handler_lost)) return false;
  struct sigaction current;
  if (sigaction(SIGPROF, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
      current.sa_sigaction == sampling_handler) {
    return true;
  }
  // Taken over (or unreadable, which cannot be told apart from it): a signal
  // sent now could land in someone else's handler, or kill the process if
  // they reset SIGPROF to its default.
  shared_store_seq(&sampling_handler_lost, true);
  return false;
}

bool signals_sampling_handler_lost(void) { return shared_load_seq(&sampling_handler_lost); }

void signals_install_empty_handler(void) {
  // First, whatever the disposition: a library that took SIGPROF over may
  // put our handler back later (restoring what it found), and it must then
  // find nothing to call.
  shared_store_seq(&sampling_callback, NULL);
  struct sigaction current;
  if (sigaction(SIGPROF, NULL, &current) != 0) return;
  // Someone else took SIGPROF over while we ran: theirs now, leave it be.
  if (!is_ours(&current)) return;
  install(empty_handler); // sampling_handler stays valid if this fails; it checks for a callback
}

void signals_block_in_current_thread(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

// Held across "is the handler ours?" and the send, and by signals_give_up.
static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;

// tgkill, not pthread_kill: the tick's target is the GVL owner as read a
// moment before, and it may have ended since. pthread_kill reads the
// target's descriptor, which glibc frees with the thread's stack: the
// trigger crashed so (SIGSEGV in pthread_kill, the target's stack no longer
// mapped) in 7 runs of 40 of 200 threads started at once on 3.4. tgkill
// reads nothing of the target's and fails with ESRCH. A tid reused since by
// a new thread of this process gets a signal whose handler finds that it
// does not hold the GVL and takes no sample.
signal_send_result signals_send_sigprof_if_handler_in_place(pid_t tid) {
  pthread_mutex_lock(&send_lock);
  signal_send_result result = SIGNAL_HANDLER_LOST;
  if (signals_sampling_handler_in_place()) {
    result = syscall(SYS_tgkill, current_pid_signal_safe(), tid, SIGPROF) == 0 ? SIGNAL_SENT : SIGNAL_FAILED;
  }
  pthread_mutex_unlock(&send_lock);
  return result;
}

// Holding send_lock across fork means no signal of Sonde's is being sent
// then. It was needed with pthread_kill, which took a lock of glibc's in
// the target's descriptor: a forked worker whose parent's trigger was
// inside it hung at its first send. tgkill takes no lock of glibc's; the
// hold stays so that the fork never lands in the middle of a send.
static void hold_sends_before_fork(void) { pthread_mutex_lock(&send_lock); }
static void release_sends_in_parent(void) { pthread_mutex_unlock(&send_lock); }

void signals_hold_sends_across_fork(void) { pthread_atfork(hold_sends_before_fork, release_sends_in_parent, NULL); }

void signals_give_up(void) {
  pthread_mutex_lock(&send_lock);
  shared_store_seq(&sampling_handler_lost, true);
  pthread_mutex_unlock(&send_lock);
}

void signals_warn_handler_lost(void) {
  fprintf(stderr, "sonde: another SIGPROF handler replaced Sonde's while it ran; Sonde leaves it in place, "
                  "sends no more signals and samples as in no-signals mode until it stops\n");
}

// The lock may have been held, and handlers counted as running, by threads
// that do not exist in the child: left as they were, halting the child's
// run would wait forever for handlers that will never return.
void signals_reset_in_forked_child(void) {
  pthread_mutex_init(&send_lock, NULL);
  shared_store_seq(&handlers_running, 0);
}
