# frozen_string_literal: true

# A profile of the profiler: runs the cpu workload under Sonde at 1000 Hz
# inside `perf record` (CPU clock, DWARF call stacks) and finds where
# Sonde's own time goes. A perf sample is Sonde's cost when Sonde's native
# code is on its stack or it ran on one of Sonde's threads; its leaf
# function (in Sonde, libruby, libc or the kernel) gets the self time, and
# each Sonde function on the stack the inclusive time. Tells the next
# optimisation where to aim.
require "open3"

module SondeBench
  module SelfProfile
    PERF_FREQUENCY_HZ = 5000
    # Large enough that the mmap records of Sonde's library are not lost
    # among the DWARF stacks (they are written while it is dlopen'ed).
    PERF_BUFFER_PAGES = 4096
    DWARF_STACK_BYTES = 4096
    SONDE_LIBRARY = /sonde_native/.freeze
    SONDE_THREAD = /\Asonde-/.freeze
    TOP = 5
    # A sample's first line: the thread's name (spaces allowed), then its
    # thread id, or pid/tid.
    SAMPLE_HEADER = %r{\A(.*?)\s+(?:(\d+)/)?(\d+)\z}.freeze

    Result = Struct.new(:available, :reason, :samples, :sonde_samples, :self_top, :inclusive_top, :command,
                        keyword_init: true)

    module_function

    def available?
      _out, _err, status = Open3.capture3("perf", "--version")
      status.success?
    rescue SystemCallError
      false
    end

    # Runs the profile; returns a Result (available: false with a reason when
    # perf is missing or cannot record here).
    def run(child, scale:, dir:)
      return Result.new(available: false, reason: "perf is not installed") unless available?

      data = File.join(dir, "self_profile.perf.data")
      perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", PERF_FREQUENCY_HZ.to_s, "-m",
              PERF_BUFFER_PAGES.to_s, "--call-graph", "dwarf,#{DWARF_STACK_BYTES}", "-o", data, "--"]
      child.run("cpu", profiler: "sonde", rate: 1000, scale: scale, prefix: perf)
      script, err, status = Open3.capture3("perf", "script", "-i", data, "--no-inline", "-F", "comm,tid,ip,sym,dso")
      return Result.new(available: false, reason: "perf script failed: #{err.lines.last}") unless status.success?

      shown = perf.map { |arg| arg == data ? File.basename(data) : arg }
      summarize(script).tap { |result| result.command = "#{shown.join(" ")} ruby -r profiler_hook cpu.rb" }
    ensure
      File.delete(data) if data && File.exist?(data)
    end

    def summarize(script)
      self_counts = Hash.new(0)
      inclusive_counts = Hash.new(0)
      total = 0
      sonde = 0
      each_sample(script) do |thread_name, frames|
        total += 1
        sonde_functions = frames.select { |_name, dso| dso.match?(SONDE_LIBRARY) }.map(&:first).uniq
        next if sonde_functions.empty? && !thread_name.match?(SONDE_THREAD)

        sonde += 1
        leaf_name, leaf_dso = frames.first || ["?", "?"]
        self_counts["#{leaf_name} (#{File.basename(leaf_dso)})"] += 1
        sonde_functions.each { |name| inclusive_counts[name] += 1 }
      end
      Result.new(available: true, samples: total, sonde_samples: sonde, self_top: top(self_counts),
                 inclusive_top: top(inclusive_counts))
    end

    # Yields [thread name, [[function, dso], ...] leaf first, pid, tid]
    # per sample of `perf script -F comm,tid,...` (pid nil) or
    # `-F comm,pid,tid,...`.
    def each_sample(script)
      script.split(/\n\s*\n/).each do |block|
        lines = block.lines.map(&:strip).reject(&:empty?)
        next if lines.empty?

        header = lines.first.match(SAMPLE_HEADER)
        thread_name = header ? header[1] : lines.first
        frames = lines.drop(1).filter_map do |line|
          match = line.match(/\A\h+\s+(.*?)\s+\((.*)\)\z/)
          match && [match[1], match[2]]
        end
        yield thread_name, frames, header && header[2] && Integer(header[2]), header && Integer(header[3])
      end
    end

    def top(counts)
      counts.sort_by { |name, count| [-count, name] }.first(TOP)
    end
  end
end
