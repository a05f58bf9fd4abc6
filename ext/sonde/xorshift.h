// xorshift.h: xorshift64*, a one-word pseudo-random generator, for what
// needs spreading rather than secrecy (the CPU timers' first expiries, the
// allocation sampler's gaps). Pure C, allocates nothing, no lock: safe in
// any context that owns its state word. The state must not be 0.
#ifndef SONDE_XORSHIFT_H
#define SONDE_XORSHIFT_H

#include <stdint.h>

static inline uint64_t xorshift_next(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * UINT64_C(0x2545f4914f6cdd1d);
}

#endif
