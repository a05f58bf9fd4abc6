# frozen_string_literal: true

require "optparse"

module Sonde
  module CLI
    # What `sonde report`, `sonde flamegraph` and `sonde convert` share: one
    # FILE argument, OptionParser errors turned into one usage line, exit
    # codes (2 for usage, 1 for a bad file), and no OptionParser built-in
    # that would exit the process. A command defines PREFIX, USAGE and #parser.
    module ProfileFileCommand
      EXIT_OK = 0
      EXIT_FILE_ERROR = 1
      EXIT_USAGE_ERROR = 2
      # OptionParser options that print and call exit on their own.
      EXITING_BUILTINS = %w[version *-completion-bash *-completion-zsh].freeze

      class UsageError < StandardError; end

      def self.included(command)
        command.extend(ClassMethods)
      end

      module ClassMethods
        def run(argv, out: $stdout, err: $stderr)
          new(out: out, err: err).run(argv)
        end
      end

      private

      # The one FILE argument, or nil when --help was asked for.
      def parse_file(argv)
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

      def usage_error(error)
        fail_with(EXIT_USAGE_ERROR, "#{error.message} (usage: #{self.class::USAGE})")
      end

      def remove_exiting_builtins(opts)
        EXITING_BUILTINS.each { |name| opts.base.long.delete(name) }
      end

      def print_help
        @out.puts parser.help
        EXIT_OK
      end

      def fail_with(code, message)
        @err.puts "#{self.class::PREFIX}#{message}"
        code
      end
    end
  end
end
