// pprof_rename_binding.c: Native.rename_label_keys, the Ruby face of
// pprof_rename_label_keys_gzip (pprof_rename.c), for exporters whose backend reads
// labels under its own names (the Datadog exporter).
//
// Contexts: called with the GVL on an exporter's thread. The names are
// copied into C strings and the profile is a frozen String kept alive on the
// stack, so the rewrite itself (inflate, walk, deflate: pure C) runs with
// the GVL released and the application runs meanwhile.
#include "pprof_rename_binding.h"

#include <stdlib.h>
#include <string.h>

#include <ruby/encoding.h>
#include <ruby/thread.h>

#include "pprof_rename.h"

// The largest profile it inflates: as Sonde::Pprof::MAX_DECOMPRESSED_BYTES.
#define MAX_INFLATED_BYTES ((size_t)1 << 30)
// Renames per call: a backend's handful of names.
#define MAX_RENAMES 16

typedef struct {
  const uint8_t *gzipped;
  size_t gzipped_len;
  pprof_rename renames[MAX_RENAMES];
  size_t count;
  uint8_t *out;
  size_t out_len;
  enum pprof_rename_result result;
} rename_call;

static void *rename_without_gvl(void *data) {
  rename_call *call = data;
  call->result = pprof_rename_label_keys_gzip(call->gzipped, call->gzipped_len, call->renames, call->count,
                                              MAX_INFLATED_BYTES, &call->out, &call->out_len);
  return NULL;
}

// name was checked to be a String without NUL.
static char *copied_name(VALUE name) { return strdup(RSTRING_PTR(name)); }

static void free_names(rename_call *call) {
  for (size_t i = 0; i < call->count; i++) {
    free((char *)call->renames[i].old_name);
    free((char *)call->renames[i].new_name);
  }
}

// Native.rename_label_keys(gzipped_pprof, {"old" => "new", ...}, numeric = []):
// the profile with those label keys renamed, or the same String when it
// has none of them; the labels of the old names in numeric (an Array of
// Strings) also get their hex string values as numbers. Raises
// ArgumentError for bytes that are not a gzip'd profile, NoMemoryError
// when memory runs out.
static VALUE native_rename_label_keys(int argc, VALUE *argv, VALUE self) {
  VALUE pprof, renames, numeric;
  rb_scan_args(argc, argv, "21", &pprof, &renames, &numeric);
  Check_Type(pprof, T_STRING);
  Check_Type(renames, T_HASH);
  if (NIL_P(numeric)) numeric = rb_ary_new();
  Check_Type(numeric, T_ARRAY);
  VALUE pairs = rb_funcall(renames, rb_intern("to_a"), 0);
  if (RARRAY_LEN(pairs) > MAX_RENAMES) rb_raise(rb_eArgError, "at most %d renames", MAX_RENAMES);
  for (long i = 0; i < RARRAY_LEN(pairs); i++) {
    VALUE pair = RARRAY_AREF(pairs, i);
    VALUE old_name = RARRAY_AREF(pair, 0), new_name = RARRAY_AREF(pair, 1);
    Check_Type(old_name, T_STRING);
    Check_Type(new_name, T_STRING);
    StringValueCStr(old_name); // raises ArgumentError on an embedded NUL
    StringValueCStr(new_name);
  }
  VALUE frozen = rb_str_new_frozen(pprof);
  rename_call call = {.gzipped = (const uint8_t *)RSTRING_PTR(frozen), .gzipped_len = (size_t)RSTRING_LEN(frozen)};
  for (long i = 0; i < RARRAY_LEN(pairs); i++) {
    VALUE pair = RARRAY_AREF(pairs, i);
    call.renames[i].old_name = copied_name(RARRAY_AREF(pair, 0));
    call.renames[i].new_name = copied_name(RARRAY_AREF(pair, 1));
    call.renames[i].hex_to_number = RTEST(rb_ary_includes(numeric, RARRAY_AREF(pair, 0)));
    call.count = (size_t)i + 1;
    if (call.renames[i].old_name == NULL || call.renames[i].new_name == NULL) {
      free_names(&call);
      rb_memerror();
    }
  }
  rb_thread_call_without_gvl(rename_without_gvl, &call, NULL, NULL);
  RB_GC_GUARD(frozen);
  free_names(&call);
  switch (call.result) {
    case PPROF_RENAMED: {
      VALUE bytes = rb_str_new((const char *)call.out, (long)call.out_len);
      free(call.out);
      rb_enc_associate(bytes, rb_ascii8bit_encoding());
      return bytes;
    }
    case PPROF_NOTHING_TO_RENAME:
      return pprof;
    case PPROF_RENAME_MALFORMED:
      rb_raise(rb_eArgError, "not a gzip'd pprof profile (or larger than 1 GiB once inflated)");
    case PPROF_RENAME_NO_MEMORY:
    default:
      rb_memerror();
  }
  return Qnil; // not reached
}

void pprof_rename_binding_define_methods(VALUE native) {
  rb_define_module_function(native, "rename_label_keys", native_rename_label_keys, -1);
}
