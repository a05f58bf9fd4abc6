// shared.h: every read and write of memory that two threads, or a thread
// and a signal handler, share goes through these names: the core's one
// door to the compiler's atomics. Each name says its memory order, so what
// a field needs is read where it is used:
//
//   relaxed   a counter, a clock, a value no other memory hangs on: only
//             the value itself is atomic (never torn, never lost);
//   acquire   a read after which the memory its writer published is seen;
//   release   a write that publishes the memory written before it;
//   acq_rel   both, in one read-modify-write;
//   seq       one total order over every seq access: for handshakes where
//             each side writes, then reads the other's flag (a park and its
//             wake-up, a handler count and the wait for it to drain).
//
// The types used with them (integers, bools, pointers up to 8 bytes) are
// lock-free here (checked below), so every one of these is safe in a
// signal handler. Pure C, no Ruby.
#ifndef SONDE_SHARED_H
#define SONDE_SHARED_H

#include <stdbool.h> // the compare-and-swap forms name `false`

#define shared_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define shared_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define shared_load_seq(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)

#define shared_store_relaxed(p, value) __atomic_store_n((p), (value), __ATOMIC_RELAXED)
#define shared_store_release(p, value) __atomic_store_n((p), (value), __ATOMIC_RELEASE)
#define shared_store_seq(p, value) __atomic_store_n((p), (value), __ATOMIC_SEQ_CST)

// Add and subtract: each returns the value before.
#define shared_add_relaxed(p, value) __atomic_fetch_add((p), (value), __ATOMIC_RELAXED)
#define shared_add_release(p, value) __atomic_fetch_add((p), (value), __ATOMIC_RELEASE)
#define shared_add_seq(p, value) __atomic_fetch_add((p), (value), __ATOMIC_SEQ_CST)
#define shared_sub_relaxed(p, value) __atomic_fetch_sub((p), (value), __ATOMIC_RELAXED)
#define shared_sub_release(p, value) __atomic_fetch_sub((p), (value), __ATOMIC_RELEASE)
#define shared_sub_seq(p, value) __atomic_fetch_sub((p), (value), __ATOMIC_SEQ_CST)
// Add, returning the value after.
#define shared_add_then_load_relaxed(p, value) __atomic_add_fetch((p), (value), __ATOMIC_RELAXED)

// Exchange: writes value, returns the value before.
#define shared_exchange_relaxed(p, value) __atomic_exchange_n((p), (value), __ATOMIC_RELAXED)
#define shared_exchange_acquire(p, value) __atomic_exchange_n((p), (value), __ATOMIC_ACQUIRE)
#define shared_exchange_acq_rel(p, value) __atomic_exchange_n((p), (value), __ATOMIC_ACQ_REL)
#define shared_exchange_seq(p, value) __atomic_exchange_n((p), (value), __ATOMIC_SEQ_CST)

// Compare and swap: writes desired when *p equals *expected and returns
// true; else copies *p into *expected and returns false. The name gives the
// order on success; on failure the read is relaxed (acquire for acq_rel).
#define shared_cas_acquire(p, expected, desired) \
  __atomic_compare_exchange_n((p), (expected), (desired), false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)
#define shared_cas_release(p, expected, desired) \
  __atomic_compare_exchange_n((p), (expected), (desired), false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)
#define shared_cas_acq_rel(p, expected, desired) \
  __atomic_compare_exchange_n((p), (expected), (desired), false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

// Fences: order plain accesses around them, for a sequence lock.
#define shared_fence_acquire() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define shared_fence_release() __atomic_thread_fence(__ATOMIC_RELEASE)
// Orders accesses against a signal handler on this same thread only.
#define shared_fence_signal() __atomic_signal_fence(__ATOMIC_SEQ_CST)

_Static_assert(__GCC_ATOMIC_INT_LOCK_FREE == 2, "ints are lock-free");
_Static_assert(__GCC_ATOMIC_LLONG_LOCK_FREE == 2, "64-bit integers are lock-free");
_Static_assert(__GCC_ATOMIC_POINTER_LOCK_FREE == 2, "pointers are lock-free");
_Static_assert(__GCC_ATOMIC_BOOL_LOCK_FREE == 2, "bools are lock-free");

#endif
