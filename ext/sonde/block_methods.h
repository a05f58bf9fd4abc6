// block_methods.h: which method a block ran in, remembered by the block's
// code (its iseq), for the Ruby 3.1/3.2 backend (vm_ruby31.c). A block's
// frame is recorded by its iseq, which knows the block's own name ("block
// in main_loop") and line, but not the class of its method: the method
// entry the frame ran under does, and it is remembered here when the frame
// is read, so that the frame can later be named as Ruby 3.4 names it
// ("block in Optcarrot::PPU#main_loop").
//
// A fixed table, written from the SIGPROF handler and the sampling pass
// alike: claiming a slot is one compare-and-swap, so both functions are
// signal-safe (no lock, no allocation). Never during GC: the handler does
// not read stacks then, and GC marking reads the table (block_methods_find).
// Ids are 64-bit words (the Ruby VALUEs frame ids are), so the module is
// plain C: test/c/block_methods_test.c drives it from several threads.
#ifndef SONDE_BLOCK_METHODS_H
#define SONDE_BLOCK_METHODS_H

#include <stddef.h>
#include <stdint.h>

// Signal-safe: remembers that the block whose iseq is block_iseq ran in the
// method whose entry is method_entry (a rb_callable_method_entry_t), or, with
// method_entry 0, forgets what an earlier block at that address ran in (the
// iseq was freed and its memory holds another block now). When the table is
// full the block is not remembered and keeps its unqualified name.
void block_methods_remember_signal_safe(uint64_t block_iseq, uint64_t method_entry);

// Signal-safe: the method entry last remembered for block_iseq, or 0.
uint64_t block_methods_find(uint64_t block_iseq);

// Slots the table holds, and how many are taken (for tests and stats).
size_t block_methods_capacity(void);
size_t block_methods_used(void);

#endif
