// stacks.c: collects stacks for the recorder and names their frames.
//
// Frame ids are Ruby VALUEs (method entries and iseqs), which are 8-byte
// aligned. Synthetic frames use odd ids, so the two can never collide and
// the GC is never shown an id that is not an object.
#include "stacks.h"

#include "vm.h"

// A synthetic id is (payload << SYNTHETIC_SHIFT) | kind.
#define SYNTHETIC_SHIFT 3
#define SYNTHETIC_KIND_MASK 7u
#define SYNTHETIC_TRUNCATED 1u
#define SYNTHETIC_GC 2u
#define SYNTHETIC_LOST_ALLOCATIONS 3u
#define SYNTHETIC_NO_RUBY_FRAME 4u
#define SYNTHETIC_THREAD_END 5u
#define SYNTHETIC_THREAD_TEARDOWN 6u
#define SYNTHETIC_NATIVE_THREAD_EXIT 7u // the last kind the three bits hold

static bool is_synthetic(uint64_t frame_id) { return (frame_id & SYNTHETIC_KIND_MASK) != 0; }

// A cut stack ends in one marker frame that says how many frames were cut;
// 0 when the count is unknown (the VM could not count them).
static uint32_t add_truncation_marker(recorder_frame *frames, uint32_t kept, uint32_t max_frames,
                                      uint32_t total_depth) {
  bool cut_unknown = total_depth == 0 && kept == max_frames;
  if (total_depth <= kept && !cut_unknown) return kept;
  uint64_t cut = cut_unknown ? 0 : total_depth - kept;
  frames[kept++] = (recorder_frame){.frame_id = (cut << SYNTHETIC_SHIFT) | SYNTHETIC_TRUNCATED, .line = 0};
  return kept;
}

uint32_t stacks_collect(const void *thread_handle, recorder_frame *frames, uint32_t max_frames) {
  uint32_t total_depth = 0;
  uint32_t kept = vm_thread_frames(thread_handle, frames, max_frames, &total_depth);
  return add_truncation_marker(frames, kept, max_frames, total_depth);
}

uint32_t stacks_collect_with_memo(const void *thread_handle, vm_frames_memo *memo, bool previous_read_kept,
                                  recorder_frame *frames, uint32_t max_frames, bool *unchanged) {
  uint32_t total_depth = 0;
  uint32_t kept =
      vm_thread_frames_with_memo(thread_handle, memo, previous_read_kept, frames, max_frames, &total_depth, unchanged);
  return add_truncation_marker(frames, kept, max_frames, total_depth);
}

uint32_t stacks_from_capture(const capture *captured, recorder_frame *frames, uint32_t max_frames) {
  uint32_t kept = captured->depth < max_frames ? captured->depth : max_frames;
  for (uint32_t i = 0; i < kept; i++) {
    frames[i] = (recorder_frame){.frame_id = captured->frame_ids[i], .line = captured->lines[i]};
  }
  return add_truncation_marker(frames, kept, max_frames, captured->total_depth);
}

uint64_t stacks_gc_frame_id(void) { return SYNTHETIC_GC; }

uint64_t stacks_lost_allocations_frame_id(void) { return SYNTHETIC_LOST_ALLOCATIONS; }

uint64_t stacks_no_ruby_frame_id(void) { return SYNTHETIC_NO_RUBY_FRAME; }

uint64_t stacks_thread_end_frame_id(void) { return SYNTHETIC_THREAD_END; }

uint64_t stacks_thread_teardown_frame_id(void) { return SYNTHETIC_THREAD_TEARDOWN; }

uint64_t stacks_native_thread_exit_frame_id(void) { return SYNTHETIC_NATIVE_THREAD_EXIT; }

void stacks_describe(uint64_t frame_id, VALUE *name, VALUE *path, int64_t *first_line) {
  if (!is_synthetic(frame_id)) {
    vm_describe_frame(frame_id, name, path, first_line);
    return;
  }
  *path = Qnil;
  *first_line = 0;
  switch (frame_id & SYNTHETIC_KIND_MASK) {
    case SYNTHETIC_TRUNCATED:
      if ((frame_id >> SYNTHETIC_SHIFT) == 0) {
        *name = rb_str_new_cstr("(truncated: deeper frames not counted)");
      } else {
        *name = rb_sprintf("(truncated %llu frames)", (unsigned long long)(frame_id >> SYNTHETIC_SHIFT));
      }
      break;
    case SYNTHETIC_GC:
      *name = rb_str_new_cstr("Garbage Collection");
      break;
    case SYNTHETIC_LOST_ALLOCATIONS:
      *name = rb_str_new_cstr("(allocation samples lost)");
      break;
    case SYNTHETIC_NO_RUBY_FRAME:
      *name = rb_str_new_cstr("(no Ruby frame)");
      break;
    case SYNTHETIC_THREAD_END:
      *name = rb_str_new_cstr("(CPU since the thread's last sample)");
      break;
    case SYNTHETIC_THREAD_TEARDOWN:
      *name = rb_str_new_cstr("(thread teardown)");
      break;
    case SYNTHETIC_NATIVE_THREAD_EXIT:
      *name = rb_str_new_cstr("(native thread exit)");
      break;
    default:
      *name = rb_str_new_cstr("(unknown)");
  }
}

void stacks_mark(uint64_t frame_id) {
  if (!is_synthetic(frame_id)) vm_mark_frame(frame_id);
}
