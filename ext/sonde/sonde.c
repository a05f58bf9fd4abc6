// sonde.c: the entry of the native core. The loader (ext/sonde_loader)
// dlopens this library, checks sonde_native_libruby_marker against its own
// libruby, then calls sonde_native_init. These two are the only symbols the
// library exports (everything else is hidden by -fvisibility=hidden).
#include <ruby.h>

#include "current_ids.h"
#include "labels.h"
#include "own_threads.h"
#include "pprof_rename_binding.h"
#include "profiler.h"
#include "sampling_pass.h"
#include "vm.h"

__attribute__((visibility("default"))) const void *sonde_native_libruby_marker(void) { return &rb_cObject; }

__attribute__((visibility("default"))) void sonde_native_init(VALUE native_module) {
  current_ids_init(); // first: its atfork handler must run before the others in a child
  vm_init();
  sampling_pass_prepare_job();
  own_threads_install_thread_list_filter();
  profiler_define_methods(native_module);
  labels_define_methods(native_module);
  pprof_rename_binding_define_methods(native_module);
  testing_define_methods(native_module);
}
