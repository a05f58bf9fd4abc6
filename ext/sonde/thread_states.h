// thread_states.h: the state byte every recorded sample carries, and what
// it is called in a profile. The VM's states (vm.h) come first; GC states
// follow, one per (major or minor, reason), so that a GC sample's "gc type"
// and "gc reason" labels come from its state alone.
#ifndef SONDE_THREAD_STATES_H
#define SONDE_THREAD_STATES_H

#include <stdbool.h>
#include <stdint.h>

// The state byte of a GC sample: is_major (0 or 1) and reason, an index
// into the reasons below (thread_state_gc_reason_index).
uint8_t thread_state_of_gc(bool is_major, unsigned reason);

// The index of one of Ruby's GC.latest_gc_info(:gc_by) names ("newobj",
// "malloc", ...); an unknown name is "other".
unsigned thread_state_gc_reason_index(const char *name);

// The "state" label of a state byte: "running", "waiting for gvl",
// "sleeping", "blocked", "gc", or "unknown".
const char *thread_state_name(uint8_t state);

// For a GC state: its "gc type" (major/minor) and "gc reason" labels.
// Returns false for other states.
bool thread_state_gc_labels(uint8_t state, const char **type, const char **reason);

#endif
