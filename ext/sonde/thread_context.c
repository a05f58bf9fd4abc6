// thread_context.c: per-thread sampling state and the sampling pass.
//
// Runs with the GVL, from a postponed job (after a SIGPROF) or from the idle
// helper; never in a signal handler and never during GC. Holding the GVL is
// what makes other threads' frames and states stable while we read them.
//
// Steady state allocates nothing: contexts are created once per thread, the
// thread list and frame buffer are reused, the recorder grows only on new
// stacks. Naming a thread (once per thread) may call into Ruby.
#include "thread_context.h"

#include <stdio.h>
#include <string.h>

#include <ruby/st.h>

#include "clocks.h"
#include "stacks.h"
#include "vm.h"

#define THREAD_NAME_SIZE 128
#define INITIAL_THREAD_CAPACITY 16

typedef struct {
  const void *handle;
  int64_t native_tid;
  clockid_t cpu_clock;
  bool has_cpu_clock;
  int64_t cpu_ns_at_previous_sample;
  int64_t wall_ns_at_previous_sample;
  VALUE name_source; // the Thread#name the cached name was made from
  char name[THREAD_NAME_SIZE];
  uint64_t last_seen_pass;
  int64_t gc_cpu_ns_to_deduct; // GC time already charged to "Garbage Collection"
  int64_t gc_wall_ns_to_deduct;
  vm_gvl_times gvl_at_previous_sample; // where backends time GVL waits
} thread_context;

struct thread_contexts {
  st_table *by_handle; // VM thread handle -> thread_context *
  uint64_t pass;
  vm_thread_info *threads; // this pass's threads, reused between passes
  size_t thread_count, thread_capacity;
};

static const char *const STATE_NAMES[VM_THREAD_STATE_COUNT] = {
    [VM_THREAD_RUNNING] = "running",
    [VM_THREAD_WAITING_FOR_GVL] = "waiting for gvl",
    [VM_THREAD_SLEEPING] = "sleeping",
    [VM_THREAD_BLOCKED] = "blocked",
};

// GC states follow the VM's in the recorder's state byte:
// GC_STATE_BASE + is_major * GC_REASON_COUNT + reason.
#define GC_STATE_BASE VM_THREAD_STATE_COUNT
// Ruby's GC.latest_gc_info(:gc_by) values; anything else is "other".
static const char *const GC_REASONS[] = {"newobj", "malloc", "method", "capi", "stress", "force", "other"};
#define GC_REASON_COUNT (sizeof(GC_REASONS) / sizeof(GC_REASONS[0]))
#define GC_STATE_END (GC_STATE_BASE + 2 * GC_REASON_COUNT)

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

thread_contexts *thread_contexts_new(void) {
  thread_contexts *contexts = calloc(1, sizeof(*contexts));
  if (contexts == NULL) return NULL;
  contexts->threads = calloc(INITIAL_THREAD_CAPACITY, sizeof(vm_thread_info));
  if (contexts->threads == NULL) {
    free(contexts);
    return NULL;
  }
  contexts->thread_capacity = INITIAL_THREAD_CAPACITY;
  contexts->by_handle = st_init_numtable();
  return contexts;
}

static int free_context(st_data_t key, st_data_t value, st_data_t arg) {
  free((thread_context *)value);
  return ST_DELETE;
}

void thread_contexts_free(thread_contexts *contexts) {
  if (contexts == NULL) return;
  st_foreach(contexts->by_handle, free_context, 0);
  st_free_table(contexts->by_handle);
  free(contexts->threads);
  free(contexts);
}

size_t thread_contexts_count(const thread_contexts *contexts) { return contexts->by_handle->num_entries; }

static int mark_context(st_data_t key, st_data_t value, st_data_t arg) {
  rb_gc_mark(((thread_context *)value)->name_source);
  return ST_CONTINUE;
}

void thread_contexts_mark(const thread_contexts *contexts) {
  if (contexts != NULL) st_foreach(contexts->by_handle, mark_context, 0);
}

// Copies the thread list first: naming a new thread calls into Ruby, and the
// VM's list must not be walked across such a call.
static void collect_thread(const vm_thread_info *info, void *data) {
  thread_contexts *contexts = data;
  if (contexts->thread_count == contexts->thread_capacity) {
    size_t capacity = contexts->thread_capacity * 2;
    vm_thread_info *grown = realloc(contexts->threads, capacity * sizeof(vm_thread_info));
    if (grown == NULL) return; // this thread is skipped this pass; dropped_samples would not know it, rare
    contexts->threads = grown;
    contexts->thread_capacity = capacity;
  }
  contexts->threads[contexts->thread_count++] = *info;
}

static void copy_truncated(char *out, const char *text, size_t length) {
  // Keep the end of long names: for file paths it is the part that tells.
  if (length >= THREAD_NAME_SIZE) {
    text += length - (THREAD_NAME_SIZE - 1);
    length = THREAD_NAME_SIZE - 1;
  }
  memcpy(out, text, length);
  out[length] = '\0';
}

static VALUE start_location(VALUE proc) { return rb_funcall(proc, rb_intern("source_location"), 0); }

// "main", the thread's name, else where it was started ("app.rb:12").
static void name_thread(thread_context *context, const vm_thread_info *info) {
  context->name_source = info->name;
  if (info->is_main) {
    snprintf(context->name, THREAD_NAME_SIZE, "main");
    return;
  }
  if (RB_TYPE_P(info->name, T_STRING)) {
    copy_truncated(context->name, RSTRING_PTR(info->name), (size_t)RSTRING_LEN(info->name));
    return;
  }
  snprintf(context->name, THREAD_NAME_SIZE, "thread %lld", (long long)info->native_tid);
  VALUE proc = vm_thread_start_proc(info->handle);
  if (NIL_P(proc)) return;
  int raised = 0;
  VALUE location = rb_protect(start_location, proc, &raised);
  if (raised) {
    rb_set_errinfo(Qnil);
    return;
  }
  if (!RB_TYPE_P(location, T_ARRAY) || RARRAY_LEN(location) != 2) return;
  VALUE path = RARRAY_AREF(location, 0), line = RARRAY_AREF(location, 1);
  if (!RB_TYPE_P(path, T_STRING) || !FIXNUM_P(line)) return;
  char text[PATH_MAX + 32];
  int length = snprintf(text, sizeof(text), "%.*s:%ld", (int)RSTRING_LEN(path), RSTRING_PTR(path), FIX2LONG(line));
  if (length > 0) copy_truncated(context->name, text, (size_t)length < sizeof(text) ? (size_t)length : sizeof(text) - 1);
}

// Finds or creates the context of a thread. is_new tells whether this is the
// thread's first sample. Returns NULL when out of memory.
static thread_context *context_for(thread_contexts *contexts, const vm_thread_info *info, bool *is_new) {
  st_data_t found;
  *is_new = false;
  if (st_lookup(contexts->by_handle, (st_data_t)info->handle, &found)) {
    thread_context *context = (thread_context *)found;
    // A freed thread's struct can be reused for a new thread: same handle, new tid.
    if (context->native_tid == info->native_tid) return context;
    st_delete(contexts->by_handle, (st_data_t *)&context->handle, NULL);
    free(context);
  }
  thread_context *context = calloc(1, sizeof(*context));
  if (context == NULL) return NULL;
  context->handle = info->handle;
  context->native_tid = info->native_tid;
  context->has_cpu_clock = clocks_thread_cpu_clock(info->native_tid, &context->cpu_clock);
  context->name_source = Qundef;
  st_insert(contexts->by_handle, (st_data_t)info->handle, (st_data_t)context);
  *is_new = true;
  return context;
}

static int64_t cpu_now(const thread_context *context) {
  return context->has_cpu_clock ? clocks_cpu_ns(context->cpu_clock) : -1;
}

static int forget_if_gone(st_data_t key, st_data_t value, st_data_t arg) {
  thread_context *context = (thread_context *)value;
  if (context->last_seen_pass == *(uint64_t *)arg) return ST_CONTINUE;
  free(context);
  return ST_DELETE;
}

static void forget_dead_threads(thread_contexts *contexts, size_t threads_sampled) {
  if (contexts->by_handle->num_entries > threads_sampled) {
    st_foreach(contexts->by_handle, forget_if_gone, (st_data_t)&contexts->pass);
  }
}

static bool is_profiler_thread(const sonde_profiler *profiler, VALUE thread) {
  if (thread == profiler->trigger_thread || thread == profiler->idle_thread) return true;
  for (int i = 0; i < profiler->ignored_thread_count; i++) {
    if (thread == profiler->ignored_threads[i]) return true;
  }
  return false;
}

static void list_threads(sonde_profiler *profiler, int64_t now) {
  thread_contexts *contexts = profiler->contexts;
  contexts->thread_count = 0;
  contexts->pass++;
  vm_each_thread(now, collect_thread, contexts);
}

void thread_contexts_baseline(sonde_profiler *profiler) {
  thread_contexts *contexts = profiler->contexts;
  int64_t now = clocks_monotonic_ns();
  list_threads(profiler, now);
  for (size_t i = 0; i < contexts->thread_count; i++) {
    bool is_new;
    thread_context *context = context_for(contexts, &contexts->threads[i], &is_new);
    if (context == NULL) continue;
    name_thread(context, &contexts->threads[i]);
    context->cpu_ns_at_previous_sample = cpu_now(context);
    context->wall_ns_at_previous_sample = now;
    context->gvl_at_previous_sample = contexts->threads[i].gvl_times;
    context->last_seen_pass = contexts->pass;
  }
  profiler->previous_pass_ns = now;
}

// Takes already-charged GC time off a delta (never below zero).
static int64_t deduct(int64_t delta, int64_t *already_charged) {
  int64_t taken = *already_charged < delta ? *already_charged : delta;
  *already_charged -= taken;
  return delta - taken;
}

// Where a thread's wall time since its previous sample went. Without GVL
// times (Ruby 3.1) all of it goes to the state the thread is in now; with
// them (3.3+) each part goes to what the thread really did: holding the
// GVL, waiting for it, or off it. Time the GVL times do not cover (a thread
// met after its previous pass) goes to the state it is in now.
typedef struct {
  int64_t holding, waiting, off;
} wall_split;

static int64_t clamp_delta(int64_t now, int64_t before) { return now > before ? now - before : 0; }

static int64_t *part_for_state(wall_split *split, vm_thread_state state) {
  switch (state) {
    case VM_THREAD_RUNNING:
      return &split->holding;
    case VM_THREAD_WAITING_FOR_GVL:
      return &split->waiting;
    default:
      return &split->off;
  }
}

static wall_split split_wall_time(thread_context *context, const vm_thread_info *info, bool is_new, int64_t wall_delta) {
  wall_split split = {0};
  if (info->has_gvl_times) {
    const vm_gvl_times *before = &context->gvl_at_previous_sample, *now = &info->gvl_times;
    vm_gvl_times zero = {0};
    if (is_new) before = &zero;
    split.holding = clamp_delta(now->holding_gvl_ns, before->holding_gvl_ns);
    split.waiting = clamp_delta(now->waiting_for_gvl_ns, before->waiting_for_gvl_ns);
    split.off = clamp_delta(now->off_gvl_ns, before->off_gvl_ns);
    context->gvl_at_previous_sample = *now;
    // A thread's first sample: its record's times cover its whole life
    // since Sonde met it, which may be longer than one pass (a busy pass
    // rate, or a thread born READY and not listed yet).
    int64_t lifetime = split.holding + split.waiting + split.off;
    if (is_new && lifetime > wall_delta) wall_delta = lifetime;
  }
  // The parts never add up to more than the wall time, nor to less.
  int64_t *parts[] = {&split.off, &split.waiting, &split.holding};
  int64_t room = wall_delta;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    if (*parts[i] > room) *parts[i] = room;
    room -= *parts[i];
  }
  *part_for_state(&split, info->state) += room;
  return split;
}

static bool record_part(sonde_profiler *profiler, const thread_context *context, const vm_thread_info *info,
                        uint32_t depth, vm_thread_state state, const int64_t values[RECORDER_VALUE_COUNT]) {
  if (recorder_record(profiler_active_recorder(profiler), profiler->frame_buffer, depth, info->native_tid, context->name,
                      (uint8_t)state, values) != 0) {
    profiler->stats.dropped_samples++;
    return false;
  }
  return true;
}

static void sample_thread(sonde_profiler *profiler, const vm_thread_info *info, int64_t now, bool *someone_on_cpu) {
  thread_contexts *contexts = profiler->contexts;
  bool is_new;
  thread_context *context = context_for(contexts, info, &is_new);
  if (context == NULL) {
    profiler->stats.dropped_samples++;
    return;
  }
  context->last_seen_pass = contexts->pass;
  if (context->name_source != info->name) name_thread(context, info);

  // A thread born since the previous pass: all its CPU time is new, and it
  // lived at most since that pass.
  int64_t cpu = cpu_now(context);
  int64_t cpu_before = is_new ? 0 : context->cpu_ns_at_previous_sample;
  int64_t wall_before = is_new ? profiler->previous_pass_ns : context->wall_ns_at_previous_sample;
  int64_t cpu_delta = (cpu >= 0 && cpu_before >= 0 && cpu >= cpu_before) ? cpu - cpu_before : 0;
  cpu_delta = deduct(cpu_delta, &context->gc_cpu_ns_to_deduct);
  wall_split split = split_wall_time(context, info, is_new, clamp_delta(now, wall_before));
  // GC runs holding the GVL: its time is part of "holding" where GVL times
  // tell that part apart, else of the state now.
  split.holding = deduct(split.holding, &context->gc_wall_ns_to_deduct);
  int64_t *now_part = part_for_state(&split, info->state);
  *now_part = deduct(*now_part, &context->gc_wall_ns_to_deduct);
  context->cpu_ns_at_previous_sample = cpu;
  context->wall_ns_at_previous_sample = now;

  bool on_cpu = info->state == VM_THREAD_RUNNING;
  if (on_cpu) *someone_on_cpu = true;
  uint32_t depth = stacks_collect(info->handle, profiler->frame_buffer, profiler->max_frames);

  // One sample per part, all on the stack the thread has now. The sample
  // count goes with the state the thread is in now; CPU time with the part
  // that held the GVL when there is one (threads burn CPU there), else with
  // the state now (C code burning CPU without the GVL).
  vm_thread_state off_state = info->has_gvl_times ? info->off_gvl_state : info->state;
  int64_t *cpu_part = split.holding > 0 ? &split.holding : now_part;
  struct {
    vm_thread_state state;
    int64_t *wall;
  } parts[] = {
      {VM_THREAD_RUNNING, &split.holding},
      {VM_THREAD_WAITING_FOR_GVL, &split.waiting},
      {off_state, &split.off},
  };
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    bool is_now = parts[i].wall == now_part, is_cpu = parts[i].wall == cpu_part;
    if (*parts[i].wall == 0 && !is_now && !is_cpu) continue;
    int64_t values[RECORDER_VALUE_COUNT] = {
        [RECORDER_CPU_TIME_NS] = is_cpu ? cpu_delta : 0,
        [RECORDER_CPU_SAMPLES] = is_now && on_cpu ? 1 : 0,
        [RECORDER_WALL_TIME_NS] = *parts[i].wall,
        [RECORDER_WALL_SAMPLES] = is_now ? 1 : 0,
        [RECORDER_GVL_WAIT_NS] = info->has_gvl_times && parts[i].wall == &split.waiting ? split.waiting : 0,
    };
    if (!record_part(profiler, context, info, depth, parts[i].state, values)) return;
  }
  profiler->stats.thread_samples++;
}

void thread_contexts_sample_all(sonde_profiler *profiler) {
  thread_contexts_record_pending_gc(profiler);
  thread_contexts *contexts = profiler->contexts;
  int64_t now = clocks_monotonic_ns();
  bool someone_on_cpu = false;
  size_t threads_sampled = 0;
  list_threads(profiler, now);
  for (size_t i = 0; i < contexts->thread_count; i++) {
    const vm_thread_info *info = &contexts->threads[i];
    if (is_profiler_thread(profiler, info->thread)) continue;
    sample_thread(profiler, info, now, &someone_on_cpu);
    threads_sampled++;
  }
  forget_dead_threads(contexts, threads_sampled);
  profiler->previous_pass_ns = now;
  profiler->stats.samples++;
  if (someone_on_cpu) profiler->stats.cpu_samples++;
}

void thread_contexts_on_gc_enter_no_alloc(sonde_profiler *profiler) {
  profiler->gc_started_wall_ns = clocks_monotonic_ns();
  profiler->gc_started_cpu_ns = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  profiler->gc_thread = vm_current_thread_handle();
}

void thread_contexts_on_gc_exit_no_alloc(sonde_profiler *profiler) {
  if (profiler->gc_started_wall_ns == 0) return; // enabled mid-GC
  profiler->gc_pending_wall_ns += clocks_monotonic_ns() - profiler->gc_started_wall_ns;
  int64_t cpu = clocks_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  if (cpu >= 0 && profiler->gc_started_cpu_ns >= 0) profiler->gc_pending_cpu_ns += cpu - profiler->gc_started_cpu_ns;
  profiler->gc_started_wall_ns = 0;
  profiler->stats.gc_events++;
}

static unsigned gc_reason_index(VALUE reason) {
  if (!SYMBOL_P(reason)) return GC_REASON_COUNT - 1;
  const char *name = rb_id2name(SYM2ID(reason));
  for (unsigned i = 0; name != NULL && i < GC_REASON_COUNT - 1; i++) {
    if (strcmp(name, GC_REASONS[i]) == 0) return i;
  }
  return GC_REASON_COUNT - 1;
}

// What the latest GC was, as a GC state. Symbols are static: no allocation.
static uint8_t latest_gc_state(void) {
  VALUE major_by = rb_gc_latest_gc_info(ID2SYM(rb_intern("major_by")));
  VALUE gc_by = rb_gc_latest_gc_info(ID2SYM(rb_intern("gc_by")));
  unsigned is_major = RTEST(major_by) ? 1 : 0;
  return (uint8_t)(GC_STATE_BASE + is_major * GC_REASON_COUNT + gc_reason_index(gc_by));
}

static ID id_total_time;
static VALUE gc_module;

static VALUE read_gc_total_time(VALUE unused) { return rb_funcall(gc_module, id_total_time, 0); }

// GC.total_time: nanoseconds Ruby itself spent in GC (from 3.1), measured by
// gc.c around each GC step whether or not anyone asks. -1 when unreadable
// (it raised, or GC.measure_total_time was turned off and it stays still).
static int64_t gc_total_time_ns(void) {
  int raised = 0;
  VALUE total = rb_protect(read_gc_total_time, Qnil, &raised);
  if (raised) {
    rb_set_errinfo(Qnil);
    return -1;
  }
  return RB_INTEGER_TYPE_P(total) ? (int64_t)NUM2LL(total) : -1;
}

void thread_contexts_start_polling_gc(sonde_profiler *profiler) {
  if (gc_module == 0) {
    gc_module = rb_const_get(rb_cObject, rb_intern("GC"));
    id_total_time = rb_intern("total_time");
  }
  profiler->gc_polled = true;
  profiler->gc_total_time_seen_ns = gc_total_time_ns();
  profiler->gc_count_seen = rb_gc_count();
}

// GC.total_time is measured on the process CPU clock: it is both the GC's
// CPU time and, GC being CPU work with the GVL held, its wall time. The
// thread running this pass holds the GVL now; between two passes it is
// usually the one that allocated, and GC runs on the allocating thread.
static void poll_gc_time(sonde_profiler *profiler) {
  int64_t total = gc_total_time_ns();
  if (total < 0 || profiler->gc_total_time_seen_ns < 0) {
    profiler->gc_total_time_seen_ns = total;
    return;
  }
  int64_t spent = total - profiler->gc_total_time_seen_ns;
  profiler->gc_total_time_seen_ns = total;
  size_t count = rb_gc_count();
  profiler->stats.gc_events += count - profiler->gc_count_seen;
  profiler->gc_count_seen = count;
  if (spent <= 0) return;
  profiler->gc_pending_cpu_ns += spent;
  profiler->gc_pending_wall_ns += spent;
  profiler->gc_thread = vm_current_thread_handle();
}

void thread_contexts_record_pending_gc(sonde_profiler *profiler) {
  if (profiler->gc_polled) poll_gc_time(profiler);
  if (profiler->gc_pending_wall_ns <= 0 && profiler->gc_pending_cpu_ns <= 0) return;
  int64_t wall = profiler->gc_pending_wall_ns, cpu = profiler->gc_pending_cpu_ns;
  profiler->gc_pending_wall_ns = 0;
  profiler->gc_pending_cpu_ns = 0;

  int64_t thread_id = 0;
  const char *thread_name = "(unknown thread)";
  st_data_t found;
  if (profiler->gc_thread != NULL && st_lookup(profiler->contexts->by_handle, (st_data_t)profiler->gc_thread, &found)) {
    thread_context *context = (thread_context *)found;
    thread_id = context->native_tid;
    thread_name = context->name;
    context->gc_cpu_ns_to_deduct += cpu;
    context->gc_wall_ns_to_deduct += wall;
  }
  recorder_frame frame = {.frame_id = stacks_gc_frame_id(), .line = 0};
  int64_t values[RECORDER_VALUE_COUNT] = {[RECORDER_CPU_TIME_NS] = cpu, [RECORDER_WALL_TIME_NS] = wall};
  if (recorder_record(profiler_active_recorder(profiler), &frame, 1, thread_id, thread_name, latest_gc_state(),
                      values) != 0) {
    profiler->stats.dropped_samples++;
    return;
  }
  profiler->stats.gc_samples++;
}
