# frozen_string_literal: true

# The peer profilers the benchmark compares Sonde with, beyond StackProf
# (which Debian packages): which gems each needs, pinned to the versions
# found to build and run here, on which Rubies, and where they live. Each
# Ruby gets its own folder, tmp/peers/ruby-<major.minor>, filled by
# install_peers.rb with `gem install --install-dir` (never the system's
# gems), with a status.json saying, per peer, that it loaded or why not.
# Benchmark children load a peer with GEM_HOME and GEM_PATH set to that
# folder only.
require "json"

module SondeBench
  module Peers
    ROOT = File.expand_path("../..", __dir__)
    FOLDER = File.join(ROOT, "tmp", "peers")
    # Downloaded .gem files, shared by every Ruby: the host downloads them,
    # each Ruby installs from here without the network (the 3.3 chroot has
    # no trust store for the registry's certificates).
    CACHE = File.join(FOLDER, "cache")
    STATUS_FILE = "status.json"

    # A gem file to download: name, version, platform (nil: the ruby one).
    Gem = Struct.new(:name, :version, :platform) do
      def file
        platform ? "#{name}-#{version}-#{platform}.gem" : "#{name}-#{version}.gem"
      end
    end

    # A peer: the gem to install (its file) and the gems it pulls in, all
    # pinned; the Rubies it supports; the Ruby code that checks it loaded.
    Peer = Struct.new(:name, :gem, :dependencies, :min_ruby, :load_check, keyword_init: true) do
      def gems
        [gem, *dependencies]
      end

      def supports?(ruby_version)
        ::Gem::Version.new(ruby_version) >= ::Gem::Version.new(min_ruby)
      end
    end

    # Datadog's profiler lives in the `datadog` gem (tracing, AppSec and
    # profiling in one); its native profiler needs the binary libdatadog
    # gem. logger and cgi are default gems on 3.3 but separate gems on 3.1.
    DATADOG = Peer.new(
      name: "datadog",
      gem: Gem.new("datadog", "2.47.0"),
      dependencies: [Gem.new("libdatadog", "46.1.0.1.1", "x86_64-linux"), Gem.new("libddwaf", "1.30.0.1.0", "x86_64-linux"),
                     Gem.new("datadog-ruby_core_source", "3.5.6"), Gem.new("msgpack", "1.8.7"), Gem.new("ffi", "1.17.4"),
                     Gem.new("logger", "1.7.0"), Gem.new("cgi", "0.5.2")],
      min_ruby: "2.5",
      load_check: 'require "datadog"; Datadog::Profiling.supported? or abort(Datadog::Profiling.unsupported_reason); ' \
                  "puts Datadog::VERSION::STRING"
    )
    # Vernier is C++ (g++ in the 3.3 chroot); its gemspec asks for Ruby 3.3+.
    VERNIER = Peer.new(name: "vernier", gem: Gem.new("vernier", "1.12.0"), dependencies: [], min_ruby: "3.3",
                       load_check: 'require "vernier"; puts Vernier::VERSION')
    # pf2 patches the libbacktrace it vendors at build time (`patch` in the
    # chroot); Ruby 3.3+. rake-compiler and the rest are its declared
    # runtime dependencies, so they must be in the folder for it to load.
    PF2 = Peer.new(
      name: "pf2",
      gem: Gem.new("pf2", "0.14.0"),
      dependencies: [Gem.new("rake-compiler", "1.3.0"), Gem.new("rake", "13.3.0"), Gem.new("mini_portile2", "2.8.9"),
                     Gem.new("webrick", "1.9.1"), Gem.new("logger", "1.7.0")],
      min_ruby: "3.3",
      load_check: 'require "pf2"; puts Pf2::VERSION'
    )
    ALL = [DATADOG, VERNIER, PF2].freeze

    module_function

    def find(name)
      ALL.find { |peer| peer.name == name } or raise ArgumentError, "unknown peer #{name.inspect}"
    end

    # "3.1" for Ruby 3.1.2: one folder per minor version (a native
    # extension is built for one).
    def ruby_series(version = RUBY_VERSION)
      version.split(".").first(2).join(".")
    end

    def dir(series)
      File.join(FOLDER, "ruby-#{series}")
    end

    # What install_peers.rb found for each peer on this Ruby:
    # { "datadog" => { "available" => true, "version" => "2.47.0" }, ... }
    # or { "available" => false, "reason" => "..." }. Peers the installer
    # never tried are not available, with that as the reason.
    def status(series)
      path = File.join(dir(series), STATUS_FILE)
      recorded = File.exist?(path) ? JSON.parse(File.read(path)) : {}
      ALL.to_h do |peer|
        found = recorded[peer.name]
        found ||= if peer.supports?(series)
                    { "available" => false, "reason" => "not installed (run `rake bench:peers`)" }
                  else
                    unsupported(peer)
                  end
        [peer.name, found]
      end
    end

    def unsupported(peer)
      { "available" => false, "reason" => "needs Ruby >= #{peer.min_ruby} (its gemspec)" }
    end

    def write_status(series, status)
      File.write(File.join(dir(series), STATUS_FILE), "#{JSON.pretty_generate(status)}\n")
    end

    # The environment a child needs to load the peers of this Ruby, and
    # nothing else from outside the standard library and Debian's packages.
    def env(series)
      { "GEM_HOME" => dir(series), "GEM_PATH" => dir(series) }
    end
  end
end
