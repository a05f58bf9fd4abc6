// vm_ruby31.c: VM access for Ruby 3.1 and 3.2, through the VM's own structs
// as Ruby ships them in rb_mjit_min_header-<version>.h (installed with the
// Ruby headers). Those Rubies have no public API to read another thread's
// frames or the GVL owner, so this file does it the way Ruby's own
// rb_profile_frames does for the current thread, for any thread.
//
// Constraints: functions marked signal-safe only read memory (no locks, no
// allocation, no Ruby calls). Everything else runs with the GVL held, which
// is what keeps other threads' frames and the thread list still while we
// read them. The MJIT header must come before any other Ruby header.
#include SONDE_MJIT_HEADER

#include <ruby/debug.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "block_methods.h"
#include "shared.h"
#include "vm.h"

// The main Ractor, remembered at init: reading GET_RACTOR() from a thread
// that is not a Ruby thread (or from a signal handler) is not allowed.
static rb_ractor_t *main_ractor;


static int64_t tid_of(const rb_thread_t *thread);

bool vm_gvl_owner_tid_from_any_thread(pid_t *tid) {
  const rb_thread_t *thread = shared_load_relaxed(&main_ractor->threads.gvl.owner);
  if (thread == NULL) return false;
  *tid = (pid_t)tid_of(thread);
  return *tid != 0;
}

// Classes whose C methods put a thread to sleep with a timeout (sleep(1),
// join(1), ConditionVariable#wait through Mutex#sleep, Queue#pop): threads
// in them are "sleeping", not "blocked".
static VALUE sleeping_owners[5];

static void remember_sleeping_owners(void) {
  sleeping_owners[0] = rb_mKernel;
  sleeping_owners[1] = rb_cThread;
  sleeping_owners[2] = rb_const_get(rb_cThread, rb_intern("Mutex"));
  sleeping_owners[3] = rb_const_get(rb_cThread, rb_intern("Queue"));
  sleeping_owners[4] = rb_const_get(rb_cThread, rb_intern("SizedQueue"));
  for (size_t i = 0; i < sizeof(sleeping_owners) / sizeof(sleeping_owners[0]); i++) {
    rb_gc_register_mark_object(sleeping_owners[i]);
  }
}

// The Ractor of the calling thread's execution context (a thread-local).
bool vm_on_main_ractor(void) {
  const rb_execution_context_t *ec = rb_current_execution_context(false);
  return ec != NULL && main_ractor != NULL && rb_ec_ractor_ptr(ec) == main_ractor;
}

// The :major_gc_count Symbol, made at Init with GC.stat's own symbols
// (vm_init): a walk with the GVL can run inside the allocation hook (3.1
// with YJIT, alloc_source.c), where interning a name would allocate.
static VALUE major_gc_count_key;

static void prepare_gc_epochs(void) {
  major_gc_count_key = ID2SYM(rb_intern("major_gc_count"));
  (void)rb_gc_stat(major_gc_count_key); // GC.stat interns its own keys at its first call
}

void vm_init(void) {
  main_ractor = GET_VM()->ractor.main_ractor;
  remember_sleeping_owners();
  prepare_gc_epochs();
}

static bool leaf_is_a_sleep(const rb_thread_t *thread) {
  const rb_control_frame_t *leaf = thread->ec->cfp;
  if (leaf >= RUBY_VM_END_CONTROL_FRAME(thread->ec) || VM_FRAME_TYPE(leaf) != VM_FRAME_MAGIC_CFUNC) return false;
  const rb_callable_method_entry_t *method = rb_vm_frame_method_entry(leaf);
  if (method == NULL) return false;
  for (size_t i = 0; i < sizeof(sleeping_owners) / sizeof(sleeping_owners[0]); i++) {
    if (method->owner == sleeping_owners[i]) return true;
  }
  return false;
}

// Ruby 3.1 marks a thread THREAD_STOPPED both in a timed sleep and inside a
// blocking region (IO, syscalls, C code without the GVL), and sets an
// unblocking function in both; THREAD_STOPPED_FOREVER is always a sleep
// (Queue#pop, Mutex#lock, join). What the thread is calling tells the rest.
static vm_thread_state state_of(const rb_thread_t *thread) {
  if (main_ractor->threads.gvl.owner == thread) return VM_THREAD_RUNNING;
  switch (thread->status) {
    case THREAD_STOPPED_FOREVER:
      return VM_THREAD_SLEEPING;
    case THREAD_STOPPED:
      // Out of its wait (no unblocking function) but not running: queued for the GVL.
      if (thread->unblock.func == NULL) return VM_THREAD_WAITING_FOR_GVL;
      return leaf_is_a_sleep(thread) ? VM_THREAD_SLEEPING : VM_THREAD_BLOCKED;
    default:
      return thread->unblock.func != NULL ? VM_THREAD_BLOCKED : VM_THREAD_WAITING_FOR_GVL;
  }
}

// gc.c's newobj_of takes its slow path whenever objspace->flags.has_hook is
// set, which any GC event hook sets.
bool vm_gc_hooks_slow_allocation(void) { return true; }

int rb_objspace_markable_object_p(VALUE object); // exported, declared only in gc.c

bool vm_object_live(VALUE object) { return rb_objspace_markable_object_p(object) != 0; }

// Ruby 3.1 has no GVL hooks: a thread's state is known only at the sample.
bool vm_times_gvl_waits(void) { return false; }

// No GVL hooks: no first acquisitions are noted, none are counted, and the
// trigger backs off where 3.3 parks (scheduler.c).
uint64_t vm_begin_pass(void) { return 0; }

bool vm_tells_resumes(void) { return false; }

uint64_t vm_gvl_resumes_from_any_thread(void) { return 0; }

bool vm_reuses_native_threads(void) { return true; }

// The thread cache counts the teardown: the next thread on the native
// thread starts counting where this one's end left its clock.
void vm_note_current_thread_end_cpu(int64_t cpu_ns) {}

bool vm_exits_count_unmet_threads(void) { return false; }

VALUE vm_current_thread_name(void) { return Qundef; }

void vm_note_thread_accounted(VALUE thread) {}

int64_t vm_take_unmet_exit_cpu_ns(uint64_t *threads) {
  *threads = 0;
  return 0;
}

int64_t vm_take_cpu_after_end_ns(uint64_t *threads) {
  *threads = 0;
  return 0;
}

int64_t vm_exited_threads_clock_ns(void) { return -1; }

size_t vm_recently_exited_tids(int64_t *tids, size_t max) { return 0; }

// Ruby 3.1 sets a thread's tid when the thread starts and never again, so in
// a forked child the thread that forked still carries its parent's tid (and
// Thread#native_thread_id says the same). The atfork child handler, which
// runs on that thread, remembers its pthread and its real tid; a pass on
// any thread then names it by the tid `top -H` shows. Written only by the
// atfork handler, while the child has no other thread.
static pthread_t forked_thread;
static int64_t forked_thread_tid; // 0: this process was not forked since load

static int64_t tid_of(const rb_thread_t *thread) {
  if (forked_thread_tid != 0 && pthread_equal(thread->thread_id, forked_thread)) return forked_thread_tid;
  return thread->tid;
}

// The checks a frame read from a signal handler must pass before anything
// it points at is followed: the handler may interrupt the VM half-way
// through pushing a frame, or a thread in its teardown. They cost a few
// loads per frame, so the sampling pass runs them too.
static bool is_object_of_imemo_type(VALUE value, enum imemo_type type) {
  if (value == 0 || RB_SPECIAL_CONST_P(value) || (value & (sizeof(VALUE) - 1)) != 0) return false;
  return RB_BUILTIN_TYPE(value) == T_IMEMO && imemo_type(value) == type;
}

static bool pc_is_inside(const rb_iseq_t *iseq, const VALUE *pc) {
  const struct rb_iseq_constant_body *body = iseq->body;
  if (body == NULL || body->iseq_encoded == NULL) return false;
  return pc == NULL || (pc >= body->iseq_encoded && pc <= body->iseq_encoded + body->iseq_size);
}

// Bounds of a thread's VM stack, where its control frames live.
typedef struct {
  const rb_control_frame_t *top; // the leaf frame
  const rb_control_frame_t *end; // one past the outermost frame
} frame_range;

static bool frame_range_of(const rb_execution_context_t *ec, frame_range *range) {
  if (ec == NULL || ec->vm_stack == NULL || ec->vm_stack_size == 0 || ec->cfp == NULL) return false;
  const char *low = (const char *)ec->vm_stack;
  const char *high = (const char *)(ec->vm_stack + ec->vm_stack_size);
  const char *top = (const char *)ec->cfp;
  if (top < low || top > high || (size_t)(high - top) % sizeof(rb_control_frame_t) != 0) return false;
  range->top = ec->cfp;
  range->end = RUBY_VM_END_CONTROL_FRAME(ec);
  return true;
}

static void describe_thread(rb_thread_t *thread, vm_thread_info *info) {
  *info = (vm_thread_info){
      .handle = thread,
      .thread = thread->self,
      .native_tid = tid_of(thread),
      .state = state_of(thread),
      .is_main = thread == main_ractor->threads.main,
      .name = thread->name,
  };
}

// A thread created but not run yet has only the dummy frame Ruby pushes for
// it: no stack to show (it is queued for the GVL, to start). Met once it
// runs, as on 3.3.
static bool has_started(const rb_thread_t *thread) {
  frame_range range;
  if (!frame_range_of(thread->ec, &range)) return false;
  for (const rb_control_frame_t *frame = range.top; frame < range.end; frame = RUBY_VM_PREVIOUS_CONTROL_FRAME(frame)) {
    if (VM_FRAME_RUBYFRAME_P(frame) || VM_FRAME_TYPE(frame) == VM_FRAME_MAGIC_CFUNC) return true;
  }
  return false;
}

void vm_each_thread(int64_t now_ns, vm_thread_visitor visit, void *data) {
  rb_thread_t *thread = NULL;
  list_for_each(&main_ractor->threads.set, thread, lt_node) {
    if (thread->status == THREAD_KILLED || thread->ec == NULL) continue;
    // Not started yet: no native thread, so no tid, no CPU clock, no frames.
    if (thread->tid == 0 || !has_started(thread)) continue;
    vm_thread_info info;
    describe_thread(thread, &info);
    visit(&info, data);
  }
}

// The line a Ruby frame is executing, as Ruby's backtraces compute it: pc
// points past the current instruction, hence the step back. pc was checked
// to lie inside the iseq's instructions, and is not NULL.
static int32_t frame_line(const rb_iseq_t *iseq, const VALUE *pc) {
  ptrdiff_t position = pc - iseq->body->iseq_encoded;
  if (position > 0) position--;
  return (int32_t)rb_iseq_line_no(iseq, (size_t)position);
}

// The line of a frame read with the GVL, remembered by its pc. Finding a
// line (rb_iseq_line_no) was 60% of walking a 110-frame stack (3 us of 5,
// issue 22's Rails worker), and most of a stack's frames sit at the pc
// they had at the previous pass. A pc points into one live iseq's
// instructions, whose lines never change; an entry is trusted only as long
// as its iseq cannot have been freed (and its address and instructions'
// memory reused) since it was written: an old iseq (age 3 in the
// generational GC) is freed only by a major GC, a young one by any, and
// compaction, which moves iseqs, is a major GC. So an entry written for an
// old iseq holds until the next major GC: in a worker that collects a
// hundred times a second, almost all minor, the entries of its long-lived
// code stay (keyed by every GC, 3,587 hits in 15,746 lookups at 100 Hz).
// The iseq is part of the key all the same, so that no two iseqs ever
// share an entry. With the main Ractor's GVL only (every caller of
// vm_thread_frames holds it): one writer at a time, and signal handlers
// never read it (theirs is the uncached walk).
#define LINE_CACHE_SLOTS 4096u // a power of two; 128 KB
typedef struct {
  const VALUE *pc;
  const rb_iseq_t *iseq;
  int32_t line;
  uint32_t epoch;   // the GC count, or the major GC count when by_major
  bool by_major;    // written for an old iseq
} line_cache_slot;
static line_cache_slot line_cache[LINE_CACHE_SLOTS];

// The GC counts a walk with the GVL reads once, for the line cache.
typedef struct {
  uint32_t all, major;
} gc_epochs;

// The major count is asked for only when GC.count moved (every GC moves
// it): GC.stat finds its key among dozens, in GC data the pass finds out
// of the caches, and the pass walks several stacks between two GCs.
static gc_epochs gc_epochs_now_with_gvl(void) {
  static gc_epochs seen;
  static bool any_seen;
  uint32_t all = (uint32_t)rb_gc_count();
  if (!any_seen || all != seen.all) {
    seen = (gc_epochs){.all = all, .major = (uint32_t)rb_gc_stat(major_gc_count_key)};
    any_seen = true;
  }
  return seen;
}

static bool is_old(const rb_iseq_t *iseq) {
  return (RBASIC(iseq)->flags & RUBY_FL_PROMOTED) == RUBY_FL_PROMOTED;
}

static int32_t frame_line_cached_with_gvl(const rb_iseq_t *iseq, const VALUE *pc, const gc_epochs *epochs) {
  uint64_t h = (uint64_t)(uintptr_t)pc >> 3;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  line_cache_slot *slot = &line_cache[(h >> 40) & (LINE_CACHE_SLOTS - 1)];
  bool by_major = is_old(iseq);
  uint32_t epoch = by_major ? epochs->major : epochs->all;
  if (slot->pc == pc && slot->iseq == iseq && slot->by_major == by_major && slot->epoch == epoch) return slot->line;
  int32_t line = frame_line(iseq, pc);
  *slot = (line_cache_slot){.pc = pc, .iseq = iseq, .line = line, .epoch = epoch, .by_major = by_major};
  return line;
}

// What one control frame shows: nothing (a dummy frame, C glue), or one
// frame of the profile.
typedef enum { FRAME_NONE, FRAME_SHOWN, FRAME_INCONSISTENT } frame_reading;

// Reads one control frame. with_gvl: the GC counts when the caller holds
// the main Ractor's GVL, so that the line may come from the cache above;
// a signal handler passes NULL.
static frame_reading read_frame(const rb_control_frame_t *frame, const gc_epochs *with_gvl,
                                uint64_t *frame_id, int32_t *line) {
  if (VM_FRAME_RUBYFRAME_P(frame)) {
    const rb_iseq_t *iseq = frame->iseq;
    // A dummy frame runs no code: the main thread's bottom frame is one
    // (TOPLEVEL_BINDING's, an empty "<main>" under the script's), which
    // Ruby's backtraces skip too.
    if (iseq == NULL || frame->pc == NULL || VM_FRAME_TYPE(frame) == VM_FRAME_MAGIC_DUMMY) return FRAME_NONE;
    if (!is_object_of_imemo_type((VALUE)iseq, imemo_iseq) || !pc_is_inside(iseq, frame->pc)) {
      return FRAME_INCONSISTENT;
    }
    // A method's own frame is named by its method entry, which knows the
    // class ("Object#burn"). A block's frame reports the same method
    // entry, so it is recorded by its iseq instead (its own name and
    // lines), and the entry is remembered for naming it as Ruby 3.4
    // does ("block in Object#burn").
    const rb_callable_method_entry_t *method = rb_vm_frame_method_entry(frame);
    bool is_method = method && is_object_of_imemo_type((VALUE)method, imemo_ment) &&
                     method->def->type == VM_METHOD_TYPE_ISEQ;
    bool is_method_body = is_method && method->def->body.iseq.iseqptr == iseq;
    if (!is_method_body) {
      bool in_method = is_method && method->def->body.iseq.iseqptr == iseq->body->local_iseq;
      block_methods_remember_signal_safe((VALUE)iseq, in_method ? (VALUE)method : 0);
    }
    *frame_id = is_method_body ? (VALUE)method : (VALUE)iseq;
    *line = with_gvl ? frame_line_cached_with_gvl(iseq, frame->pc, with_gvl) : frame_line(iseq, frame->pc);
    return FRAME_SHOWN;
  }
  if (VM_FRAME_TYPE(frame) == VM_FRAME_MAGIC_CFUNC) {
    const rb_callable_method_entry_t *method = rb_vm_frame_method_entry(frame);
    if (method == NULL) return FRAME_NONE;
    if (!is_object_of_imemo_type((VALUE)method, imemo_ment)) return FRAME_INCONSISTENT;
    *frame_id = (VALUE)method;
    *line = 0;
    return FRAME_SHOWN;
  }
  // Other C frames (the dummy top frame, ifunc glue) carry no user code.
  return FRAME_NONE;
}

// Walks one thread's control frames, leaf first: keeps at most max_frames,
// counts them all. Returns the number kept, or VM_CAPTURE_INCONSISTENT.
static int32_t walk_frames(const rb_execution_context_t *ec, uint64_t *frame_ids, int32_t *lines,
                           uint32_t max_frames, uint32_t *total_depth, bool with_gvl) {
  gc_epochs epochs = with_gvl ? gc_epochs_now_with_gvl() : (gc_epochs){0, 0};
  frame_range range;
  *total_depth = 0;
  if (!frame_range_of(ec, &range)) return VM_CAPTURE_INCONSISTENT;
  uint32_t kept = 0, depth = 0;
  for (const rb_control_frame_t *frame = range.top; frame < range.end; frame = RUBY_VM_PREVIOUS_CONTROL_FRAME(frame)) {
    uint64_t frame_id;
    int32_t line;
    frame_reading reading = read_frame(frame, with_gvl ? &epochs : NULL, &frame_id, &line);
    if (reading == FRAME_INCONSISTENT) return VM_CAPTURE_INCONSISTENT;
    if (reading == FRAME_NONE) continue;
    if (kept < max_frames) {
      frame_ids[kept] = frame_id;
      lines[kept] = line;
      kept++;
    }
    depth++;
  }
  *total_depth = depth;
  return (int32_t)kept;
}

// ---------------------------------------------------------------------------
// A thread's previous read, for the sampling pass (vm_frames_memo in vm.h).
//
// Reading a frame follows pointers into the heap (the iseq and its body,
// the method entry and its definition, the line table, the block table):
// several cache misses per frame, most of a 110-frame walk's 4 us in issue
// 22's Rails worker, where the pass runs after the application has pushed
// Sonde's data out of the caches. Between two passes a thread that ran
// usually changed only its innermost frames. A control frame whose words
// (iseq, pc, environment pointer, and that environment's flags, previous
// environment and method entry or cref, all read in order from the
// thread's own VM stack) are the ones a frame at the same place had at the
// previous read shows what that frame showed, as long as the objects those
// words name are the ones they named then. They are when either
// - no GC has started since the previous read: everything it saw was live
//   then (on a stack), so nothing was freed and no address reused since
//   (the line cache's argument above); or
// - the caller kept that read's frames alive since (previous_read_kept:
//   the recorder marks, and so pins, every frame it holds). The frame id
//   (the iseq of a block, the method entry of a method or C function) is
//   then the same object, not moved; a pc inside an iseq's instructions
//   names that iseq, whose lines do not change; the kind of frame comes
//   from the flags word; and a method's frame is its method entry only
//   when its environment word is that very entry (a method that uses $~
//   keeps an svar there, and such a frame is read every time).
// A block frame taken from the memo is not remembered in the block table
// again: only its name depends on that, and the entry was written when the
// frame was read.
//
// With the main Ractor's GVL only (the sampling pass).
typedef struct {
  // The control frame's words, as compared.
  const void *iseq, *pc, *ep;
  VALUE ep_flags, ep_specval, ep_me_cref;
  // What it showed.
  uint64_t frame_id;
  int32_t line;
  uint8_t reading; // a frame_reading
  bool pinnable;    // its frame id pins all it depends on (see pinnable)
  bool kept_alive;  // pinnable, and in the read's frames (which the caller keeps)
} memo_entry;

// Deeper stacks (a recursion) are read the usual way every time.
#define MEMO_MAX_CONTROL_FRAMES 2048u

struct vm_frames_memo {
  memo_entry *entries; // from the outermost control frame inwards
  uint32_t count, capacity; // count: entries the previous read wrote (0: none)
  uint32_t gc_count;        // the GC count of the previous read
};

vm_frames_memo *vm_frames_memo_new(void) { return calloc(1, sizeof(vm_frames_memo)); }

void vm_frames_memo_free(vm_frames_memo *memo) {
  if (memo == NULL) return;
  free(memo->entries);
  free(memo);
}

static void memo_words_of(const rb_control_frame_t *frame, memo_entry *words) {
  const VALUE *ep = frame->ep;
  words->iseq = frame->iseq;
  words->pc = frame->pc;
  words->ep = ep;
  words->ep_flags = ep ? ep[VM_ENV_DATA_INDEX_FLAGS] : 0;
  words->ep_specval = ep ? ep[VM_ENV_DATA_INDEX_SPECVAL] : 0;
  words->ep_me_cref = ep ? ep[VM_ENV_DATA_INDEX_ME_CREF] : 0;
}

static bool memo_words_equal(const memo_entry *a, const memo_entry *b) {
  return a->iseq == b->iseq && a->pc == b->pc && a->ep == b->ep && a->ep_flags == b->ep_flags &&
         a->ep_specval == b->ep_specval && a->ep_me_cref == b->ep_me_cref;
}

static bool memo_reserve(vm_frames_memo *memo, uint32_t wanted) {
  if (wanted <= memo->capacity) return true;
  uint32_t capacity = memo->capacity ? memo->capacity : 64;
  while (capacity < wanted) capacity *= 2;
  memo_entry *grown = realloc(memo->entries, (size_t)capacity * sizeof(*grown));
  if (grown == NULL) return false;
  memo->entries = grown;
  memo->capacity = capacity;
  return true;
}

// Whether a frame, once the caller keeps its frame id alive, may be taken
// from the memo after a GC (see above).
static bool pinnable(const memo_entry *entry) {
  if (entry->reading != FRAME_SHOWN) return true; // shows nothing: decided by the words alone
  if (is_object_of_imemo_type((VALUE)entry->frame_id, imemo_iseq)) return true; // a block, named by its iseq
  return (VALUE)entry->frame_id == entry->ep_me_cref; // a method: its entry is the word itself
}

// As walk_frames with the GVL, with the thread's memo: frames whose words
// match it are taken from it, the others read and written into it.
// *unchanged: every frame matched (the result is the previous read's).
static int32_t walk_frames_with_memo(const rb_execution_context_t *ec, vm_frames_memo *memo, bool previous_read_kept,
                                     uint64_t *frame_ids, int32_t *lines, uint32_t max_frames, uint32_t *total_depth,
                                     bool *unchanged) {
  *unchanged = false;
  *total_depth = 0;
  frame_range range;
  if (!frame_range_of(ec, &range)) {
    memo->count = 0;
    return VM_CAPTURE_INCONSISTENT;
  }
  uint32_t control_frames = (uint32_t)(range.end - range.top);
  gc_epochs epochs = gc_epochs_now_with_gvl();
  uint32_t gc_count = epochs.all;
  if (control_frames > MEMO_MAX_CONTROL_FRAMES || !memo_reserve(memo, control_frames)) {
    memo->count = 0;
    return walk_frames(ec, frame_ids, lines, max_frames, total_depth, true);
  }
  bool same_gc = memo->gc_count == gc_count;
  // Entries of the previous read that may be compared at all.
  uint32_t comparable = same_gc || previous_read_kept ? memo->count : 0;
  bool all_matched = comparable == control_frames;
  uint32_t kept = 0, depth = 0;
  uint32_t index = control_frames; // of the frame below, from the outermost
  for (const rb_control_frame_t *frame = range.top; frame < range.end; frame = RUBY_VM_PREVIOUS_CONTROL_FRAME(frame)) {
    memo_entry *entry = &memo->entries[--index];
    memo_entry words;
    memo_words_of(frame, &words);
    bool matched = index < comparable && memo_words_equal(&words, entry) && (same_gc || entry->kept_alive);
    if (!matched) {
      all_matched = false;
      *entry = words;
      entry->reading = (uint8_t)read_frame(frame, &epochs, &entry->frame_id, &entry->line);
      entry->pinnable = pinnable(entry);
    }
    if (entry->reading == FRAME_INCONSISTENT) {
      memo->count = 0;
      *total_depth = 0;
      return VM_CAPTURE_INCONSISTENT;
    }
    // A frame cut off the stack (past max_frames) is not in what the caller keeps.
    bool in_frames = entry->reading == FRAME_NONE || kept < max_frames;
    entry->kept_alive = entry->pinnable && in_frames;
    if (entry->reading == FRAME_NONE) continue;
    if (kept < max_frames) {
      frame_ids[kept] = entry->frame_id;
      lines[kept] = entry->line;
      kept++;
    }
    depth++;
  }
  memo->count = control_frames;
  memo->gc_count = gc_count;
  *unchanged = all_matched;
  *total_depth = depth;
  return (int32_t)kept;
}

// The pass reads other threads' frames with the GVL, into the recorder's
// frame layout: ids and lines go through a scratch pair first.
static uint32_t read_thread_frames(const void *handle, vm_frames_memo *memo, bool previous_read_kept,
                                   recorder_frame *frames, uint32_t max_frames, uint32_t *total_depth,
                                   bool *unchanged) {
  static uint64_t *ids;
  static int32_t *lines;
  static uint32_t capacity;
  *total_depth = 0;
  *unchanged = false;
  if (max_frames > capacity) {
    uint64_t *grown_ids = realloc(ids, max_frames * sizeof(*ids));
    if (grown_ids == NULL) return 0;
    ids = grown_ids;
    int32_t *grown_lines = realloc(lines, max_frames * sizeof(*lines));
    if (grown_lines == NULL) return 0;
    lines = grown_lines;
    capacity = max_frames;
  }
  const rb_thread_t *thread = handle;
  int32_t kept = memo ? walk_frames_with_memo(thread->ec, memo, previous_read_kept, ids, lines, max_frames,
                                                    total_depth, unchanged)
                      : walk_frames(thread->ec, ids, lines, max_frames, total_depth, true);
  if (kept < 0) return 0;
  for (int32_t i = 0; i < kept; i++) frames[i] = (recorder_frame){.frame_id = ids[i], .line = lines[i]};
  return (uint32_t)kept;
}

uint32_t vm_thread_frames(const void *handle, recorder_frame *frames, uint32_t max_frames,
                          uint32_t *total_depth) {
  bool unchanged;
  return read_thread_frames(handle, NULL, false, frames, max_frames, total_depth, &unchanged);
}

uint32_t vm_thread_frames_with_memo(const void *handle, vm_frames_memo *memo, bool previous_read_kept,
                                    recorder_frame *frames, uint32_t max_frames, uint32_t *total_depth,
                                    bool *unchanged) {
  return read_thread_frames(handle, memo, previous_read_kept, frames, max_frames, total_depth, unchanged);
}

// The owner must also be the thread whose execution context this native
// thread runs now: Ruby 3.1 keeps ended threads' native threads for reuse,
// and one picked up for a new Ruby thread can be the owner's while its
// thread-local execution context still names the ended thread, whose
// struct the GC may have freed (valgrind saw rb_postponed_job_register_one,
// which reads that context, read freed memory). Such a tick is skipped.
const void *vm_gvl_holder_self_signal_safe(void) {
  if (main_ractor == NULL) return NULL;
  const rb_thread_t *owner = shared_load_relaxed(&main_ractor->threads.gvl.owner);
  if (owner == NULL || !pthread_equal(owner->thread_id, pthread_self())) return NULL;
  return rb_current_execution_context(false) == owner->ec ? owner : NULL;
}

// gc.c's during_gc flag: a plain read (StackProf's handler reads it the same way).
bool vm_gc_running_signal_safe(void) { return rb_during_gc() != 0; }

// YJIT on 3.1 (and 3.2) publishes a new frame in ec->cfp before it writes
// the frame (yjit_codegen.c, gen_send_iseq and gen_send_cfunc: "ec->cfp--"
// comes before "Setup the new frame"), and never writes a JIT frame's pc:
// a handler landing there reads a stale frame whose ep leads to whatever
// the stack slot held before, and crashed on it. So with YJIT on, the
// handler does not read stacks here; the capture is read at recording, at
// the next safe point, as a postponed job would (the old safe-point bias,
// for this Ruby with YJIT only). Ruby 3.3's YJIT writes the frame first.
// YJIT is chosen at boot on 3.1 and cannot be turned on later.
static bool stacks_readable_in_handler = true;

// The handle comes from the thread's own CPU timer record or from the GVL
// owner, and is checked against pthread_self(): a stale handle (a record
// retired while its signal was in flight) never leads to another thread's
// stack, which only the GVL would make safe to read. A thread past its
// Ruby life (status KILLED, set before its VM stack is cleared) is not read.
int32_t vm_capture_own_stack_signal_safe(const void *self_handle, uint64_t *frame_ids, int32_t *lines,
                                         uint32_t max_frames, uint32_t *total_depth) {
  const rb_thread_t *thread = self_handle;
  *total_depth = 0;
  if (!stacks_readable_in_handler) return VM_CAPTURE_LATER;
  if (thread == NULL || !pthread_equal(thread->thread_id, pthread_self()) || thread->status == THREAD_KILLED) {
    return VM_CAPTURE_INCONSISTENT;
  }
  return walk_frames(thread->ec, frame_ids, lines, max_frames, total_depth, false);
}

const void *vm_current_thread_handle(void) { return GET_THREAD(); }

bool vm_current_thread_info(vm_thread_info *info) {
  rb_thread_t *thread = GET_THREAD();
  if (thread == NULL || thread->tid == 0) return false;
  describe_thread(thread, info);
  return true;
}

// The block's iseq says where it is: read from the VM's structs, as
// Proc#source_location would compute it, without calling it.
bool vm_thread_start_location(const void *handle, char *out, size_t size) {
  const rb_thread_t *thread = handle;
  if (thread->invoke_type != thread_invoke_type_proc || !RB_TYPE_P(thread->invoke_arg.proc.proc, T_DATA)) return false;
  const rb_proc_t *proc = RTYPEDDATA_DATA(thread->invoke_arg.proc.proc);
  if (proc == NULL || vm_block_type(&proc->block) != block_type_iseq) return false;
  const rb_iseq_t *iseq = proc->block.as.captured.code.iseq;
  if (iseq == NULL || iseq->body == NULL) return false;
  VALUE path = iseq->body->location.pathobj;
  if (RB_TYPE_P(path, T_ARRAY)) path = RARRAY_AREF(path, PATHOBJ_PATH);
  if (!RB_TYPE_P(path, T_STRING)) return false;
  snprintf(out, size, "%.*s:%ld", (int)RSTRING_LEN(path), RSTRING_PTR(path),
           FIX2LONG(iseq->body->location.first_lineno));
  return true;
}

void vm_begin_run(void) {
  VALUE vm = rb_const_get(rb_cObject, rb_intern("RubyVM"));
  ID yjit = rb_intern("YJIT");
  stacks_readable_in_handler =
      !(rb_const_defined(vm, yjit) && RTEST(rb_funcall(rb_const_get(vm, yjit), rb_intern("enabled?"), 0)));
}

void vm_end_run(void) {}

const void *vm_thread_handle_of(VALUE thread) {
  if (!rb_obj_is_kind_of(thread, rb_cThread)) return NULL;
  rb_thread_t *th = RTYPEDDATA_DATA(thread);
  return th == NULL || th->tid == 0 || th->status == THREAD_KILLED ? NULL : th;
}

bool vm_thread_info_of(VALUE thread, vm_thread_info *info) {
  if (!rb_obj_is_kind_of(thread, rb_cThread)) return false;
  rb_thread_t *th = RTYPEDDATA_DATA(thread);
  if (th == NULL || th->tid == 0 || th->status == THREAD_KILLED) return false;
  describe_thread(th, info);
  return true;
}

// GC.total_time is written in Ruby on 3.1 (gc.rb): it cannot be called
// without a method call. GC.stat(:time) is the same clock in milliseconds,
// read by a C function: a poll's share is rounded, the sum over a run is
// right to the millisecond.
int64_t vm_gc_total_time_ns(void) {
  static VALUE time_key;
  if (time_key == 0) time_key = ID2SYM(rb_intern("time"));
  return (int64_t)rb_gc_stat(time_key) * 1000000;
}

static bool is_c_method(VALUE frame_id) {
  if (!RB_TYPE_P(frame_id, T_IMEMO) || imemo_type(frame_id) != imemo_ment) return false;
  const rb_callable_method_entry_t *method = (const rb_callable_method_entry_t *)frame_id;
  return method->def->type == VM_METHOD_TYPE_CFUNC;
}

// "Class#method" or "Class.method" for a method entry, as Ruby 3.4 names it.
static VALUE qualified_method_name(VALUE method_entry) {
  const rb_callable_method_entry_t *method = (const rb_callable_method_entry_t *)method_entry;
  VALUE method_name = rb_id2str(method->def->original_id);
  VALUE class_path = rb_profile_frame_classpath(method_entry);
  if (NIL_P(method_name)) return Qnil;
  if (NIL_P(class_path)) return rb_str_dup(method_name);
  const char *separator = RTEST(rb_profile_frame_singleton_method_p(method_entry)) ? "." : "#";
  return rb_sprintf("%" PRIsVALUE "%s%" PRIsVALUE, class_path, separator, method_name);
}

// A block of a method, as Ruby 3.4 names it: its own label ("block (2
// levels) in main_loop") with the method's name qualified ("block (2
// levels) in Optcarrot::PPU#main_loop"). Qnil when the block's method is
// not known (not remembered, or not a block of a method).
static VALUE qualified_block_name(const rb_iseq_t *iseq) {
  VALUE method_entry = block_methods_find((VALUE)iseq);
  if (method_entry == 0 || iseq->body->type != ISEQ_TYPE_BLOCK) return Qnil;
  VALUE label = iseq->body->location.label, base_label = iseq->body->location.base_label;
  if (!RB_TYPE_P(label, T_STRING) || !RB_TYPE_P(base_label, T_STRING)) return Qnil;
  long prefix = RSTRING_LEN(label) - RSTRING_LEN(base_label);
  if (prefix <= 0 || memcmp(RSTRING_PTR(label) + prefix, RSTRING_PTR(base_label), RSTRING_LEN(base_label)) != 0) {
    return Qnil;
  }
  VALUE method_name = qualified_method_name(method_entry);
  if (NIL_P(method_name)) return Qnil;
  return rb_sprintf("%.*s%" PRIsVALUE, (int)prefix, RSTRING_PTR(label), method_name);
}

static bool is_iseq(VALUE frame_id) { return RB_TYPE_P(frame_id, T_IMEMO) && imemo_type(frame_id) == imemo_iseq; }

void vm_describe_frame(uint64_t frame_id, VALUE *name, VALUE *path, int64_t *first_line) {
  VALUE frame = (VALUE)frame_id;
  if (is_c_method(frame)) {
    *name = qualified_method_name(frame);
    *path = Qnil;
    *first_line = 0;
    return;
  }
  *name = is_iseq(frame) ? qualified_block_name((const rb_iseq_t *)frame) : Qnil;
  if (NIL_P(*name)) *name = rb_profile_frame_full_label(frame);
  *path = rb_profile_frame_path(frame);
  VALUE line = rb_profile_frame_first_lineno(frame);
  *first_line = FIXNUM_P(line) ? FIX2LONG(line) : 0;
}

// A block's frame keeps the method entry it is named by alive too.
void vm_mark_frame(uint64_t frame_id) {
  rb_gc_mark((VALUE)frame_id);
  if (!is_iseq((VALUE)frame_id)) return;
  VALUE method_entry = block_methods_find((VALUE)frame_id);
  if (method_entry != 0) rb_gc_mark(method_entry);
}

// Before Ruby 3.3 a postponed job is registered at each trigger; Ruby made
// rb_postponed_job_register_one for signal handlers (it only writes to a
// preallocated table and sets an interrupt flag).
static void (*sampling_job)(void *unused);

bool vm_postponed_job_prepare(void (*job)(void *unused)) {
  sampling_job = job;
  return true;
}

bool vm_postponed_job_trigger_signal_safe(void) {
  return sampling_job != NULL && rb_postponed_job_register_one(0, sampling_job, NULL) != 0;
}

// Nothing of this backend's is held across a handler; the forking thread's
// real tid is kept (see tid_of).
void vm_forget_after_fork(void) {
  forked_thread = pthread_self();
  forked_thread_tid = (int64_t)syscall(SYS_gettid);
}
