# frozen_string_literal: true

require "rbconfig"

module Sonde
  # Which Rubies and platforms the native core can profile, and the file name
  # of the native extension built for this one. extconf.rb requires this file
  # too, so the build and the runtime never disagree about what is supported.
  module Platform
    module_function

    # Backends the native core has, by the VM access they use.
    #   :mjit_header  Ruby 3.1 and 3.2: VM structs from rb_mjit_min_header-<version>.h (vm_ruby31.c)
    #   :public_api   Ruby 3.3 and later: public APIs only (vm_public.c)
    # extconf.rb picks the backend by what this Ruby's headers declare
    # (have_func on PUBLIC_API_FUNCTIONS, else the MJIT header). At run time
    # there are no headers to ask, so this says the same from the version:
    # Ruby 3.3 is the release that added those functions and removed the MJIT
    # header. extconf.rb checks that the two agree and stops the build if not.
    def backend
      return nil unless RUBY_ENGINE == "ruby"

      return :public_api if ruby_at_least?("3.3")
      return :mjit_header if ruby_at_least?("3.1")

      nil
    end

    # Whether RUBY_VERSION is version or later, compared number by number
    # without RubyGems: `ruby --disable-gems` has no Gem::Version.
    def ruby_at_least?(version)
      (RUBY_VERSION.split(".").map(&:to_i) <=> version.split(".").map(&:to_i)) >= 0
    end

    # What vm_public.c calls, and the header that declares each.
    PUBLIC_API_FUNCTIONS = {
      "rb_profile_thread_frames" => "ruby/debug.h",
      "rb_postponed_job_preregister" => "ruby/debug.h",
      "rb_postponed_job_trigger" => "ruby/debug.h",
      "rb_internal_thread_add_event_hook" => "ruby/thread.h",
      "rb_internal_thread_specific_key_create" => "ruby/thread.h",
      "rb_internal_thread_specific_get" => "ruby/thread.h",
    }.freeze

    # nil when this Ruby and platform are supported, else a sentence saying why not.
    # (M:N threads on Ruby 3.3+, RUBY_MN_THREADS=1, are refused when the core
    # loads, as a Sonde::UnsupportedError: see vm_public.c.)
    def unsupported_reason
      unless RUBY_ENGINE == "ruby"
        return "Sonde profiles CRuby (MRI) only; this is #{RUBY_ENGINE} #{RUBY_ENGINE_VERSION}"
      end
      unless RbConfig::CONFIG["host_os"].to_s.include?("linux")
        return "Sonde needs Linux (per-thread CPU clocks, pthread_kill, SIGPROF); this is #{RbConfig::CONFIG["host_os"]}"
      end
      return nil if backend

      "Sonde supports Ruby 3.1 and later; this is Ruby #{RUBY_VERSION}"
    end

    # "3_1_2_x86_64_linux_gnu": carried by the built files' names so that a
    # build for another Ruby or platform is never picked up by mistake.
    def build_suffix
      "#{RUBY_VERSION}_#{RUBY_PLATFORM}".gsub(/[^A-Za-z0-9]/, "_")
    end

    def native_extension_name
      "sonde_native_#{build_suffix}"
    end

    def loader_extension_name
      "sonde_loader_#{build_suffix}"
    end

    # Where `rake compile` (and gem install) put the built extensions.
    def native_dir
      File.expand_path("native", __dir__)
    end

    def native_extension_path
      File.join(native_dir, "#{native_extension_name}.#{RbConfig::CONFIG["DLEXT"]}")
    end

    def loader_extension_path
      File.join(native_dir, "#{loader_extension_name}.#{RbConfig::CONFIG["DLEXT"]}")
    end
  end
end
