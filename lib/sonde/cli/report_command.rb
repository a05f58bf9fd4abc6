# frozen_string_literal: true

require "optparse"
require "sonde/errors"
require "sonde/pprof"
require "sonde/report"
require "sonde/views"
require "sonde/cli/profile_input"
require "sonde/cli/profile_file_command"

module Sonde
  module CLI
    # `sonde report FILE... [--by thread|state|class|label:NAME] [--sample cpu|wall|alloc|heap]
    # [--top N] [--focus REGEX] [--ignore REGEX] [--lines] [--function NAME]`:
    # prints the top functions of a pprof profile (several files are merged
    # into one first), or one function's callers and callees. Errors are one line on err, never a backtrace; the exit code
    # says whose fault it was.
    class ReportCommand
      include ProfileFileCommand

      PREFIX = "sonde report: "
      USAGE = "sonde report FILE... [--by thread|state|class|label:NAME] [--sample cpu|wall|alloc|heap] [--top N] " \
              "[--focus REGEX] [--ignore REGEX] [--lines] [--function NAME]"
      BY_CHOICES = { "thread" => :thread, "state" => :state, "class" => :class }.freeze
      INITIAL = { options: { by: nil, sample: nil, top: Report::DEFAULT_TOP }.freeze }.freeze

      private

      def parser
        option_parser("Prints the functions that took the most time, allocated the most objects or hold the\n" \
                      "most live heap in a pprof profile. Several FILEs (a fleet's workers, a day's periods) are\n" \
                      "merged first, as go tool pprof merges them: same sample types, equal samples summed.") do |opts|
          opts.on("--by WHAT", "Split the report: thread (one section per thread, busiest first),",
                  "state (running, waiting for gvl, sleeping, blocked, gc), class (the class",
                  "of the allocated objects), or label:NAME (one section per value of the",
                  "label NAME, e.g. label:endpoint)") do |value|
            @options[:by] = if value.start_with?("label:") && value.size > 6
                              value
                            else
                              choice("--by", value, BY_CHOICES.merge("label:NAME" => nil))
                            end
          end
          opts.on("--sample KIND", "Only one table: cpu (CPU time), wall (wall-clock time), alloc",
                  "(objects allocated) or heap (bytes still live, and their objects);",
                  "by default cpu and wall, then alloc and heap when recorded") do |value|
            @options[:sample] = choice("--sample", value, sample_choices)
          end
          opts.on("--top N", "Show the N functions with the largest self value (default #{Report::DEFAULT_TOP})") do |value|
            @options[:top] = positive_integer("--top", value)
          end
          opts.on("--focus REGEX", "Only samples whose stack has a function whose name or file matches") do |value|
            @options[:focus] = regexp("--focus", value)
          end
          opts.on("--ignore REGEX", "Drop samples whose stack has a function whose name or file matches") do |value|
            @options[:ignore] = regexp("--ignore", value)
          end
          opts.on("--lines", "One row per line of code instead of per function") { @options[:lines] = true }
          opts.on("--function NAME", "Callers and callees of one function (its full name, or a part",
                  "that names only one function)") do |value|
            @options[:function] = text_option("--function", value)
          end
          opts.on("-h", "--help", "Show this help") { @help = true }
          remove_exiting_builtins(opts)
        end
      end

      # "cpu" => :cpu, ...: the views' short names.
      def sample_choices
        Views.all.keys.to_h { |name| [name.to_s, name] }
      end

      def choice(option, value, choices)
        choices.fetch(value) do
          *others, last = choices.keys
          raise UsageError, "#{option}: #{value.inspect} is not accepted (expected #{others.join(", ")} or #{last})"
        end
      end

      def regexp(option, value)
        Regexp.new(text_option(option, value))
      rescue RegexpError => e
        raise UsageError, "#{option}: #{value.inspect} is not a valid regular expression (#{e.message})"
      end

      def positive_integer(option, value)
        number = Integer(value, 10, exception: false)
        return number if number&.positive?

        raise UsageError, "#{option}: #{value.inspect} is not accepted (expected a positive integer)"
      end

      def parse_arguments(argv)
        parse_files(argv)
      end

      # Only reading and options are rescued here; rendering errors (a closed
      # pipe) are left to run.
      def execute(files)
        profile = read_profiles(files)
        report = Report.new(profile, **@options)
      rescue ProfileInput::Error => e
        fail_with(EXIT_FILE_ERROR, e.message)
      rescue Sonde::ArgumentError => e
        fail_with(EXIT_USAGE_ERROR, e.message.sub(/\Afunction: /, "--function: "))
      else
        unless report.shows_anything?
          shown = files.size == 1 ? files.first : files.join(" + ")
          return fail_with(EXIT_FILE_ERROR, "#{shown}: #{nothing_to_show(profile, report)}")
        end

        report.render(@out)
        EXIT_OK
      end

      # A profile of another tool (Go's samples/count, cpu/nanoseconds), or
      # one without what --sample asks for: its own sample types are named,
      # for `sonde convert --sample`, which reads any of them.
      def nothing_to_show(profile, report)
        wanted = report.kinds.map(&:type)
        hint = report.kinds.filter_map { |kind| Report.how_to_record(kind).sub(/\A; /, "") unless kind.always_recorded? }
        missing = "nothing to show: the profile has no #{wanted.join(" or ")} samples"
        missing += " (#{hint.join("; ")})" unless hint.empty?
        types = profile.sample_types.map { |type, unit| "#{type}/#{unit}" }
        return "#{missing}, and no sample types at all" if types.empty?

        "#{missing}; its sample types are #{types.join(", ")} (sonde convert --sample TYPE reads any of them)"
      end

    end
  end
end
