// deny_timer_create.c: runs a command under a seccomp filter that makes
// timer_create(2) fail with EPERM, as a container runtime's seccomp profile
// or a sandbox policy may. Everything else is allowed. Test-only.
//
//   deny_timer_create COMMAND [ARGS...]
//
// Built by the tests that use it (test/cpu_timer_fallback_test.rb).
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny_timer_create COMMAND [ARGS...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      // Only this architecture's system call numbers are known here.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_timer_create, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    fprintf(stderr, "deny_timer_create: could not install the seccomp filter: %s\n", strerror(errno));
    return 3;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "deny_timer_create: could not run %s: %s\n", argv[1], strerror(errno));
  return 127;
}
