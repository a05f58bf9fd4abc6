# frozen_string_literal: true

# What always-on mode does to a process's memory over many flushes, beside
# the same process without Sonde: two children run side by side on each
# Ruby, one in continuous mode at 100 Hz flushing every EVERY seconds to a
# directory (keeping 5 files), one without Sonde, for SECONDS. Each has two
# threads that build strings and sleep. Every REPORT seconds each prints
# its RSS, Ruby's heap pages and live slots, and its flushes so far; the
# tables put them side by side. A process that leaks grows for as long as
# it runs; one whose heap and malloc arenas grow to what a flush needs at
# its peak levels off.
#
#   ruby bench/flush_memory.rb [SECONDS] [EVERY]    (rake bench:flush_memory; SECONDS=600, EVERY=1)
#   SONDE_BENCH_RUBIES=3.4 ruby bench/flush_memory.rb
#
# Prints markdown; rake bench:flush_memory writes it to
# bench/FLUSH_MEMORY_RESULTS.md.
require "json"
require "tmpdir"
require_relative "support/rubies"
require_relative "support/side_by_side"

module SondeBench
  class FlushMemory
    include SideBySide

    REPORT_EVERY_S = 30
    CHILD = <<~'RUBY'
      require "json"
      dir, seconds, every, with_sonde, report_every = ARGV
      seconds, every, report_every = Float(seconds), Integer(every), Float(report_every)
      if with_sonde == "1"
        require "sonde"
        Sonde.start(rate: 100, continuous: true, every: every, export: "dir:#{dir}?keep=5")
      end
      stop = false
      workers = Array.new(2) do |k|
        Thread.new do
          until stop
            text = +""
            2_000.times { |j| text << (j * k).to_s }
            sleep 0.005
          end
        end
      end
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      reported = 0.0
      loop do
        sleep 1
        elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
        next unless elapsed - reported >= report_every || elapsed >= seconds

        reported = elapsed
        gc = GC.stat
        puts JSON.generate(s: elapsed.round, rss_kb: File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i,
                           pages: gc[:heap_allocated_pages], live: gc[:heap_live_slots],
                           flushes: with_sonde == "1" ? Sonde.stats[:flushes] : 0)
        $stdout.flush
        break if elapsed >= seconds
      end
      stop = true
      workers.each(&:join)
    RUBY

    def initialize(seconds:, every:, rubies:)
      @seconds = seconds
      @every = every
      @rubies = rubies
    end

    def run
      puts "# Memory over many flushes", ""
      puts "Written by `rake bench:flush_memory` (bench/flush_memory.rb) on " \
           "#{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC, Sonde at commit #{commit}.", ""
      Dir.mktmpdir("sonde-flush-memory", File.join(Peers::ROOT, "tmp")) do |dir|
        script = File.join(dir, "child.rb")
        File.write(script, CHILD)
        @rubies.each { |ruby| report(ruby, side_by_side(ruby, dir, script)) }
      end
    end

    private

    # Both children at once, so that they share the machine's moments.
    def side_by_side(ruby, dir, script)
      children = { "Sonde" => "1", "none" => "0" }.to_h do |name, with_sonde|
        env, command = ruby.command({})
        out = File.join(dir, "#{ruby.series}-#{name}")
        args = [script, File.join(dir, "profiles-#{ruby.series}"), @seconds.to_s, @every.to_s, with_sonde,
                REPORT_EVERY_S.to_s]
        pid = spawn(env, *command, "-I", File.join(Peers::ROOT, "lib"), *args, out: out, err: %i[child out],
                                                                                chdir: Peers::ROOT)
        [name, [pid, out]]
      end
      children.transform_values do |pid, out|
        Process.wait(pid)
        raise "flush_memory child on #{ruby.name} failed:\n#{File.read(out)}" unless $?.success?

        File.readlines(out).filter_map { |line| JSON.parse(line) if line.start_with?("{") }
      end
    end

    def report(ruby, rows)
      puts "## #{ruby.name}: #{ruby.description}", ""
      puts "100 Hz, a flush every #{@every} s to dir: (keep=5), #{@seconds} s; two threads building strings " \
           "and sleeping."
      puts "", "| s | flushes | Sonde: RSS (MB) | heap pages | none: RSS (MB) | heap pages |", "|---|---|---|---|---|---|"
      rows.fetch("Sonde").zip(rows.fetch("none")).each do |sonde, none|
        next unless none

        puts format("| %d | %d | %.1f | %d | %.1f | %d |", sonde.fetch("s"), sonde.fetch("flushes"),
                    sonde.fetch("rss_kb") / 1024.0, sonde.fetch("pages"), none.fetch("rss_kb") / 1024.0,
                    none.fetch("pages"))
      end
      puts
    end
  end
end

if $PROGRAM_NAME == __FILE__
  seconds = Integer(ARGV.fetch(0, "600"))
  every = Integer(ARGV.fetch(1, "1"))
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", "host,3.4").sub("host", SondeBench::Peers.ruby_series))
  missing = rubies.reject(&:available?)
  abort missing.map(&:reason).join("\n") unless missing.empty?
  SondeBench::FlushMemory.new(seconds: seconds, every: every, rubies: rubies).run
end
