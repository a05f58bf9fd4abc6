// block_methods.c: the block -> method entry table (block_methods.h).
//
// Constraints: runs inside the SIGPROF handler (several threads' handlers
// at once: CPU timers fire on threads without the GVL) and in the sampling
// pass, so it only loads, stores and compare-and-swaps words of a static
// table: no lock, no allocation, no Ruby call. Entries are never removed:
// a slot whose block was freed is stale, and the address is overwritten
// (not matched wrongly) when a live block at that address is read, because
// every read of a block frame remembers what that frame ran in.
//
// What keeps a remembered method entry alive: a block's iseq is only named
// after the frame it was read from was recorded, and recorded frames are
// marked (vm_mark_frame), which marks the entry found here too.
#include "block_methods.h"

#include <stdbool.h>
#include <stdint.h>

#include "shared.h"

// A power of two. 16,384 distinct blocks sampled in one process is far past
// what a large Rails app shows; 256 KB of zeroes until used.
#define BLOCK_METHODS_SLOTS (1u << 14)
// Probes before giving up: with linear probing a full neighbourhood means
// the table is nearly full anyway.
#define BLOCK_METHODS_MAX_PROBES 64

typedef struct {
  uint64_t block_iseq;   // 0: free; set once by compare-and-swap
  uint64_t method_entry; // 0 until written; rewritten when the block runs under another entry
} block_method_slot;

static block_method_slot slots[BLOCK_METHODS_SLOTS];
static size_t used;

// Object addresses are 8-byte aligned and close together: mix the bits.
static uint32_t slot_index(uint64_t block_iseq) {
  uint64_t h = (uint64_t)block_iseq >> 3;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return (uint32_t)h & (BLOCK_METHODS_SLOTS - 1);
}

void block_methods_remember_signal_safe(uint64_t block_iseq, uint64_t method_entry) {
  if (block_iseq == 0) return;
  uint32_t index = slot_index(block_iseq);
  for (uint32_t probe = 0; probe < BLOCK_METHODS_MAX_PROBES; probe++) {
    block_method_slot *slot = &slots[(index + probe) & (BLOCK_METHODS_SLOTS - 1)];
    uint64_t key = shared_load_acquire(&slot->block_iseq);
    if (key == 0) {
      if (method_entry == 0) return; // nothing to forget
      uint64_t expected = 0;
      if (!shared_cas_acq_rel(&slot->block_iseq, &expected, block_iseq)) {
        key = expected; // another thread took it first: is it ours?
      } else {
        shared_add_relaxed(&used, 1);
        key = block_iseq;
      }
    }
    if (key == block_iseq) {
      if (shared_load_relaxed(&slot->method_entry) != method_entry) {
        shared_store_release(&slot->method_entry, method_entry);
      }
      return;
    }
  }
}

uint64_t block_methods_find(uint64_t block_iseq) {
  if (block_iseq == 0) return 0;
  uint32_t index = slot_index(block_iseq);
  for (uint32_t probe = 0; probe < BLOCK_METHODS_MAX_PROBES; probe++) {
    const block_method_slot *slot = &slots[(index + probe) & (BLOCK_METHODS_SLOTS - 1)];
    uint64_t key = shared_load_acquire(&slot->block_iseq);
    if (key == 0) return 0;
    if (key == block_iseq) return shared_load_acquire(&slot->method_entry);
  }
  return 0;
}

size_t block_methods_capacity(void) { return BLOCK_METHODS_SLOTS; }

size_t block_methods_used(void) { return shared_load_relaxed(&used); }
