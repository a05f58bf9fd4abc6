# frozen_string_literal: true

# Installs the benchmark's peer profilers (peers.rb) into folders of the
# benchmark's own, one per Ruby: `rake bench:peers`, or
#
#   ruby bench/support/install_peers.rb                # this Ruby, then Ruby 3.3 through script/ruby33
#   ruby bench/support/install_peers.rb --rubies 3.1   # only some
#   ruby bench/support/install_peers.rb --rubies 3.3 --peers vernier   # one peer (CI: the Firefox export's check)
#
# Idempotent: a peer whose folder already loads is left alone. Two steps,
# because the 3.3 chroot cannot reach the registry (it does not trust the
# certificates the host does): this Ruby downloads every pinned .gem file
# into tmp/peers/cache (`gem fetch`), then each Ruby installs from there
# with `gem install --local --install-dir`, GEM_HOME and GEM_PATH set to its
# folder so that every dependency lands in it too, builds the native parts,
# and checks the peer loads. What happened to each peer is written to the
# folder's status.json (the benchmark reads it) and printed: installed,
# already there, or not available and why (download, build or load
# failure, with the log's path, or a Ruby the gem does not support).
# Exits 0 even when a peer could not be installed: the benchmark reports
# it as not available.
require "fileutils"
require "open3"
require "optparse"
require "rbconfig"
require_relative "peers"

module SondeBench
  module InstallPeers
    RUBY33 = File.join(Peers::ROOT, "script", "ruby33")
    HOST_ONLY_FLAG = "--this-ruby-only"
    # Lines of a failed command's output worth quoting as the reason.
    ERROR_LINE = /ERROR|error:|Error|cannot|not found|failed/.freeze

    module_function

    def main(argv)
      rubies = nil
      this_ruby_only = false
      names = nil
      OptionParser.new do |options|
        options.banner = "usage: ruby bench/support/install_peers.rb [--rubies 3.1,3.3]"
        options.on("--rubies LIST", "Ruby series to install for (default: this one and 3.3)") do |list|
          rubies = list.split(",")
        end
        options.on(HOST_ONLY_FLAG, "install for this Ruby from the cache, download nothing") { this_ruby_only = true }
        options.on("--peers LIST", "only these peers (#{Peers::ALL.map(&:name).join(", ")}; default: all)") do |list|
          names = list.split(",")
        end
      end.parse!(argv)
      @peers = select_peers(names)
      return install_here if this_ruby_only

      rubies ||= [Peers.ruby_series, "3.3"].uniq
      download_failures = download
      rubies.each do |series|
        if series == Peers.ruby_series
          install_here(download_failures)
        else
          install_elsewhere(series)
        end
      end
    end

    # The peers named (all when nil); an unknown name is an error that
    # lists the known ones.
    def select_peers(names)
      return Peers::ALL if names.nil?

      unknown = names - Peers::ALL.map(&:name)
      abort "install_peers: unknown peer #{unknown.join(", ")} (known: #{Peers::ALL.map(&:name).join(", ")})" unless unknown.empty?
      Peers::ALL.select { |peer| names.include?(peer.name) }
    end

    def peers
      @peers || Peers::ALL
    end

    # Downloads every pinned gem missing from the cache. Returns
    # { gem file => reason } for those that could not be had.
    def download
      FileUtils.mkdir_p(Peers::CACHE)
      failures = {}
      peers.flat_map(&:gems).uniq.each do |gem|
        next if File.exist?(File.join(Peers::CACHE, gem.file))

        # Without --platform, gem fetch picks a binary build where one exists.
        command = ["gem", "fetch", gem.name, "-v", gem.version, "--platform", gem.platform || "ruby"]
        output, status = Open3.capture2e(*command, chdir: Peers::CACHE)
        next if status.success? && File.exist?(File.join(Peers::CACHE, gem.file))

        failures[gem.file] = "download of #{gem.file} failed: #{reason_from(output)}"
      end
      failures.each_value { |reason| say(reason) }
      failures
    end

    # Another Ruby: only 3.3 is reachable, through script/ruby33 (same
    # paths inside the chroot).
    def install_elsewhere(series)
      unless series == "3.3"
        say("Ruby #{series}: no way to run it here (this Ruby is #{Peers.ruby_series}; script/ruby33 gives 3.3)")
        return
      end

      _output, status = Open3.capture2e(RUBY33, "true")
      unless status.success?
        say("Ruby 3.3: script/ruby33 does not run here; its peers are not installed")
        return
      end
      system(RUBY33, "ruby", __FILE__, HOST_ONLY_FLAG, "--peers", peers.map(&:name).join(",")) or
        say("Ruby 3.3: the installer failed (#{$?})")
    end

    def install_here(download_failures = {})
      series = Peers.ruby_series
      dir = Peers.dir(series)
      FileUtils.mkdir_p(File.join(dir, "logs"))
      previous = Peers.status(series)
      status = previous.merge(peers.to_h do |peer|
        [peer.name, install_peer(peer, series, dir, previous[peer.name], download_failures)]
      end)
      Peers.write_status(series, status)
      status.each do |name, result|
        say("Ruby #{RUBY_VERSION}: #{name}: #{result["available"] ? "#{result["note"]} #{result["version"]}" : "not available: #{result["reason"]}"}")
      end
    end

    def install_peer(peer, series, dir, previous, download_failures)
      return Peers.unsupported(peer) unless peer.supports?(series)

      if previous["available"]
        version = load_check(peer, series)
        return previous.merge("note" => "already installed") if version.is_a?(String)
      end
      missing = peer.gems.find { |gem| !File.exist?(File.join(Peers::CACHE, gem.file)) }
      if missing
        return { "available" => false,
                 "reason" => download_failures.fetch(missing.file, "#{missing.file} is not in #{Peers::CACHE}") }
      end

      log = File.join(dir, "logs", "#{peer.name}.log")
      command = ["gem", "install", "--local", "--no-document", "--install-dir", dir, "./#{peer.gem.file}"]
      output, install_status = Open3.capture2e(Peers.env(series), *command, chdir: Peers::CACHE)
      File.write(log, output)
      unless install_status.success?
        return { "available" => false, "reason" => "gem install failed: #{reason_from(output)} (log: #{relative(log)})" }
      end

      version = load_check(peer, series)
      return { "available" => false, "reason" => "installed but does not load: #{version.fetch(:error)}" } if version.is_a?(Hash)

      { "available" => true, "version" => version, "note" => "installed" }
    end

    # The peer's version (a String) when it loads from its folder alone,
    # else { error: "..." }.
    def load_check(peer, series)
      stdout, stderr, status = Open3.capture3(Peers.env(series), RbConfig.ruby, "-e", peer.load_check)
      return stdout.lines.last.to_s.strip if status.success?

      { error: reason_from(stderr.empty? ? stdout : stderr) }
    end

    def reason_from(output)
      lines = output.lines.map(&:strip).reject(&:empty?)
      (lines.grep(ERROR_LINE).first || lines.last || "no output").slice(0, 300)
    end

    def relative(path)
      path.delete_prefix("#{Peers::ROOT}/")
    end

    def say(message)
      puts "install_peers: #{message}"
    end
  end
end

SondeBench::InstallPeers.main(ARGV) if $PROGRAM_NAME == __FILE__
