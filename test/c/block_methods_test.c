// modules: block_methods.c
// sanitizers: thread
// block_methods.c: a block is found with the method entry last remembered
// for it; a freed block's entry is forgotten or overwritten, never matched
// to another block; threads remembering the same blocks at once claim one
// slot each; a full table refuses new blocks and still finds the old ones.
#include <pthread.h>
#include <stdint.h>

#include "block_methods.h"
#include "test_harness.h"

// Ids as Ruby's objects have them: 8-byte aligned, never 0.
#define ID(n) ((uint64_t)0x7f0000000000ULL + (uint64_t)(n) * 40u)

static void test_remember_find_overwrite_forget(void) {
  CHECK_EQ_INT(block_methods_find(ID(1)), 0);
  block_methods_remember_signal_safe(ID(1), ID(1001));
  CHECK_EQ_INT(block_methods_find(ID(1)), ID(1001));
  // The same block under another method entry (a module's method reached from another class).
  block_methods_remember_signal_safe(ID(1), ID(1002));
  CHECK_EQ_INT(block_methods_find(ID(1)), ID(1002));
  // Its memory now holds a block outside any method: forgotten, not reused.
  block_methods_remember_signal_safe(ID(1), 0);
  CHECK_EQ_INT(block_methods_find(ID(1)), 0);
  // Forgetting what was never remembered takes no slot.
  size_t used = block_methods_used();
  block_methods_remember_signal_safe(ID(2), 0);
  CHECK_EQ_INT(block_methods_used(), used);
  CHECK_EQ_INT(block_methods_find(ID(2)), 0);
  block_methods_remember_signal_safe(0, ID(1003));
  CHECK_EQ_INT(block_methods_find(0), 0);
}

#define THREADS 4
#define ROUNDS 200
#define BLOCKS_PER_ROUND 10
#define SHARED_BLOCKS (ROUNDS * BLOCKS_PER_ROUND)
#define FIRST_SHARED 100000

static pthread_barrier_t round_start;

// Each round, every thread remembers the same fresh blocks at once, so
// they race to claim the same slots.
static void *remember_shared(void *arg) {
  (void)arg;
  for (int round = 0; round < ROUNDS; round++) {
    pthread_barrier_wait(&round_start);
    for (int i = 0; i < BLOCKS_PER_ROUND; i++) {
      uint64_t block = ID(FIRST_SHARED + round * BLOCKS_PER_ROUND + i);
      block_methods_remember_signal_safe(block, block + 8);
    }
  }
  return NULL;
}

static void test_threads_claim_one_slot_per_block(void) {
  size_t before = block_methods_used();
  pthread_t threads[THREADS];
  CHECK_EQ_INT(pthread_barrier_init(&round_start, NULL, THREADS), 0);
  for (int t = 0; t < THREADS; t++) CHECK_EQ_INT(pthread_create(&threads[t], NULL, remember_shared, NULL), 0);
  for (int t = 0; t < THREADS; t++) CHECK_EQ_INT(pthread_join(threads[t], NULL), 0);
  pthread_barrier_destroy(&round_start);
  CHECK_EQ_INT(block_methods_used() - before, SHARED_BLOCKS);
  int found = 0;
  for (int i = 0; i < SHARED_BLOCKS; i++) found += block_methods_find(ID(FIRST_SHARED + i)) == ID(FIRST_SHARED + i) + 8;
  CHECK_EQ_INT(found, SHARED_BLOCKS);
}

#define FIRST_FILL 1000000

static void test_a_full_table_refuses_new_blocks_and_keeps_old_ones(void) {
  size_t capacity = block_methods_capacity();
  for (size_t i = 0; i < 2 * capacity; i++) block_methods_remember_signal_safe(ID(FIRST_FILL + i), ID(7));
  CHECK(block_methods_used() <= capacity);
  CHECK(block_methods_used() > capacity / 2);
  size_t remembered = 0;
  for (size_t i = 0; i < 2 * capacity; i++) remembered += block_methods_find(ID(FIRST_FILL + i)) == ID(7);
  CHECK(remembered < 2 * capacity);
  // Blocks remembered before the table filled are still found.
  CHECK_EQ_INT(block_methods_find(ID(FIRST_SHARED)), ID(FIRST_SHARED) + 8);
  // A refused block is not found, and its forgetting does nothing.
  uint64_t refused = 0;
  for (size_t i = 0; i < 2 * capacity && refused == 0; i++) {
    if (block_methods_find(ID(FIRST_FILL + i)) == 0) refused = ID(FIRST_FILL + i);
  }
  CHECK(refused != 0);
  block_methods_remember_signal_safe(refused, 0);
  CHECK_EQ_INT(block_methods_find(refused), 0);
}

int main(void) {
  test_remember_find_overwrite_forget();
  test_threads_claim_one_slot_per_block();
  test_a_full_table_refuses_new_blocks_and_keeps_old_ones();
  return test_summary("block_methods");
}
