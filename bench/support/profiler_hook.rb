# frozen_string_literal: true

# Starts the chosen profiler inside a workload's process and, at exit, stops
# it and writes what it measured as one JSON line: how long stopping took
# (for Sonde that is encoding the pprof), the memory it needed, the samples
# it delivered (per thread for Sonde), the CPU time of Sonde's own threads
# and each profiler's own stats. Loaded with
# `ruby -r bench/support/profiler_hook.rb WORKLOAD`, before the workload, so
# the workload's own timing covers only its work, profiled: loading and
# starting the profiler happen before it, stopping after it. The peers'
# hooks are in hooks/ (one file each, with the options they use).
#
#   SONDE_BENCH_PROFILER     none | sonde | stackprof-cpu | stackprof-wall | stackprof-object |
#                            datadog | vernier | pf2
#   SONDE_BENCH_RATE         samples per second (Hz)
#   SONDE_BENCH_ALLOC_INTERVAL  optional: sample one allocation in N (Sonde's
#                            alloc: true with alloc_interval: N, StackProf
#                            object mode's interval, Vernier's
#                            allocation_interval); 0 turns Sonde's off
#                            explicitly. Unset: each profiler's default (for
#                            Sonde, its options and SONDE_* variables)
#   SONDE_BENCH_HEAP         1: Sonde also tracks the live heap (heap: true)
#   SONDE_BENCH_OUT          file to append the JSON line to
#   SONDE_BENCH_PROFILE_OUT  optional: where to write the profile, in the
#                            profiler's own format (pprof for Sonde and
#                            Datadog, Marshal'd results for StackProf and
#                            pf2, Firefox-profiler JSON for Vernier)
require "json"

module SondeBench
  # Everything this hook does, kept out of the workload's namespace.
  module ProfilerHook
    PROFILERS = %w[none sonde stackprof-cpu stackprof-wall stackprof-object datadog vernier pf2].freeze
    # The peers' hooks: a module with start(rate, profile_out) and
    # stop(profile_out) -> Hash, in hooks/<file>.rb.
    PEER_HOOKS = { "datadog" => %w[datadog DatadogHook], "vernier" => %w[vernier VernierHook],
                   "pf2" => %w[pf2 Pf2Hook] }.freeze
    MICROSECONDS_PER_SECOND = 1_000_000
    # Writing this to /proc/self/clear_refs resets the peak RSS (VmHWM) to
    # the current RSS, so the peak seen afterwards is the stop's own.
    RESET_PEAK_RSS = "5"
    # Sonde's Ruby threads ("sonde-trigger", "sonde-idle-helper", and
    # "sonde-flusher" in continuous mode) as Linux names them (15 bytes at
    # most: "sonde-idle-help").
    SONDE_THREAD = /\Asonde-/.freeze
    TASKS = "/proc/self/task"
    # Field 14 and 15 of /proc/TID/stat (utime, stime), counted after the
    # ")" that ends the command name: fields 3 onwards, so indexes 11 and 12.
    STAT_UTIME_INDEX = 11
    NANOSECONDS_PER_SECOND = 1_000_000_000
    # Samples of a thread whose native thread has not started yet carry
    # thread id 0 (Ruby 3.1): they belong to no thread the workload can name.
    UNSTARTED_THREAD_ID = 0

    class << self
      # SONDE_BENCH_ALLOC_INTERVAL as an Integer, nil when unset (the peers'
      # hooks read it here).
      attr_reader :alloc_interval

      def start
        @profiler = ENV.fetch("SONDE_BENCH_PROFILER", "none")
        raise ArgumentError, "SONDE_BENCH_PROFILER=#{@profiler}: expected one of #{PROFILERS.join(", ")}" unless
          PROFILERS.include?(@profiler)

        @rate = Integer(ENV.fetch("SONDE_BENCH_RATE", "100"))
        @profile_out = ENV["SONDE_BENCH_PROFILE_OUT"]
        @profile_out = nil if @profile_out&.empty?
        interval = ENV["SONDE_BENCH_ALLOC_INTERVAL"]
        @alloc_interval = interval.nil? || interval.empty? ? nil : Integer(interval)
        @heap = ENV["SONDE_BENCH_HEAP"] == "1"
        @started = now
        if (peer = PEER_HOOKS[@profiler])
          require_relative "hooks/#{peer.first}"
          @peer = ProfilerHook.const_get(peer.last)
          @peer.start(@rate, @profile_out)
          # Loading a peer can take a second (Datadog): sampling starts here.
          @sampling_since = now
        else
          send("start_#{@profiler.tr("-", "_")}")
        end
        at_exit { finish }
      end

      private

      def start_none; end

      def start_sonde
        require "sonde"
        Sonde.start(rate: @rate, **sonde_allocation_options)
      end

      # Keywords only for what the run asked for: a run that says nothing
      # gets Sonde's defaults, as every other benchmark does.
      def sonde_allocation_options
        options = @heap ? { heap: true } : {}
        return options unless @alloc_interval
        return options.merge(alloc: false) if @alloc_interval.zero?

        options.merge(alloc: true, alloc_interval: @alloc_interval)
      end

      def start_stackprof_cpu
        start_stackprof(:cpu)
      end

      def start_stackprof_wall
        start_stackprof(:wall)
      end

      def start_stackprof(mode)
        require "stackprof"
        StackProf.start(mode: mode, interval: MICROSECONDS_PER_SECOND / @rate, raw: true)
      end

      # Object mode samples every Nth allocation (interval: N, StackProf's
      # default 1: every one); raw: false, its default, since nothing reads
      # a raw timeline of allocations and keeping one costs every sample.
      def start_stackprof_object
        require "stackprof"
        StackProf.start(mode: :object, **(@alloc_interval ? { interval: @alloc_interval } : {}))
      end

      def finish
        result = { profiler: @profiler, rate_hz: @rate, rss_kb: status_kb("VmRSS") }
        # Read while Sonde still runs: its threads end at stop.
        result[:own_threads] = own_threads if @profiler == "sonde"
        result[:profiled_s] = now - @started
        result[:profile_duration_s] = now - @sampling_since if @peer
        reset_peak_rss
        stop_started = now
        stopped = @peer ? @peer.stop(@profile_out) : send("stop_#{@profiler.tr("-", "_")}")
        result[:stop_s] = now - stop_started
        result[:stop_peak_extra_kb] = status_kb("VmHWM") - result[:rss_kb] if @peak_resettable
        result.merge!(stopped || {})
        write(result)
      end

      def stop_none; end

      def stop_sonde
        profile = Sonde.stop
        profile.write(@profile_out) if @profile_out
        { pprof_bytes: profile.pprof.bytesize, profile_duration_s: profile.duration,
          stats: profile.stats }.merge(samples_by_thread(profile))
      end

      def stop_stackprof_cpu
        stop_stackprof
      end

      def stop_stackprof_wall
        stop_stackprof
      end

      def stop_stackprof_object
        stop_stackprof
      end

      # StackProf records no thread: its samples are counted as one. Its
      # profile is what StackProf.run(out:) would write: the Marshal'd results.
      def stop_stackprof
        StackProf.stop
        results = StackProf.results
        File.binwrite(@profile_out, Marshal.dump(results)) if @profile_out
        { profile_duration_s: now - @started, samples: results[:samples], missed_samples: results[:missed_samples],
          raw_samples: raw_sample_count(results[:raw]) }
      end

      # StackProf's raw list is [frame count, frames..., repeat count]*.
      def raw_sample_count(raw)
        return 0 unless raw

        count = 0
        index = 0
        while index < raw.size
          frames = raw[index]
          count += raw[index + frames + 1]
          index += frames + 2
        end
        count
      end

      # The CPU time each of Sonde's own threads has used so far, from
      # /proc: [{ "name", "tid", "cpu_ns", "clock" }]. schedstat's first field
      # is nanoseconds on a CPU; without it (a kernel without schedstats),
      # stat's utime + stime, in clock ticks.
      def own_threads
        Dir.children(TASKS).filter_map do |tid|
          name = File.read(File.join(TASKS, tid, "comm")).strip
          next unless name.match?(SONDE_THREAD)

          cpu_ns, clock = thread_cpu_ns(File.join(TASKS, tid))
          { name: name, tid: Integer(tid), cpu_ns: cpu_ns, clock: clock }
        rescue SystemCallError # the thread ended meanwhile
          nil
        end
      end

      def thread_cpu_ns(task)
        [Integer(File.read(File.join(task, "schedstat")).split.first), "schedstat"]
      rescue SystemCallError, ArgumentError, TypeError
        require "etc"
        utime, stime = File.read(File.join(task, "stat")).rpartition(")").last.split.values_at(STAT_UTIME_INDEX,
                                                                                               STAT_UTIME_INDEX + 1)
        [(Integer(utime) + Integer(stime)) * NANOSECONDS_PER_SECOND / Etc.sysconf(Etc::SC_CLK_TCK), "stat"]
      end

      # "wall-samples" per thread, from the pprof itself: what a user sees.
      # thread_samples: per thread id, sorted, without thread id 0 (threads
      # sampled before their native thread started, all under that one id:
      # counted apart as unstarted_samples; and GC time Sonde could not
      # pin on a thread, "(unknown thread)", which has no wall-samples).
      # no_frame_samples: samples whose stack has no frame at all (a thread
      # not yet running its block).
      def samples_by_thread(profile)
        decoded = profile.decode
        column = decoded.value_index("wall-samples")
        counts = Hash.new(0)
        summary = { unstarted_samples: 0, no_frame_samples: 0, wall_samples: 0 }
        decoded.samples.each do |sample|
          value = sample.values[column]
          summary[:wall_samples] += value
          summary[:no_frame_samples] += value if sample.location_ids.empty?
          thread = sample.labels.fetch("thread id", nil) || sample.labels.fetch("thread name", "?")
          if thread == UNSTARTED_THREAD_ID
            summary[:unstarted_samples] += value
          else
            counts[thread.to_s] += value
          end
        end
        summary.merge(thread_samples: counts.values.sort)
      end

      def reset_peak_rss
        File.write("/proc/self/clear_refs", RESET_PEAK_RSS)
        @peak_resettable = true
      rescue SystemCallError
        @peak_resettable = false
      end

      def status_kb(field)
        File.read("/proc/self/status")[/^#{field}:\s+(\d+)/, 1].to_i
      end

      def write(result)
        line = JSON.generate(result)
        path = ENV["SONDE_BENCH_OUT"]
        if path && !path.empty?
          File.write(path, "#{line}\n", mode: "a")
        else
          warn "sonde-bench-hook: #{line}"
        end
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end

SondeBench::ProfilerHook.start
