/*
 * sonde_loader.c: the small extension that loads Sonde's native core.
 *
 * Why a loader at all, instead of letting `require` open the core:
 *
 * - Symbol clashes. `require` opens extensions so that their symbols are
 *   visible to everything loaded afterwards, and a symbol reference is
 *   resolved against the global scope first. Two extensions that each carry
 *   a helper of the same name (a bundled protobuf encoder, say) then silently
 *   call each other's copy. The core is opened here with RTLD_LOCAL, so its
 *   symbols stay private, and RTLD_DEEPBIND, so its own references bind to
 *   its own definitions before anyone else's.
 *
 * - The wrong Ruby. The core reads VM structs whose layout belongs to one
 *   Ruby build. A core built against another libruby (a gem directory shared
 *   between two Rubies, a stale build) would load without complaint and then
 *   read garbage. The core exports a marker function that returns the address
 *   of rb_cObject as the core sees it; when it differs from the address this
 *   loader sees, the two are bound to different libruby images, and the core
 *   is closed again before any of its code has run.
 *
 * Every failure is returned to Ruby as data ([reason, message]); lib/sonde/
 * native.rb turns it into a Sonde::LoadError. Nothing here aborts the
 * process. A core whose init has been called is never closed: its methods
 * are defined on a live module, and unmapping their code would crash the
 * next call.
 */

/* RTLD_DEEPBIND and dladdr are GNU extensions; Ruby's config.h defines the
 * same macro with the same value, so the two definitions agree. */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include <ruby.h>
#include <ruby/version.h>

/* extconf.rb names the init function after the built file, which carries
 * the Ruby version and platform; Ruby looks the function up by that name. */
#ifndef SONDE_LOADER_INIT
#error "SONDE_LOADER_INIT must name the init function; build with ext/sonde_loader/extconf.rb"
#endif

/* The two entry points of the core; see lib/sonde/native.rb for the contract. */
#define MARKER_SYMBOL "sonde_native_libruby_marker"
#define INIT_SYMBOL "sonde_native_init"

#define DLOPEN_FLAGS (RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND)

/* dlerror's text lives in libdl's storage until the next dl call, so it is
 * copied out before anything else runs. Longer texts are cut, not lost. */
#define DLERROR_CAPACITY 1024

/* Room for the name of the file an address belongs to. */
#define LIBRARY_NAME_CAPACITY PATH_MAX

typedef const void *marker_fn(void);
typedef void init_fn(VALUE native_module);

/* Copies the last dl error into buf; the text is never empty. */
static void copy_dlerror(char *buf, size_t size) {
    const char *text = dlerror();
    snprintf(buf, size, "%s", text ? text : "unknown dynamic loader error");
}

/* Writes the file that contains addr into buf, or a placeholder when no
 * loaded object contains it. Must run before the object is closed, since
 * dladdr's answer points into the object's own bookkeeping. */
static void name_library_of(const void *addr, char *buf, size_t size) {
    Dl_info info;
    if (dladdr(addr, &info) != 0 && info.dli_fname && info.dli_fname[0] != '\0') {
        snprintf(buf, size, "%s", info.dli_fname);
    } else {
        snprintf(buf, size, "no loaded library");
    }
}

static VALUE failure(const char *reason, VALUE message) {
    return rb_ary_new_from_args(2, ID2SYM(rb_intern(reason)), message);
}

/* POSIX guarantees that a dlsym result converts to a function pointer; ISO C
 * does not, hence the casts are kept in these two helpers. */
static marker_fn *find_marker(void *handle) {
    return (marker_fn *)dlsym(handle, MARKER_SYMBOL);
}

static init_fn *find_init(void *handle) {
    return (init_fn *)dlsym(handle, INIT_SYMBOL);
}

/*
 * Sonde::NativeLoader.load_library(path, native_module) -> nil or [reason, message]
 *
 * Opens the core at path, checks that it is bound to this process's libruby,
 * and calls its init with native_module. Returns nil once init has returned;
 * the library then stays open for the life of the process. Returns
 * [:dlopen_failed | :wrong_ruby | :missing_init, message] and leaves nothing
 * open when the core cannot be used. Raises TypeError for arguments of the
 * wrong type (before opening anything), and lets an exception from the
 * core's init propagate (the core stays open: it may have defined methods).
 */
static VALUE load_library(VALUE self, VALUE path, VALUE native_module) {
    (void)self;

    /* Everything that can raise is done before dlopen, so that no exception
     * can leave a half-checked library open. */
    path = rb_get_path(path);
    const char *c_path = StringValueCStr(path);
    if (!RB_TYPE_P(native_module, T_MODULE) && !RB_TYPE_P(native_module, T_CLASS)) {
        rb_raise(rb_eTypeError, "native_module must be a Module, not %" PRIsVALUE,
                 rb_obj_class(native_module));
    }

    /* Clear any error left by someone else, so the one read below is ours. */
    dlerror();
    void *handle = dlopen(c_path, DLOPEN_FLAGS);
    if (!handle) {
        char error[DLERROR_CAPACITY];
        copy_dlerror(error, sizeof error);
        return failure("dlopen_failed",
                       rb_sprintf("Could not load Sonde's native core %" PRIsVALUE ": %s.", path,
                                  error));
    }

    marker_fn *marker = find_marker(handle);
    if (!marker) {
        dlclose(handle);
        return failure("wrong_ruby",
                       rb_sprintf("%" PRIsVALUE " does not export " MARKER_SYMBOL
                                  ", so it cannot be shown to match this Ruby (%s); it was not "
                                  "built as Sonde's native core for this Ruby. Rebuild it with "
                                  "`rake compile` or reinstall the gem.",
                                  path, ruby_description));
    }

    const void *core_sees = marker();
    const void *loader_sees = (const void *)&rb_cObject;
    if (core_sees != loader_sees) {
        char core_library[LIBRARY_NAME_CAPACITY];
        char loader_library[LIBRARY_NAME_CAPACITY];
        name_library_of(core_sees, core_library, sizeof core_library);
        name_library_of(loader_sees, loader_library, sizeof loader_library);
        dlclose(handle);
        return failure(
            "wrong_ruby",
            rb_sprintf("%" PRIsVALUE " was built for a different Ruby: it sees rb_cObject at %p "
                       "(in %s), but this Ruby (%s) has it at %p (in %s). Rebuild it with "
                       "`rake compile` or reinstall the gem for this Ruby.",
                       path, core_sees, core_library, ruby_description, loader_sees,
                       loader_library));
    }

    init_fn *init = find_init(handle);
    if (!init) {
        dlclose(handle);
        return failure("missing_init",
                       rb_sprintf("%" PRIsVALUE " matches this Ruby but does not export " INIT_SYMBOL
                                  ", so it is not a usable Sonde native core. Rebuild it with "
                                  "`rake compile` or reinstall the gem.",
                                  path));
    }

    init(native_module);
    RB_GC_GUARD(path);
    return Qnil;
}

RUBY_FUNC_EXPORTED void SONDE_LOADER_INIT(void);

void SONDE_LOADER_INIT(void) {
    VALUE sonde = rb_define_module("Sonde");
    VALUE loader = rb_define_module_under(sonde, "NativeLoader");
    rb_define_module_function(loader, "load_library", load_library, 2);
}
