# frozen_string_literal: true

require "optparse"

module Sonde
  module CLI
    # What `sonde report`, `sonde flamegraph` and `sonde convert` share: the
    # FILE argument (several for report and flamegraph, which merge them), OptionParser errors turned into one usage line, exit
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

      # Each command's INITIAL: its option variables before parsing (copied,
      # so a command may change them in place).
      def initialize(out:, err:)
        @out = out
        @err = err
        @help = false
        self.class::INITIAL.each { |name, value| instance_variable_set(:"@#{name}", value.dup) }
      end

      # Parses argv, then prints the help or runs the command on the file
      # (each command's #execute). Returns the exit code.
      def run(argv)
        file = parse_arguments(argv.dup)
        return print_help if @help

        execute(file)
      rescue UsageError => e
        usage_error(e)
      rescue Errno::EPIPE
        EXIT_OK # the reader went away (sonde report x | head): nothing left to say
      end

      private

      # The files merged into one profile (ProfileInput.read_all); a file
      # gone since it was listed is left out with a warning on stderr.
      def read_profiles(files)
        ProfileInput.read_all(files, on_gone: ->(file) { @err.puts "#{self.class::PREFIX}#{ProfileInput.gone_warning(file)}" })
      end

      # An OptionParser whose banner is the usage line and description; the
      # block adds the command's options.
      def option_parser(description)
        OptionParser.new do |opts|
          opts.banner = "Usage: #{self.class::USAGE}\n\n#{description}\n\n"
          yield opts
        end
      end

      # The FILE argument; commands with more to check override it.
      def parse_arguments(argv)
        parse_file(argv)
      end

      # The one FILE argument, or nil when --help was asked for.
      def parse_file(argv)
        files = parse_files(argv)
        return nil if files.nil?
        raise UsageError, "unexpected argument #{files[1].inspect}, expected one FILE" if files.size > 1

        files.first
      end

      # The FILE arguments (at least one), or nil when --help was asked for.
      def parse_files(argv)
        rest = parser.parse(ProfileFileCommand.safe_arguments(argv))
        return nil if @help
        raise UsageError, "missing FILE" if rest.empty?

        rest
      rescue OptionParser::InvalidOption => e
        raise UsageError, "unknown option #{e.args.first}"
      rescue OptionParser::MissingArgument => e
        raise UsageError, "#{e.args.first} needs a value"
      rescue OptionParser::InvalidArgument => e
        raise UsageError, CLI.invalid_argument(parser, e)
      rescue OptionParser::ParseError => e
        raise UsageError, e.message
      end

      # Arguments as OptionParser can match them: one that is not valid in
      # its encoding (a file name with Latin-1 bytes under a UTF-8 locale)
      # becomes binary, which is still the same file name.
      def self.safe_arguments(argv)
        argv.map { |argument| argument.is_a?(String) && !argument.valid_encoding? ? argument.b : argument }
      end

      # A file name as text to show (a page title, a speedscope name); for
      # several files, the first and how many more ("w1.pprof + 3 more").
      def self.display_name(path, more: 0)
        name = File.basename(path).dup.force_encoding(Encoding::UTF_8).scrub
        more.positive? ? "#{name} + #{more} more" : name
      end

      # An option's value that is matched against names in the profile
      # (--focus, --function, --title...): UTF-8 text, or a usage error.
      def text_option(option, value)
        text = value.dup.force_encoding(Encoding::UTF_8)
        return text if text.valid_encoding?

        raise UsageError, "#{option}: #{value.inspect} is not valid UTF-8 text"
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
