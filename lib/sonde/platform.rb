# frozen_string_literal: true

require "rbconfig"

module Sonde
  # Which Rubies and platforms the native core can profile, and the file name
  # of the native extension built for this one. extconf.rb requires this file
  # too, so the build and the runtime never disagree about what is supported.
  module Platform
    module_function

    # Backends the native core has, by the VM access they use.
    #   :mjit_header  Ruby 3.1 and 3.2: VM structs from rb_mjit_min_header-<version>.h
    def backend
      return nil unless RUBY_ENGINE == "ruby"

      version = Gem::Version.new(RUBY_VERSION)
      return :mjit_header if version >= Gem::Version.new("3.1") && version < Gem::Version.new("3.3")

      nil
    end

    # nil when this Ruby and platform are supported, else a sentence saying why not.
    def unsupported_reason
      unless RUBY_ENGINE == "ruby"
        return "Sonde profiles CRuby (MRI) only; this is #{RUBY_ENGINE} #{RUBY_ENGINE_VERSION}"
      end
      unless RbConfig::CONFIG["host_os"].to_s.include?("linux")
        return "Sonde needs Linux (per-thread CPU clocks, pthread_kill, SIGPROF); this is #{RbConfig::CONFIG["host_os"]}"
      end
      return nil if backend

      "Sonde supports Ruby 3.1 and 3.2; this is Ruby #{RUBY_VERSION}"
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
