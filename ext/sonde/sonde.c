// sonde.c: the entry of the native core. The loader (ext/sonde_loader)
// dlopens this library, checks sonde_native_libruby_marker against its own
// libruby, then calls sonde_native_init. These two are the only symbols the
// library exports (everything else is hidden by -fvisibility=hidden).
#include <ruby.h>

#include "profiler.h"
#include "vm.h"
#include "worker.h"

__attribute__((visibility("default"))) const void *sonde_native_libruby_marker(void) { return &rb_cObject; }

__attribute__((visibility("default"))) void sonde_native_init(VALUE native_module) {
  vm_init();
  worker_init_once();
  profiler_define_methods(native_module);
}
