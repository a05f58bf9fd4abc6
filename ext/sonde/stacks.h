// stacks.h: turns a thread's frames into what the recorder stores, adds the
// synthetic frames the VM does not have (the truncation marker), and names
// frames for export.
#ifndef SONDE_STACKS_H
#define SONDE_STACKS_H

#include <stdint.h>

#include <ruby.h>

#include "capture_buffer.h"
#include "recorder.h"
#include "vm.h"

// Fills frames (room for max_frames + 1) with the thread's stack, leaf
// first. A stack deeper than max_frames keeps its max_frames innermost
// frames and ends with one "(truncated N frames)" frame. Returns the number
// of frames written. Needs the GVL; allocates nothing.
uint32_t stacks_collect(const void *thread_handle, recorder_frame *frames, uint32_t max_frames);

// The same, for the sampling pass, with the thread's memo (vm.h's
// vm_frames_memo; NULL: none). *unchanged: the frames are the ones the
// previous call with this memo wrote.
uint32_t stacks_collect_with_memo(const void *thread_handle, vm_frames_memo *memo, bool previous_read_kept,
                                  recorder_frame *frames, uint32_t max_frames, bool *unchanged);

// The same for a stack the SIGPROF handler captured: its frames, leaf
// first, and the marker when it was cut. Allocates nothing.
uint32_t stacks_from_capture(const capture *captured, recorder_frame *frames, uint32_t max_frames);

// The synthetic frame GC time is recorded under ("Garbage Collection").
uint64_t stacks_gc_frame_id(void);

// The synthetic frame allocations whose samples were lost are recorded
// under ("(allocation samples lost)"), so that alloc-samples still totals
// every allocation.
uint64_t stacks_lost_allocations_frame_id(void);

// The synthetic frame a CPU sample is recorded under when its thread had
// no Ruby frame ("(no Ruby frame)": it was starting or ending, in the VM's
// own C code), so that its CPU time is neither lost nor shown as an empty
// stack.
uint64_t stacks_no_ruby_frame_id(void);

// The synthetic frame the CPU time a thread used since its last sample is
// recorded under when it is counted after the thread is gone ("(CPU since
// the thread's last sample)"): its stack cannot be read any more.
uint64_t stacks_thread_end_frame_id(void);

// The synthetic frame of the CPU time ended threads spent in Ruby's
// teardown after their thread-end hook ("(thread teardown)"): counted as
// each one exits, when its stack is gone (vm_take_cpu_after_end_ns).
uint64_t stacks_thread_teardown_frame_id(void);

// The synthetic frame of the CPU time ended threads spent after Ruby let
// them go ("(native thread exit)", exit_cpu.h): the native thread's own
// exit, and any non-Ruby thread that ended during the run.
uint64_t stacks_native_thread_exit_frame_id(void);

// Names a frame for export (see vm_describe_frame), synthetic ones included.
// Needs the GVL; allocates Ruby strings.
void stacks_describe(uint64_t frame_id, VALUE *name, VALUE *path, int64_t *first_line);

// Keeps a recorded frame's Ruby object alive and in place. For the GC mark phase.
void stacks_mark(uint64_t frame_id);

#endif
