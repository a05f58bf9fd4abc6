// labels.h: which label set the code running on each thread is under
// (Sonde.with_labels). The sets themselves are interned on the Ruby side
// (lib/sonde/labels.rb): here a set is its id, 0 for none, which samples
// carry to the recorder and the encoder names from the Ruby side's table.
#ifndef SONDE_LABELS_H
#define SONDE_LABELS_H

#include <stdint.h>

#include <ruby.h>

// At load, with the GVL: reads the fiber-local key the Ruby side keeps the
// current set's id under (Sonde::Labels::FIBER_KEY) and defines
// Native.label_set_changed.
void labels_define_methods(VALUE native);

// Inside a signal handler: the set of the code the calling thread runs now
// (its current fiber's). A plain read of a thread-local variable.
uint32_t labels_current_signal_safe(void);

// With the GVL: the set of the code thread runs now (its current fiber's),
// read from the fiber-local; calls no Ruby method.
uint32_t labels_of_thread(VALUE thread);

#endif
