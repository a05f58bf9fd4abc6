# frozen_string_literal: true

require "optparse"
require "sonde/errors"
require "sonde/convert"
require "sonde/views"
require "sonde/output_file"
require "sonde/cli/profile_input"
require "sonde/cli/profile_file_command"

module Sonde
  module CLI
    # `sonde convert FILE --to collapsed|speedscope|firefox [-o OUT] [--sample TYPE]
    # [--no-thread-names] [--label NAME]`: a pprof profile in another tool's format, to OUT
    # or to standard output. Errors are one line on err, never a backtrace:
    # 2 for usage, 1 for a bad file.
    class ConvertCommand
      include ProfileFileCommand

      PREFIX = "sonde convert: "
      USAGE = "sonde convert FILE --to collapsed|speedscope|firefox [-o OUT] [--sample TYPE] [--no-thread-names] " \
              "[--label NAME]"
      FORMATS = { "collapsed" => :collapsed, "speedscope" => :speedscope, "firefox" => :firefox }.freeze
      FORMAT_NAMES = "#{FORMATS.keys[0...-1].join(", ")} or #{FORMATS.keys.last}"
      STDOUT_NAME = "-"
      INITIAL = { to: nil, output: STDOUT_NAME, sample: nil, thread_names: true, label: nil }.freeze

      private

      def parse_arguments(argv)
        file = parse_file(argv)
        raise UsageError, "missing --to (#{FORMAT_NAMES})" unless @to || file.nil?

        file
      end

      def parser
        option_parser("Converts a pprof profile for other tools.") do |opts|
          opts.on("--to FORMAT", "collapsed: flamegraph.pl's folded stacks, one line per stack and thread;",
                  "speedscope: speedscope's JSON, one profile per thread and sample type;",
                  "firefox: Firefox Profiler's JSON, each thread's samples in time with GC, state",
                  "and label markers (needs a profile recorded with the timeline)") do |value|
            @to = FORMATS.fetch(value) do
              raise UsageError, "--to: #{value.inspect} is not accepted (expected #{FORMAT_NAMES})"
            end
          end
          opts.on("-o", "--output FILE", "Where to write (default: standard output)") { |value| @output = value }
          opts.on("--sample TYPE", *sample_help) do |value|
            @sample = text_option("--sample", value)
          end
          opts.on("--[no-]thread-names", "collapsed: start each line with the thread's name (default: yes)") do |value|
            @thread_names = value
          end
          opts.on("--label NAME", "collapsed: lead each stack with this label's value (endpoint, job, ...),",
                  "before the thread's name") do |value|
            @label = text_option("--label", value)
          end
          opts.on("-h", "--help", "Show this help") { @help = true }
          remove_exiting_builtins(opts)
        end
      end

      # The views' short names and the sample types they stand for.
      def sample_help
        views = Views.all.values
        ["Sample type: any type in the profile, or #{views.map(&:name).join(", ")} for",
         "#{views.map(&:type).join(", ")} (default: the first of",
         "those the profile has for collapsed, each of them for speedscope;",
         "firefox takes none: wall samples, with their CPU)"]
      end

      def execute(file)
        profile = ProfileInput.read(file)
        converter = Convert.new(profile, to: @to, sample: @sample, thread_names: @thread_names, label: @label,
                                         name: ProfileFileCommand.display_name(file))
      rescue ProfileInput::Error => e
        fail_with(EXIT_FILE_ERROR, e.message)
      rescue Convert::ProfileError => e
        fail_with(EXIT_FILE_ERROR, "#{file}: #{e.message}")
      rescue Sonde::ArgumentError => e
        fail_with(EXIT_USAGE_ERROR, e.message.sub(/\A(sample|label): /, "--\\1: "))
      else
        write(converter)
      end

      def write(converter)
        return converter.write(@out) && EXIT_OK if @output == STDOUT_NAME

        OutputFile.write(@output) { |io| converter.write(io) }
        @err.puts "sonde: wrote #{@output}"
        EXIT_OK
      rescue SystemCallError => e
        fail_with(EXIT_FILE_ERROR, "cannot write #{@output}: #{e.message.sub(/ @ .*/, "")}")
      end

    end
  end
end
