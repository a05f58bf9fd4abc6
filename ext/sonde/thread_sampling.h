// thread_sampling.h: where a thread's previous wall sample left it: its
// clocks, its GVL times, the stack it was recorded with (reused while the
// thread has not run since) and that sample's labels. One per thread, the
// `sampling` field of its thread_context (thread_contexts.h).
//
// Owned by the sampling pass: written only in sampling_pass.c, with the
// GVL. The thread table creates it zeroed with its context and frees the
// stack hint with it; everything else only reads it.
#ifndef SONDE_THREAD_SAMPLING_H
#define SONDE_THREAD_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "recorder.h"
#include "trace_context.h"
#include "vm.h"

typedef struct {
  bool sampled; // has had a wall sample (else the next is its first)

  // Wall time, GVL times and (without a CPU timer) CPU time where the
  // previous sample left them.
  int64_t wall_ns_at_previous_sample;
  vm_gvl_times gvl_at_previous_sample;
  int64_t cpu_ns_at_previous_sample;
  // The epoch of the latest pass that sampled the thread or deferred its
  // sample (vm_begin_pass), and what the thread was doing off the GVL at
  // its previous sample: a wait that ended at a first GVL acquisition noted
  // under that epoch is credited to the previous sample's stack and state
  // (credit_wait_until_resume).
  uint64_t epoch_last_seen;
  uint8_t off_state_at_previous_sample;
  // Passes that deferred its wall sample since its previous one
  // (defer_wall_sample): the sample that covers that time counts them.
  // The latest of them found it as it was at that sample at
  // wall_ns_last_seen, with GVL times gvl_last_seen.
  uint32_t passes_deferred;
  int64_t wall_ns_last_seen;
  vm_gvl_times gvl_last_seen;

  // The stack of the previous wall sample, as a recorder id, valid while
  // the recorder's generation is the one noted; and how the thread's run
  // could be told apart since (GVL acquisitions, else CPU time).
  uint64_t stack_generation;
  uint32_t stack_id;
  uint64_t run_marker;
  bool stack_reusable;
  // Whether stack_id is what the read kept in the context's frames memo
  // was interned as.
  bool stack_id_from_memo_read;
  // The label set and trace context of the previous wall sample: a thread
  // whose stack is kept has them still.
  uint32_t label_set;
  trace_context trace;
  // The last stack interned for it (recorder_intern_stack_hinted).
  recorder_stack_hint stack_hint;
  // Where its wall samples went, one per part of a sample (holding the
  // GVL, waiting for it, off it) and per part of a credited wait
  // (recorder_add_hinted).
  recorder_sample_hint wall_sample_hints[3];
  recorder_sample_hint wait_sample_hints[2];
} thread_sampling;

#endif
