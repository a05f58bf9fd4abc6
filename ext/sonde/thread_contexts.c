// thread_contexts.c: the per-thread table (see the header).
//
// With the GVL only: holding it is what keeps threads from being born or
// dying while the table is read against the VM's list. Two indexes over
// the same contexts: by VM handle (what the thread list gives) and by Linux
// thread id (what a CPU sample from the signal handler carries).
//
// Steady state allocates nothing: a context is made once per thread. Like
// the whole sampling path, it calls no Ruby method (see vm_begin_run).
#include "thread_contexts.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <ruby/st.h>

#include "clocks.h"

struct thread_contexts {
  st_table *by_handle; // VM thread handle -> thread_context *
  st_table *by_tid;    // native tid -> thread_context *
  st_table *end_clocks; // native tid -> CPU clock reading (thread_contexts_note_end_clock)
  uint64_t pass;
  // Contexts in the table met during this pass: when they are all of them,
  // forget_unseen has nothing to look for (the usual pass).
  size_t seen_in_pass;
};

thread_contexts *thread_contexts_new(void) {
  thread_contexts *contexts = calloc(1, sizeof(*contexts));
  if (contexts == NULL) return NULL;
  contexts->by_handle = st_init_numtable();
  contexts->by_tid = st_init_numtable();
  contexts->end_clocks = st_init_numtable();
  return contexts;
}

typedef struct {
  thread_context_forget_fn on_forget;
  void *data;
  uint64_t pass; // forget those not seen in it; 0: all
  st_table *by_tid;
} forget_run;

static void forget_context(thread_context *context, forget_run *run) {
  st_data_t tid = (st_data_t)context->native_tid, found;
  // Only if the tid still points here: a newer thread may have the same tid.
  bool tid_is_its_own = st_lookup(run->by_tid, tid, &found) && (thread_context *)found == context;
  if (run->on_forget) run->on_forget(context, run->data, tid_is_its_own);
  if (tid_is_its_own) st_delete(run->by_tid, &tid, NULL);
  vm_frames_memo_free(context->frames_memo);
  recorder_stack_hint_free(&context->sampling.stack_hint);
  free(context);
}

void thread_contexts_forget(thread_contexts *contexts, thread_context *context, thread_context_forget_fn on_forget,
                            void *data) {
  if (context->last_seen_pass == contexts->pass && contexts->seen_in_pass > 0) contexts->seen_in_pass--;
  st_data_t handle = (st_data_t)context->handle;
  st_delete(contexts->by_handle, &handle, NULL);
  forget_run run = {on_forget, data, 0, contexts->by_tid};
  forget_context(context, &run);
}

static int forget_if_unseen(st_data_t key, st_data_t value, st_data_t arg) {
  forget_run *run = (forget_run *)arg;
  thread_context *context = (thread_context *)value;
  if (run->pass != 0 && context->last_seen_pass == run->pass) return ST_CONTINUE;
  forget_context(context, run);
  return ST_DELETE;
}

void thread_contexts_free(thread_contexts *contexts, thread_context_forget_fn on_forget, void *data) {
  if (contexts == NULL) return;
  forget_run run = {on_forget, data, 0, contexts->by_tid};
  st_foreach(contexts->by_handle, forget_if_unseen, (st_data_t)&run);
  st_free_table(contexts->by_handle);
  st_free_table(contexts->by_tid);
  st_free_table(contexts->end_clocks);
  free(contexts);
}

void thread_contexts_begin_pass(thread_contexts *contexts) {
  contexts->pass++;
  contexts->seen_in_pass = 0;
}

// A native thread that ended takes its clock with it.
static int drop_if_clock_gone(st_data_t tid, st_data_t value, st_data_t arg) {
  clockid_t clock;
  return clocks_thread_cpu_clock((int64_t)tid, &clock) && clocks_cpu_ns(clock) >= 0 ? ST_CONTINUE : ST_DELETE;
}

void thread_contexts_forget_unseen(thread_contexts *contexts, thread_context_forget_fn on_forget,
                                   void *data) {
  forget_run run = {on_forget, data, contexts->pass, contexts->by_tid};
  if (contexts->seen_in_pass != contexts->by_handle->num_entries) {
    st_foreach(contexts->by_handle, forget_if_unseen, (st_data_t)&run);
  }
  if (contexts->end_clocks->num_entries > 0) st_foreach(contexts->end_clocks, drop_if_clock_gone, 0);
}

void thread_contexts_note_end_clock(thread_contexts *contexts, int64_t tid, int64_t cpu_ns) {
  st_insert(contexts->end_clocks, (st_data_t)tid, (st_data_t)cpu_ns);
}

bool thread_contexts_take_end_clock(thread_contexts *contexts, int64_t tid, int64_t *cpu_ns) {
  st_data_t key = (st_data_t)tid, value;
  if (!st_delete(contexts->end_clocks, &key, &value)) return false;
  *cpu_ns = (int64_t)value;
  return true;
}

size_t thread_contexts_count(const thread_contexts *contexts) { return contexts->by_handle->num_entries; }

bool thread_context_arm_timer(thread_context *context, cpu_timers *timers, int64_t count_from_ns,
                              cpu_timer_result *result) {
  if (context->timer_tried || !context->has_cpu_clock) return false;
  context->timer_tried = true;
  *result = cpu_timers_arm(timers, context->native_tid, context->handle, count_from_ns, &context->timer);
  return true;
}

bool thread_context_defer_timer(thread_context *context) {
  if (context->timer_tried || !context->has_cpu_clock) return false;
  context->timer_deferred = true;
  return true;
}

bool thread_context_arm_deferred_timer(thread_context *context, cpu_timers *timers, int64_t count_from_ns,
                                       cpu_timer_result *result) {
  if (!context->timer_deferred) return false;
  context->timer_deferred = false;
  return thread_context_arm_timer(context, timers, count_from_ns, result);
}

int64_t thread_context_finish_timer(thread_context *context, cpu_timers *timers, int64_t cpu_now_ns) {
  if (context->timer == 0) return -1;
  int64_t uncovered = cpu_timers_finish(timers, context->timer, cpu_now_ns);
  context->timer = 0;
  return uncovered;
}

void thread_context_charge_gc(thread_context *context, int64_t wall_ns, int64_t cpu_ns) {
  context->gc_wall_ns_to_deduct += wall_ns;
  context->gc_cpu_ns_to_deduct += cpu_ns;
}

static int64_t deduct(int64_t delta, int64_t *already_charged) {
  int64_t taken = *already_charged < delta ? *already_charged : delta;
  *already_charged -= taken;
  return delta - taken;
}

int64_t thread_context_deduct_gc_wall(thread_context *context, int64_t delta) {
  return deduct(delta, &context->gc_wall_ns_to_deduct);
}

int64_t thread_context_deduct_gc_cpu(thread_context *context, int64_t delta) {
  return deduct(delta, &context->gc_cpu_ns_to_deduct);
}

static int mark_context(st_data_t key, st_data_t value, st_data_t arg) {
  rb_gc_mark(((thread_context *)value)->name_source);
  rb_gc_mark(((thread_context *)value)->thread);
  return ST_CONTINUE;
}

void thread_contexts_mark(const thread_contexts *contexts) {
  if (contexts != NULL) st_foreach(contexts->by_handle, mark_context, 0);
}

static int forget_timer(st_data_t key, st_data_t value, st_data_t arg) {
  thread_context *context = (thread_context *)value;
  context->timer = 0;
  context->timer_tried = false;
  return ST_CONTINUE;
}

void thread_contexts_forget_timers_after_fork(thread_contexts *contexts) {
  if (contexts != NULL) st_foreach(contexts->by_handle, forget_timer, 0);
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

// "main", the thread's name, else where it was started ("app.rb:12").
static void name_thread(thread_context *context, const vm_thread_info *info) {
  context->name_source = info->name;
  context->thread_generation = 0; // the recorder's thread entry changes with the name
  context->named_by_tid = false;
  if (info->is_main) {
    snprintf(context->name, THREAD_NAME_SIZE, "main");
    return;
  }
  if (RB_TYPE_P(info->name, T_STRING)) {
    copy_truncated(context->name, RSTRING_PTR(info->name), (size_t)RSTRING_LEN(info->name));
    return;
  }
  char location[PATH_MAX + 32];
  if (vm_thread_start_location(info->handle, location, sizeof(location))) {
    copy_truncated(context->name, location, strlen(location));
  } else {
    thread_contexts_name_of_unmet(info->native_tid, context->name, THREAD_NAME_SIZE);
    context->named_by_tid = true;
  }
}

// Qundef: the backend does not know the name now; the cached one stays.
void thread_contexts_refresh_name(thread_context *context, const vm_thread_info *info) {
  if (info->name != Qundef && context->name_source != info->name) name_thread(context, info);
}

thread_context *thread_contexts_find_by_tid(const thread_contexts *contexts, int64_t tid) {
  st_data_t found;
  return st_lookup(contexts->by_tid, (st_data_t)tid, &found) ? (thread_context *)found : NULL;
}

thread_context *thread_contexts_find_by_handle(const thread_contexts *contexts, const void *handle) {
  st_data_t found;
  return st_lookup(contexts->by_handle, (st_data_t)handle, &found) ? (thread_context *)found : NULL;
}

thread_context *thread_contexts_meet(thread_contexts *contexts, const vm_thread_info *info, bool *is_new,
                                     thread_context_forget_fn on_forget, void *data) {
  *is_new = false;
  thread_context *context = thread_contexts_find_by_handle(contexts, info->handle);
  if (context != NULL && context->native_tid == info->native_tid) {
    if (context->last_seen_pass != contexts->pass) contexts->seen_in_pass++;
    context->last_seen_pass = contexts->pass;
    return context;
  }
  // A freed thread's struct reused for a new thread: same handle, new tid.
  if (context != NULL) thread_contexts_forget(contexts, context, on_forget, data);
  // A tid runs one thread at a time: a context that has this tid under
  // another handle is of a thread that ended, and Ruby 3.1 reuses ended
  // threads' native threads (its thread cache) for new ones at once. Left
  // until the next pass, its timer would go on firing on the new thread's
  // CPU clock, charging that CPU twice (issue 23: 7x the process's CPU at
  // 70,000 threads/s), and such contexts would pile up between passes.
  thread_context *previous = info->native_tid > 0 ? thread_contexts_find_by_tid(contexts, info->native_tid) : NULL;
  if (previous != NULL && previous->handle != info->handle) thread_contexts_forget(contexts, previous, on_forget, data);
  context = calloc(1, sizeof(*context));
  if (context == NULL) return NULL;
  context->handle = info->handle;
  context->thread = info->thread;
  context->native_tid = info->native_tid;
  context->has_cpu_clock = clocks_thread_cpu_clock(info->native_tid, &context->cpu_clock);
  context->name_source = Qundef;
  context->frames_memo = vm_frames_memo_new(); // NULL is fine: frames are then read in full
  context->last_seen_pass = contexts->pass;
  contexts->seen_in_pass++;
  st_insert(contexts->by_handle, (st_data_t)info->handle, (st_data_t)context);
  // A tid seen again belongs to the newer thread (Linux reuses tids).
  st_insert(contexts->by_tid, (st_data_t)info->native_tid, (st_data_t)context);
  name_thread(context, info);
  *is_new = true;
  return context;
}

bool thread_context_recorder_index(thread_context *context, recorder *rec, uint32_t *index) {
  uint64_t generation = recorder_generation(rec);
  if (context->thread_generation == generation) {
    *index = context->thread_index;
    return true;
  }
  if (recorder_intern_thread(rec, context->native_tid, context->name, index) != 0) return false;
  context->thread_generation = generation;
  context->thread_index = *index;
  return true;
}

void thread_contexts_name_of_unmet(int64_t tid, char *name, size_t size) {
  snprintf(name, size, "thread %lld", (long long)tid);
}

void thread_contexts_refresh_name_now(thread_context *context) {
  vm_thread_info info;
  if (vm_thread_info_of(context->thread, &info)) thread_contexts_refresh_name(context, &info);
}
