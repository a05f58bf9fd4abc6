# frozen_string_literal: true

require "json"
require "sonde/version"
require "sonde/converters/timeline"

module Sonde
  module Converters
    # Firefox Profiler's processed profile format, version 48 (the JSON
    # https://profiler.firefox.com loads, and upgrades to its current
    # version as it loads it; the version Vernier writes too). Its
    # description: the profiler's src/types/profile.js and
    # docs-developer/CHANGELOG-formats.md at that version.
    #
    # One Firefox thread per Sonde thread, from a Timeline: its samples are
    # the thread's wall samples, each at its moment (ms after the profile's
    # start) on its stack, weighted by its wall time ("tracing-ms", so the
    # call tree sums wall time), with the CPU the thread used since the
    # sample before (threadCPUDelta, ns: the activity graph's height) and
    # its state as category (the graph's colour; sleeping and blocked are
    # Idle, which the profiler can leave out). Its markers are the
    # timeline's spans: GC, thread states, label values. Every table is
    # per thread (stringArray too, as version 48 has it); frames, functions
    # and stacks are deduplicated, tables and markers in a fixed order, so
    # the same profile always gives the same file.
    class Firefox
      PROCESSED_VERSION = 48
      # The Gecko profile format of Firefox's at the time of processed
      # version 48: meta.version.
      GECKO_VERSION = 29
      NS_PER_MS = 1_000_000.0
      INTERVAL_PHASE = 1

      # [name, colour, subcategories]: category 0 is the default one, which
      # must be grey; the others are Sonde's states. Every category's first
      # subcategory is the generic "Other". Sleeping and blocked are "Idle",
      # the name the profiler's "idle samples" switch looks for.
      CATEGORIES = [
        ["Other", "grey", ["Other"]],
        ["Running", "blue", ["Other"]],
        ["Waiting for GVL", "red", ["Other"]],
        ["Idle", "transparent", %w[Other Sleeping Blocked]],
        ["GC", "orange", ["Other"]]
      ].freeze
      # state => [category, subcategory]
      STATE_CATEGORIES = { "running" => [1, 0], "waiting for gvl" => [2, 0], "sleeping" => [3, 1],
                           "blocked" => [3, 2], "gc" => [4, 0] }.freeze
      DEFAULT_CATEGORY = [0, 0].freeze

      MARKER_DISPLAY = %w[marker-chart marker-table timeline-overview].freeze
      MARKER_SCHEMA = [
        { name: "GC", display: MARKER_DISPLAY, tooltipLabel: "GC {marker.data.gcType} ({marker.data.gcReason})",
          tableLabel: "{marker.data.gcType} ({marker.data.gcReason})",
          data: [{ key: "gcType", label: "Type", format: "string" },
                 { key: "gcReason", label: "Reason", format: "string" }] },
        { name: "ThreadState", display: %w[marker-chart marker-table], tooltipLabel: "{marker.data.state}",
          data: [{ key: "state", label: "State", format: "string" }] },
        { name: "Label", display: MARKER_DISPLAY, tooltipLabel: "{marker.data.label}: {marker.data.value}",
          tableLabel: "{marker.data.label}: {marker.data.value}",
          data: [{ key: "label", label: "Label", format: "string" },
                 { key: "value", label: "Value", format: "string" }] }
      ].freeze

      # timeline: a Timeline. name: the process's name in the viewer.
      def initialize(profile, timeline, name:)
        @profile = profile
        @timeline = timeline
        @name = name
      end

      def write(io)
        io << JSON.generate(to_h) << "\n"
        io
      end

      def to_h
        threads = @timeline.threads
        main = threads.index { |thread| thread.name == "main" } || 0
        {
          meta: meta(main),
          libs: [],
          counters: [],
          threads: threads.each_with_index.map do |thread, i|
            ThreadTables.new(@profile, @timeline, thread, i == main, @name).to_h
          end
        }
      end

      private

      def meta(main)
        start = @timeline.start_ns
        {
          interval: @timeline.interval_ns / NS_PER_MS,
          startTime: start / NS_PER_MS,
          endTime: (start + @timeline.duration_ns) / NS_PER_MS,
          profilingStartTime: 0,
          profilingEndTime: @timeline.duration_ns / NS_PER_MS,
          processType: 0,
          product: "Sonde #{Sonde::VERSION}",
          stackwalk: 0,
          version: GECKO_VERSION,
          preprocessedProfileVersion: PROCESSED_VERSION,
          symbolicated: true,
          sourceCodeIsNotOnSearchfox: true,
          markerSchema: MARKER_SCHEMA,
          sampleUnits: { time: "ms", eventDelay: "ms", threadCPUDelta: "ns" },
          categories: CATEGORIES.map { |name, color, subs| { name: name, color: color, subcategories: subs } },
          initialSelectedThreads: [main]
        }
      end

      # One thread's tables: strings, functions, frames and stacks,
      # each added once, in the order the samples first need them.
      class ThreadTables
        def initialize(profile, timeline, thread, main, process_name)
          @profile = profile
          @timeline = timeline
          @thread = thread
          @main = main
          @process_name = process_name
          @strings = {}
          @funcs = Table.new(%i[name isJS relevantForJS resource fileName lineNumber columnNumber])
          @frames = Table.new(%i[address inlineDepth category subcategory func nativeSymbol innerWindowID
                                 implementation line column])
          @stacks = Table.new(%i[frame category subcategory prefix])
          @func_ids = {}
          @frame_ids = {}
          @stack_ids = {}
        end

        def to_h
          samples = samples_table
          markers = markers_table
          first = @thread.moments.first
          {
            processType: "default",
            processName: @process_name,
            processStartupTime: 0,
            processShutdownTime: @timeline.duration_ns / NS_PER_MS,
            registerTime: [ms(first.start_ns), 0].max,
            unregisterTime: nil,
            pausedRanges: [],
            name: @thread.name,
            isMainThread: @main,
            pid: "0",
            tid: tid,
            samples: samples,
            markers: markers,
            stackTable: @stacks.to_h,
            frameTable: @frames.to_h,
            funcTable: @funcs.to_h,
            resourceTable: { length: 0, lib: [], name: [], host: [], type: [] },
            nativeSymbols: { libIndex: [], address: [], name: [], functionSize: [], length: 0 },
            stringArray: @strings.keys
          }
        end

        private

        # Sonde's thread id (a number); the name when there is none.
        def tid
          @thread.id.is_a?(Integer) ? @thread.id : (@thread.id || @thread.name).to_s
        end

        def ms(epoch_ns)
          (epoch_ns - @timeline.start_ns) / NS_PER_MS
        end

        def string(text)
          @strings[text] ||= @strings.size
        end

        def samples_table
          moments = @thread.moments
          {
            stack: moments.map { |moment| stack(moment.location_ids, category(moment)) },
            time: moments.map { |moment| ms(moment.end_ns) },
            weight: moments.map { |moment| moment.wall_ns / NS_PER_MS },
            weightType: "tracing-ms",
            threadCPUDelta: moments.map(&:cpu_ns),
            length: moments.size
          }
        end

        # [category, subcategory] of the moment's state.
        def category(moment)
          STATE_CATEGORIES.fetch(moment.state, DEFAULT_CATEGORY)
        end

        # location_ids: leaf first. Returns the leaf's stack index, or nil
        # for a sample without frames.
        def stack(location_ids, (category, subcategory))
          prefix = nil
          location_ids.reverse_each do |location_id|
            frame = frame(location_id, category, subcategory)
            prefix = (@stack_ids[[prefix, frame]] ||= @stacks.add(frame: frame, category: category,
                                                                    subcategory: subcategory, prefix: prefix))
          end
          prefix
        end

        # A frame per location and state: a stack's category is its
        # frame's, so the same line in two states is two frames of one
        # function (the call tree, which goes by function, keeps it one).
        def frame(location_id, category, subcategory)
          @frame_ids[[location_id, category, subcategory]] ||= begin
            location = @profile.locations.fetch(location_id)
            @frames.add(address: -1, inlineDepth: 0, category: category, subcategory: subcategory,
                        func: func(@profile.functions.fetch(location.function_id, Pprof::UNKNOWN_FUNCTION)),
                        nativeSymbol: nil, innerWindowID: nil, implementation: nil,
                        line: location.line.positive? ? location.line : nil, column: nil)
          end
        end

        # Ruby methods (those with a file) are "JS" to Firefox: its
        # "JavaScript only" call tree is then one of Ruby methods, C
        # functions folded into their callers.
        def func(function)
          key = [function.name, function.filename, function.start_line]
          @func_ids[key] ||= begin
            ruby = !function.filename.empty?
            @funcs.add(name: string(function.name.empty? ? "?" : function.name), isJS: ruby, relevantForJS: false,
                       resource: -1, fileName: ruby ? string(function.filename) : nil,
                       lineNumber: function.start_line.positive? ? function.start_line : nil, columnNumber: nil)
          end
        end

        def markers_table
          table = Table.new(%i[data name startTime endTime phase category])
          @thread.spans.sort_by { |span| [span.start_ns, span.end_ns, span.kind, span.name] }.each do |span|
            table.add(data: marker_data(span), name: string(span.name), startTime: ms(span.start_ns),
                      endTime: ms(span.end_ns), phase: INTERVAL_PHASE, category: marker_category(span))
          end
          table.to_h
        end

        def marker_data(span)
          case span.kind
          when :gc then { type: "GC", gcType: span.data["gc type"], gcReason: span.data["gc reason"] }.compact
          when :state then { type: "ThreadState", state: span.data.fetch("state") }
          else { type: "Label", label: span.data.fetch("label"), value: span.data.fetch("value") }
          end
        end

        def marker_category(span)
          case span.kind
          when :gc then STATE_CATEGORIES.fetch("gc")
          when :state then STATE_CATEGORIES.fetch(span.name, DEFAULT_CATEGORY)
          else DEFAULT_CATEGORY
          end.first
        end
      end

      # A table of the format: one array per column, all as long as its
      # length field.
      class Table
        def initialize(columns)
          @columns = columns.to_h { |column| [column, []] }
          @length = 0
        end

        # Adds a row (every column given); returns its index.
        def add(**row)
          @columns.each { |column, values| values << row.fetch(column) }
          (@length += 1) - 1
        end

        def to_h
          @columns.merge(length: @length)
        end
      end
    end
  end
end
