// thread_states.c: names of the state byte (see the header). Pure C.
#include "thread_states.h"

#include <string.h>

#include "vm.h"

static const char *const STATE_NAMES[VM_THREAD_STATE_COUNT] = {
    [VM_THREAD_RUNNING] = "running",
    [VM_THREAD_WAITING_FOR_GVL] = "waiting for gvl",
    [VM_THREAD_SLEEPING] = "sleeping",
    [VM_THREAD_BLOCKED] = "blocked",
};

// GC states: GC_STATE_BASE + is_major * GC_REASON_COUNT + reason.
#define GC_STATE_BASE VM_THREAD_STATE_COUNT
// Ruby's GC.latest_gc_info(:gc_by) values; anything else is "other" (the last).
static const char *const GC_REASONS[] = {"newobj", "malloc", "method", "capi", "stress", "force", "other"};
#define GC_REASON_COUNT (sizeof(GC_REASONS) / sizeof(GC_REASONS[0]))
#define GC_STATE_END (GC_STATE_BASE + 2 * GC_REASON_COUNT)

uint8_t thread_state_of_gc(bool is_major, unsigned reason) {
  if (reason >= GC_REASON_COUNT) reason = GC_REASON_COUNT - 1;
  return (uint8_t)(GC_STATE_BASE + (is_major ? GC_REASON_COUNT : 0) + reason);
}

unsigned thread_state_gc_reason_index(const char *name) {
  for (unsigned i = 0; name != NULL && i < GC_REASON_COUNT - 1; i++) {
    if (strcmp(name, GC_REASONS[i]) == 0) return i;
  }
  return GC_REASON_COUNT - 1;
}

const char *thread_state_name(uint8_t state) {
  if (state < VM_THREAD_STATE_COUNT) return STATE_NAMES[state];
  return state < GC_STATE_END ? "gc" : "unknown";
}

bool thread_state_gc_labels(uint8_t state, const char **type, const char **reason) {
  if (state < GC_STATE_BASE || state >= GC_STATE_END) return false;
  unsigned offset = state - GC_STATE_BASE;
  *type = offset >= GC_REASON_COUNT ? "major" : "minor";
  *reason = GC_REASONS[offset % GC_REASON_COUNT];
  return true;
}
