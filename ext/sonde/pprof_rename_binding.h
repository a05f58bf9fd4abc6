// pprof_rename_binding.h: Native.rename_label_keys (see the .c file).
#ifndef SONDE_PPROF_RENAME_BINDING_H
#define SONDE_PPROF_RENAME_BINDING_H

#include <ruby.h>

// At load, with the GVL: defines Native.rename_label_keys.
void pprof_rename_binding_define_methods(VALUE native);

#endif
