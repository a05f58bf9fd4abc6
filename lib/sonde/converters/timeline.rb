# frozen_string_literal: true

require "sonde/errors"
require "sonde/pprof"
require "sonde/profile_names"

module Sonde
  module Converters
    # A profile's timed samples (those with an end_timestamp_ns label) laid
    # out per thread in time order, with the spans a timeline viewer shows
    # beside them: the common input of the timeline formats (Firefox).
    # Samples without the label (allocations, heap, values the timeline's
    # bound dropped) have no moment and are left out.
    #
    # A thread's moments are its wall samples: each covers the wall-time
    # before its end, in one state, on one stack. Its CPU samples give each
    # moment the CPU the thread used since the moment before (cpu_ns), so a
    # viewer can draw how busy it was. Spans:
    #
    # - :gc, one per GC sample (state gc, or the "Garbage Collection" frame),
    #   from its end less its wall-time, with its gc type and reason;
    # - :state, consecutive moments waiting for the GVL, sleeping or blocked,
    #   one span per run of the same state;
    # - :label, per label of the application's (endpoint, job, ...; not
    #   Sonde's own), consecutive moments with the same value, one span named
    #   by it. A span starts where its first moment starts, or where it ends
    #   when that moment was idle (sleeping, blocked): an idle part's time
    #   can predate the label, which is read when the moment ends. GC moments
    #   neither break nor extend a label's run.
    #
    #   timeline = Sonde::Converters::Timeline.new(Sonde::Pprof.read("app.pprof"))
    #   timeline.threads.each { |thread| thread.moments.map(&:end_ns) } # ascending
    class Timeline
      # The profile has no timed sample: it cannot be laid out in time.
      class Untimed < Sonde::Error; end

      # end_ns: epoch nanoseconds. frames: Pprof location ids, leaf first.
      Moment = Struct.new(:end_ns, :wall_ns, :cpu_ns, :state, :location_ids, :labels) do
        def start_ns
          end_ns - wall_ns
        end
      end
      # kind: :gc, :state or :label. data: a Hash of String => String.
      Span = Struct.new(:kind, :name, :start_ns, :end_ns, :data)
      ThreadTimeline = Struct.new(:id, :name, :moments, :spans)

      GC_FRAME = "Garbage Collection"
      GC_STATE = "gc"
      STATE_SPANS = ["waiting for gvl", "sleeping", "blocked"].freeze
      # States whose time before a moment can predate the labels read at it.
      IDLE_STATES = %w[sleeping blocked].freeze

      attr_reader :threads, :start_ns, :duration_ns, :interval_ns, :label_names

      def initialize(profile)
        @profile = profile
        @names = ProfileNames.all.fetch(:labels)
        @timestamp = @names.fetch(:end_timestamp_ns)
        @start_ns = profile.time_nanos
        @duration_ns = profile.duration_nanos
        @interval_ns = sampling_interval(profile)
        @wall = profile.value_index(ProfileNames.sample_type(:wall_time))
        @cpu = profile.value_index(ProfileNames.sample_type(:cpu_time))
        timed = profile.samples.select { |sample| sample.labels[@timestamp].is_a?(Integer) }
        raise Untimed, untimed_message if timed.empty?

        @label_names = (timed.flat_map { |sample| sample.labels.keys }.uniq - @names.values).sort
        @threads = timed.group_by { |sample| sample.labels[@names.fetch(:thread_id)] }
                        .map { |id, samples| thread_timeline(id, samples) }
                        .reject { |thread| thread.moments.empty? }
                        .sort_by { |thread| [thread.moments.first.end_ns, thread.id.to_s] }
      end

      private

      def untimed_message
        "the profile has no timeline (no sample carries #{@timestamp}): it was recorded with " \
          "--no-timeline, timeline: false or in continuous mode; record it with sonde record or " \
          "Sonde.start (a timeline is on by default), or in continuous mode with timeline: true " \
          "(SONDE_TIMELINE=1)"
      end

      # pprof's period, when it is a time in nanoseconds (Sonde's wall-time
      # period); else Sonde's default rate's.
      def sampling_interval(profile)
        _type, unit = profile.period_type
        unit == "nanoseconds" && profile.period.positive? ? profile.period : 10_000_000
      end

      def thread_timeline(id, samples)
        # Sorted by moment, ties in the profile's order: the same file
        # always gives the same timeline.
        samples = samples.each_with_index.sort_by { |sample, i| [sample.labels[@timestamp], i] }.map(&:first)
        moments = samples.select { |sample| value(sample, @wall).positive? }.map { |sample| moment(sample) }
        charge_cpu(moments, samples)
        ThreadTimeline.new(id, thread_name(id, samples), moments,
                           gc_spans(moments) + state_spans(moments) + label_spans(moments))
      end

      def value(sample, index)
        index ? sample.values[index] : 0
      end

      def moment(sample)
        labels = sample.labels
        Moment.new(labels[@timestamp], value(sample, @wall), 0, labels[@names.fetch(:state)]&.to_s,
                   sample.location_ids, labels)
      end

      # Each CPU sample's CPU goes to the first moment that ends at or after
      # it; CPU after the thread's last moment has no moment to go to.
      def charge_cpu(moments, samples)
        return if moments.empty?

        index = 0
        samples.each do |sample|
          cpu = value(sample, @cpu)
          next unless cpu.positive?

          at = sample.labels[@timestamp]
          index += 1 while index < moments.size && moments[index].end_ns < at
          break if index == moments.size

          moments[index].cpu_ns += cpu
        end
      end

      # The name the thread had for most of its samples.
      def thread_name(id, samples)
        name = samples.map { |sample| sample.labels[@names.fetch(:thread_name)] }.compact.map(&:to_s)
                      .tally.max_by { |_name, count| count }&.first
        return name if name && !name.empty?

        id.nil? ? "(unknown thread)" : "thread #{id}"
      end

      def gc?(moment)
        return true if moment.state == GC_STATE

        leaf = moment.location_ids.first
        leaf && function(leaf).name == GC_FRAME
      end

      def function(location_id)
        location = @profile.locations.fetch(location_id)
        @profile.functions.fetch(location.function_id, Pprof::UNKNOWN_FUNCTION)
      end

      def gc_spans(moments)
        moments.select { |moment| gc?(moment) }.map do |moment|
          data = { "gc type" => moment.labels[@names.fetch(:gc_type)],
                   "gc reason" => moment.labels[@names.fetch(:gc_reason)] }
          Span.new(:gc, "GC", moment.start_ns, moment.end_ns, data.compact.transform_values(&:to_s))
        end
      end

      def state_spans(moments)
        runs(moments) { |moment| STATE_SPANS.include?(moment.state) ? moment.state : nil }.map do |state, run|
          Span.new(:state, state, run.first.start_ns, run.last.end_ns, { "state" => state })
        end
      end

      def label_spans(moments)
        moments = moments.reject { |moment| gc?(moment) }
        @label_names.flat_map do |label|
          runs(moments) { |moment| moment.labels[label]&.to_s }.map do |value, run|
            first = run.first
            start = IDLE_STATES.include?(first.state) ? first.end_ns : first.start_ns
            Span.new(:label, value, start, run.last.end_ns, { "label" => label, "value" => value })
          end
        end
      end

      # [key, moments] for each run of consecutive moments with the same
      # non-nil key.
      def runs(moments)
        moments.chunk_while { |a, b| yield(a) == yield(b) }
               .filter_map { |run| (key = yield(run.first)) && [key, run] }
      end
    end
  end
end
