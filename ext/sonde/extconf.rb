# frozen_string_literal: true

# Builds Sonde's native core. On a Ruby or platform Sonde cannot profile, the
# install still succeeds: this writes a Makefile that builds nothing, and
# Sonde.supported? then says why (both read lib/sonde/platform.rb).
require "mkmf"
require_relative "../../lib/sonde/platform"

reason = Sonde::Platform.unsupported_reason
if reason
  message = "sonde: the native core is not built: #{reason}"
  warn message
  File.write("Makefile", <<~MAKE)
    all install static install-so install-rb clean distclean:
    \t@echo "#{message.gsub('"', "'")}"
  MAKE
  exit 0
end

$CFLAGS << " -std=gnu11 -fvisibility=hidden -Werror-implicit-function-declaration"
$CFLAGS << " -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers"
$CFLAGS << " -O2 -g"

abort "sonde: zlib.h not found; install zlib1g-dev (Debian) or zlib-devel" unless have_header("zlib.h")
abort "sonde: libz not found; install zlib1g-dev (Debian) or zlib-devel" unless have_library("z", "deflateInit2_")
have_library("pthread")
have_library("dl")
have_library("m", "log") # the allocation sampler's random gaps
# Per-thread CPU timers (timer_create with SIGEV_THREAD_ID): in libc since
# glibc 2.34, in librt before.
have_library("rt", "timer_create") unless have_func("timer_create", "time.h")
abort "sonde: timer_create is needed for per-thread CPU timers" unless have_func("timer_create", "time.h")

# Bind every symbol at load, not at first call: the SIGPROF handler calls
# into libruby and libc, and a lazy binding would run the dynamic linker's
# resolver inside it.
$LDFLAGS << " -Wl,-z,now"

common = %w[sonde.c run.c profiler.c testing.c clocks.c signals.c signal_sampler.c capture_buffer.c
            scheduler.c idle_helper.c cpu_timers.c cpu_timer_source.c gc_source.c own_threads.c
            sampling_pass.c thread_contexts.c thread_states.c stacks.c recorder.c recorder_slots.c
            pprof_wire.c pprof_builder.c pprof_rename.c pprof_rename_binding.c profile_export.c pacing.c labels.c
            alloc_source.c heap_tracker.c current_ids.c ractor_accounting.c stats.c exit_cpu.c trigger_park.c
            timeline_log.c duration_histogram.c utf8_text.c]

# The VM backend is picked by what this Ruby's headers declare, not by its
# version: the public APIs when every function vm_public.c calls is there,
# else the MJIT header. Sonde::Platform.backend says the same from the
# version at run time; a Ruby where the two disagree stops here, loudly,
# rather than build a core the runtime would describe wrongly.
def first_missing_public_function
  Sonde::Platform::PUBLIC_API_FUNCTIONS.each { |name, header| return [name, header] unless have_func(name, header) }
  nil
end

missing_name, missing_header = first_missing_public_function
backend = missing_name ? :mjit_header : :public_api
unless backend == Sonde::Platform.backend
  abort "sonde: the headers of Ruby #{RUBY_VERSION} call for the #{backend} backend, but Sonde::Platform.backend " \
        "expects #{Sonde::Platform.backend.inspect}" +
        (missing_name ? " (#{missing_name} is not declared in #{missing_header}; are Ruby's development headers installed?)" : "")
end

vm_sources =
  case backend
  when :public_api
    %w[vm_public.c]
  when :mjit_header
    header = File.join(RbConfig::CONFIG["rubyarchhdrdir"], "rb_mjit_min_header-#{RUBY_VERSION}.h")
    abort "sonde: #{header} is missing; install Ruby's development headers (ruby-dev)" unless File.exist?(header)
    $defs << %(-DSONDE_MJIT_HEADER='"#{header}"')
    %w[vm_ruby31.c block_methods.c]
  end

# Whether an object is alive (the live heap's check, vm_object_live): 3.4
# exports rb_objspace_garbage_object_p, earlier Rubies
# rb_objspace_markable_object_p; neither is declared in a public header.
if backend == :public_api && !have_func("rb_objspace_garbage_object_p") && !have_func("rb_objspace_markable_object_p")
  abort "sonde: this Ruby exports neither rb_objspace_garbage_object_p nor rb_objspace_markable_object_p"
end

$srcs = common + vm_sources
$objs = $srcs.map { |src| src.sub(/\.c\z/, ".o") }

create_makefile("sonde/native/#{Sonde::Platform.native_extension_name}")

# The MJIT header is Ruby's own internal header: large and noisy under our
# warning flags. Quiet it for the one file that includes it, nowhere else.
File.open("Makefile", "a") do |make|
  make.puts "vm_ruby31.o: CFLAGS += -Wno-unused-function -Wno-sign-compare -Wno-unused-variable " \
            "-Wno-implicit-fallthrough -Wno-attributes -Wno-cast-function-type"
end
