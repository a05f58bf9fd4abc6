# frozen_string_literal: true

require "optparse"
require "sonde/errors"
require "sonde/pprof"
require "sonde/report"

module Sonde
  module CLI
    # `sonde report FILE [--by thread] [--sample cpu|wall] [--top N]`: prints
    # the top functions of a pprof profile. Errors are one line on err, never
    # a backtrace; the exit code says whose fault it was.
    class ReportCommand
      EXIT_OK = 0
      EXIT_FILE_ERROR = 1
      EXIT_USAGE_ERROR = 2
      PREFIX = "sonde report: "
      USAGE = "sonde report FILE [--by thread] [--sample cpu|wall] [--top N]"
      BY_CHOICES = { "thread" => :thread }.freeze
      SAMPLE_CHOICES = { "cpu" => :cpu, "wall" => :wall }.freeze
      EXITING_BUILTINS = %w[version *-completion-bash *-completion-zsh].freeze

      # A usage error, with the message to print after the prefix.
      class UsageError < StandardError; end

      def self.run(argv, out: $stdout, err: $stderr)
        new(out: out, err: err).run(argv)
      end

      def initialize(out:, err:)
        @out = out
        @err = err
        @options = { by: nil, sample: nil, top: Report::DEFAULT_TOP }
        @help = false
      end

      def run(argv)
        file = parse(argv.dup)
        return print_help if @help

        report(file)
      rescue UsageError => e
        fail_with(EXIT_USAGE_ERROR, "#{e.message} (usage: #{USAGE})")
      rescue Errno::EPIPE
        EXIT_OK # the reader went away (sonde report x | head); nothing left to say
      end

      private

      def parse(argv)
        rest = parser.parse(argv)
        return nil if @help
        raise UsageError, "missing FILE" if rest.empty?
        raise UsageError, "unexpected argument #{rest[1].inspect}, expected one FILE" if rest.size > 1

        rest.first
      rescue OptionParser::InvalidOption => e
        raise UsageError, "unknown option #{e.args.first}"
      rescue OptionParser::MissingArgument => e
        raise UsageError, "#{e.args.first} needs a value"
      rescue OptionParser::ParseError => e
        raise UsageError, e.message
      end

      def parser
        OptionParser.new do |opts|
          opts.banner = "Usage: #{USAGE}\n\nPrints the functions that took the most time in a pprof profile.\n\n"
          opts.on("--by WHAT", "Split the report: thread (one section per thread, busiest first)") do |value|
            @options[:by] = choice("--by", value, BY_CHOICES)
          end
          opts.on("--sample KIND", "Only one table: cpu (CPU time) or wall (wall-clock time);",
                  "both by default, CPU first") do |value|
            @options[:sample] = choice("--sample", value, SAMPLE_CHOICES)
          end
          opts.on("--top N", "Show the N functions with the most self time (default #{Report::DEFAULT_TOP})") do |value|
            @options[:top] = positive_integer("--top", value)
          end
          opts.on("-h", "--help", "Show this help") { @help = true }
          remove_exiting_builtins(opts)
        end
      end

      # OptionParser's own --version and completion options call exit, which
      # a command that returns its exit code must never do.
      def remove_exiting_builtins(opts)
        EXITING_BUILTINS.each { |name| opts.base.long.delete(name) }
      end

      def choice(option, value, choices)
        choices.fetch(value) do
          raise UsageError, "#{option}: #{value.inspect} is not accepted (expected #{choices.keys.join(" or ")})"
        end
      end

      def positive_integer(option, value)
        number = Integer(value, 10, exception: false)
        return number if number&.positive?

        raise UsageError, "#{option}: #{value.inspect} is not accepted (expected a positive integer)"
      end

      def print_help
        @out.puts parser.help
        EXIT_OK
      end

      # Only reading is rescued here; rendering errors (a closed pipe) are
      # left to run.
      def report(file)
        profile = Pprof.read(file)
      rescue Errno::ENOENT
        fail_with(EXIT_FILE_ERROR, "#{file}: no such file")
      rescue Errno::EISDIR
        fail_with(EXIT_FILE_ERROR, "#{file}: is a directory")
      rescue Errno::EACCES
        fail_with(EXIT_FILE_ERROR, "#{file}: permission denied")
      rescue SystemCallError => e
        fail_with(EXIT_FILE_ERROR, "#{file}: #{e.message}")
      rescue Pprof::DecodeError => e
        fail_with(EXIT_FILE_ERROR, "#{file}: #{e.message}")
      else
        Report.new(profile, **@options).render(@out)
        EXIT_OK
      end

      def fail_with(code, message)
        @err.puts "#{PREFIX}#{message}"
        code
      end
    end
  end
end
