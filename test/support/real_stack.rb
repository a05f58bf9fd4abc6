# frozen_string_literal: true

require "digest"
require "fileutils"
require "open3"
require "rbconfig"
require_relative "../apps/shop/config/gems"

# The gems of the real-stack tests' app (test/apps/shop), pinned in
# test/apps/shop/gems/, kept outside the work tree so that a fresh clone (CI)
# reuses them:
#
#   CACHE/downloads/NAME-VERSION[-PLATFORM].gem       fetched on the host (fetch!)
#   CACHE/ruby-<RUBY_VERSION>-<hash of the list>/       installed by each Ruby (install!)
#
# CACHE is SONDE_REAL_STACK_CACHE or /var/cache/sonde/real-stack; script/ruby
# bind-mounts it into the chroots at the same path, which cannot reach
# RubyGems: they install from the downloads the host fetched, and compile
# the native gems (puma, nio4r, bigdecimal...) themselves. A new list (other
# pins) is a new folder; the old one stays until removed by hand.
module RealStack
  CACHE = ENV.fetch("SONDE_REAL_STACK_CACHE", "/var/cache/sonde/real-stack")
  DOWNLOADS = File.join(CACHE, "downloads")

  module_function

  def pins
    ShopGems.pins
  end

  # The folder this Ruby's gems go to: a different Ruby or list, a different folder.
  def gem_home
    key = Digest::SHA256.hexdigest([RUBY_VERSION, RbConfig::CONFIG["arch"], File.read(ShopGems.list_path)].join("\n"))
    File.join(CACHE, "ruby-#{RUBY_VERSION}-#{key[0, 12]}")
  end

  def installed?
    File.exist?(File.join(gem_home, ".complete"))
  end

  def missing_downloads
    pins.map { |pin| File.join(DOWNLOADS, pin.file_name) }.reject { |file| File.exist?(file) }
  end

  # Downloads every list's gems (all Rubies') that are not there yet, each
  # pinned file by its name from the host's gem source (RubyGems), through
  # RubyGems' own fetcher: `gem fetch` would read the whole index once per gem.
  def fetch!(out: $stderr)
    require "rubygems/remote_fetcher"
    require "rubygems/package"
    FileUtils.mkdir_p(DOWNLOADS)
    source = Gem.sources.first.uri.to_s.chomp("/")
    ShopGems.all_pins.each do |pin|
      target = File.join(DOWNLOADS, pin.file_name)
      next if File.exist?(target)

      begin
        bytes = Gem::RemoteFetcher.fetcher.fetch_path("#{source}/gems/#{pin.file_name}")
      rescue Gem::RemoteFetcher::FetchError => e
        raise "could not download #{pin.file_name} from #{source}: #{e.message}"
      end
      File.binwrite("#{target}.#{Process.pid}.tmp", bytes)
      # The file must be the gem it is named after before it counts.
      spec = Gem::Package.new("#{target}.#{Process.pid}.tmp").spec
      unless [spec.name, spec.version.to_s, spec.platform] == [pin.name, pin.version, Gem::Platform.new(pin.platform || "ruby")]
        raise "#{pin.file_name} from #{source} holds #{spec.full_name}"
      end

      File.rename("#{target}.#{Process.pid}.tmp", target)
      out.puts "real-stack: fetched #{pin.file_name}"
    end
  end

  # Installs this Ruby's list into gem_home from the downloads, once (a lock
  # serializes two runs; a half-done install never looks complete: it is
  # built under another name and renamed). Returns gem_home.
  def install!(out: $stderr)
    return gem_home if installed?

    FileUtils.mkdir_p(CACHE)
    File.open(File.join(CACHE, ".lock"), File::RDWR | File::CREAT) do |lock|
      lock.flock(File::LOCK_EX)
      return gem_home if installed?

      missing = missing_downloads
      raise "not downloaded (script/setup fetches them on the host): #{missing.map { |f| File.basename(f) }.join(", ")}" unless missing.empty?

      build(out)
    end
    gem_home
  end

  def build(out)
    partial = "#{gem_home}.partial"
    FileUtils.rm_rf(partial)
    FileUtils.mkdir_p(partial)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    env = { "GEM_HOME" => partial, "GEM_PATH" => partial, "RUBYOPT" => nil }
    files = pins.map { |pin| File.join(DOWNLOADS, pin.file_name) }
    # Every file is named, so the dependencies are the list's own; the
    # check after it proves that the list is whole.
    log, status = Open3.capture2e(env, RbConfig.ruby, "-S", "gem", "install", "--local", "--no-document",
                                  "--ignore-dependencies", "--install-dir", partial, *files)
    raise "gem install into #{partial} failed:\n#{log}" unless status.success?

    check, status = Open3.capture2e(env, RbConfig.ruby, "-e", <<~RUBY)
      missing = Gem::Specification.reject(&:default_gem?).flat_map do |spec|
        spec.runtime_dependencies.reject { |dep| dep.matching_specs(true).any? }.map { |dep| "\#{spec.full_name} needs \#{dep}" }
      end
      abort missing.join("\\n") unless missing.empty?
    RUBY
    raise "the pinned list #{ShopGems.list_path} is not whole on Ruby #{RUBY_VERSION}:\n#{check}" unless status.success?

    File.write(File.join(partial, ".complete"), "#{pins.size} gems\n")
    FileUtils.rm_rf(gem_home)
    File.rename(partial, gem_home)
    seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    out.puts format("real-stack: installed %d gems for Ruby %s into %s in %.0f s", pins.size, RUBY_VERSION, gem_home, seconds)
  end

  # Why the real-stack tests cannot run here, or nil when they can.
  def unavailable_reason
    return "redis-server is not installed (script/setup installs Debian's)" unless system("command -v redis-server > /dev/null 2>&1")
    return nil if installed?

    missing = missing_downloads
    return "the real stack's gems are not in #{DOWNLOADS} (script/setup fetches them): #{missing.size} missing" unless missing.empty?

    nil
  end
end
