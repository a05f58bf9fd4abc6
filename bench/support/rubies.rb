# frozen_string_literal: true

# The Rubies a benchmark child can run on: this machine's own (Debian 12's
# 3.1), and Ruby 3.3 and 3.4 inside the Debian chroots of script/ruby, where
# the project is mounted at the same path (so the runner's files under
# tmp/ are seen by both). The peers that need Ruby 3.3 (Vernier, pf2), and
# Sonde's 3.3 backend, are measured there; each row of the report says which
# Ruby it is. SONDE_BENCH_RUBIES (settings.rb) picks them.
require "open3"
require "rbconfig"
require_relative "peers"

module SondeBench
  SCRIPT_RUBY = File.join(Peers::ROOT, "script", "ruby")
  # The series script/ruby runs in its chroots.
  CHROOT_SERIES = %w[3.3 3.4].freeze

  # series: "3.1"; description: RUBY_DESCRIPTION there, or nil with reason
  # when that Ruby cannot be run here.
  RubyTarget = Struct.new(:series, :host, :description, :reason, keyword_init: true) do
    def self.host
      new(series: Peers.ruby_series, host: true, description: RUBY_DESCRIPTION)
    end

    # Ruby 3.3 or 3.4 through script/ruby (the chroot is built on first use).
    def self.chroot(series)
      out, status = Open3.capture2e(SCRIPT_RUBY, series, "ruby", "-e", "print RUBY_DESCRIPTION")
      return new(series: series, host: false, description: out.lines.last.strip) if status.success?

      new(series: series, host: false, reason: "script/ruby #{series} failed: #{out.lines.last(3).join.strip}")
    end

    # The targets named in a list like "3.1,3.3" (this Ruby's series is the host).
    def self.for(list)
      list.split(",").map(&:strip).uniq.map do |series|
        if series == Peers.ruby_series
          host
        elsif CHROOT_SERIES.include?(series)
          chroot(series)
        else
          new(series: series, host: false,
              reason: "no Ruby #{series} here (the host has #{Peers.ruby_series}, script/ruby #{CHROOT_SERIES.join(" and ")})")
        end
      end
    end

    def available?
      reason.nil?
    end

    def name
      "Ruby #{series}"
    end

    # [env for Process.spawn, command prefix]: how to run `ruby ARGS` here
    # with env. script/ruby passes only some variables into the chroot,
    # so there env(1) sets them inside.
    def command(env)
      return [env, [RbConfig.ruby]] if host

      [{}, [SCRIPT_RUBY, series, "env", *env.map { |key, value| "#{key}=#{value}" }, "ruby"]]
    end

    # What a child needs to load this Ruby's peers (nothing for Sonde,
    # StackProf or no profiler, so those run as they always did).
    def peer_env(profiler)
      Peers::ALL.any? { |peer| peer.name == profiler } ? Peers.env(series) : {}
    end

    def peer_status
      Peers.status(series)
    end

    # Why profiler (a profiler hook name) cannot run on this Ruby, or nil
    # when it can: a peer install_peers.rb did not install here (its
    # reason), or Sonde (from lib) or StackProf (Debian's) not loading.
    def unavailable_reason(profiler, lib)
      status = peer_status[profiler]
      return status["available"] ? nil : status["reason"] if status
      return nil if profiler == "none"

      env, ruby = command({})
      library = profiler.split("-").first
      output, loaded = Open3.capture2e(env, *ruby, "-I", lib, "-e", "require #{library.dump}", chdir: Peers::ROOT)
      loaded.success? ? nil : "does not load: #{output.lines.first.to_s.strip}"
    end
  end
end
