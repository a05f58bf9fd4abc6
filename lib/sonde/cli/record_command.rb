# frozen_string_literal: true

require "optparse"
require "tmpdir"
require "fileutils"
require_relative "../options"
require_relative "../profile"
require_relative "../record"
require_relative "../flamegraph"
require_relative "../record_notes"
require_relative "record_outcome"

module Sonde
  module CLI
    # `sonde record [-o FILE] [--rate HZ] [--max-frames N] [--alloc] [--heap] [--alloc-interval N]
    #  [--no-signals] -- CMD ARGS...`
    #
    # Runs CMD with Sonde injected into every Ruby process it starts (through
    # RUBYOPT, so `bundle exec`, `rake` and an exec into Ruby are followed).
    # The process CMD becomes writes FILE; any other Ruby process it starts
    # writes FILE with ".<pid>" before the extension. Exits with CMD's status.
    class RecordCommand
      DEFAULT_OUTPUT = "sonde.pprof"
      # Signals that, sent to `sonde record`, are passed on to the command.
      FORWARDED_SIGNALS = %w[INT TERM HUP QUIT USR1 USR2].freeze
      SIGNAL_EXIT_BASE = 128

      def self.run(argv, out: $stdout, err: $stderr)
        new(out, err).run(argv)
      end

      def initialize(out, err)
        @out = out
        @err = err
        @output = DEFAULT_OUTPUT
        @options = {}
      end

      def run(argv)
        command = parse(argv)
        return 0 if command == :help

        Options.new(**@options)
        Profile.check_writable!(@output)
        execute(command)
      rescue OptionParser::InvalidArgument => e
        @err.puts("sonde record: #{CLI.invalid_argument(parser, e)}")
        USAGE_ERROR
      rescue OptionParser::ParseError, Sonde::ArgumentError => e
        @err.puts("sonde record: #{e.message}")
        USAGE_ERROR
      end

      private

      def parser
        OptionParser.new do |opts|
          opts.banner = "Usage: sonde record [OPTIONS] -- COMMAND [ARGS...]"
          opts.separator ""
          opts.separator "Runs COMMAND, profiles its Ruby process(es), writes a pprof file when it exits,"
          opts.separator "and exits with COMMAND's status. Other Ruby processes COMMAND starts write"
          opts.separator "FILE with .<pid> before the extension (out.pprof -> out.12345.pprof)."
          opts.separator ""
          opts.on("-o", "--output FILE", "where to write the profile (default: #{DEFAULT_OUTPUT})") { |v| @output = v }
          opts.on("--rate HZ", Integer, "samples per second, #{Options::RATE_RANGE.min}-#{Options::RATE_RANGE.max} " \
                                        "(default: #{Options::DEFAULTS[:rate]})") { |v| @options[:rate] = v }
          opts.on("--max-frames N", Integer, "deepest stack kept, #{Options::MAX_FRAMES_RANGE.min}-" \
                                             "#{Options::MAX_FRAMES_RANGE.max} (default: " \
                                             "#{Options::DEFAULTS[:max_frames]})") { |v| @options[:max_frames] = v }
          opts.on("--format FORMAT", %w[pprof html], "pprof (default), or html: also write the flame graph " \
                                                      "page (FILE with .html)") { |v| @format = v }
          opts.on("--open", "write the flame graph page and open it in a browser") do
            @format = "html"
            @open = true
          end
          opts.on("--alloc", "also sample allocations: alloc-samples, by allocating stack and class") do
            @options[:alloc] = true
          end
          opts.on("--heap", "also record the live heap at exit (heap-live-samples, heap-live-size; implies --alloc)") do
            @options[:heap] = true
          end
          opts.on("--alloc-interval N", Integer, "allocations per allocation sample, on average, " \
                                                 "#{Options::ALLOC_INTERVAL_RANGE.min}-#{Options::ALLOC_INTERVAL_RANGE.max} " \
                                                 "(default: #{Options::DEFAULTS[:alloc_interval]})") do |v|
            @options[:alloc_interval] = v
          end
          opts.on("--alloc-duty F", Float, "share of ticks during which allocations are listened to, " \
                                           "#{Options::ALLOC_DUTY_MIN}-1 (default: #{Options::DEFAULTS[:alloc_duty]}, every " \
                                           "tick; continuous mode's: #{Options::CONTINUOUS_ALLOC_DUTY})") do |v|
            @options[:alloc_duty] = v
          end
          opts.on("--[no-]timeline", "keep each sample's moment, for the flame graph page's timeline and " \
                                     "Firefox export (default: on; bounded: docs/timeline.md)") do |v|
            @options[:timeline] = v
          end
          opts.on("--no-signals", "never send SIGPROF (for C libraries that mishandle EINTR; see docs/production.md)") do
            @options[:signals] = false
          end
          opts.on("-h", "--help", "show this help") { @help = true }
        end
      end

      def parse(argv)
        # An argument not valid in its encoding (a Latin-1 file name under a
        # UTF-8 locale) as binary: OptionParser cannot match it otherwise.
        arguments = parser.parse(argv.map { |arg| arg.valid_encoding? ? arg : arg.b })
        if @help
          @out.puts(parser.help)
          return :help
        end
        raise OptionParser::ParseError, "no command given; usage: sonde record [OPTIONS] -- COMMAND [ARGS...]" if arguments.empty?
        # The page is drawn from FILE once written: a device or a FIFO cannot
        # be read back, and FILE.html beside /dev/stdout would be a new file in /dev.
        if @format == "html" && OutputFile.writes_in_place?(File.expand_path(@output))
          raise Sonde::ArgumentError, "--format html needs -o FILE to be a regular file or a new path " \
                                          "(the page is drawn from it); #{@output} is not (a device, a FIFO or a link to one)"
        end

        arguments
      end

      def execute(command)
        output = File.expand_path(@output)
        Dir.mktmpdir("sonde-record") do |notes_dir|
          notes = File.join(notes_dir, "notes")
          File.binwrite(notes, "")
          env = Record.environment(output: output, options: @options, parent_pid: Process.pid)
          env[RecordNotes::VARIABLE] = notes
          pid = spawn_command(env, command)
          return 127 unless pid

          status = wait_forwarding_signals(pid)
          report_outputs(output, notes)
          exit_code(status)
        end
      end

      def spawn_command(env, command)
        Process.spawn(env, *command)
      rescue SystemCallError => e
        @err.puts("sonde record: cannot run #{command.first}: #{e.message}")
        nil
      end

      def wait_forwarding_signals(pid)
        previous = FORWARDED_SIGNALS.to_h do |signal|
          [signal, trap(signal) { Process.kill(signal, pid) rescue nil }] # rubocop:disable Style/RescueModifier
        end
        Process.wait2(pid).last
      ensure
        previous&.each { |signal, handler| trap(signal, handler || "DEFAULT") }
      end

      def exit_code(status)
        return status.exitstatus if status.exited?

        SIGNAL_EXIT_BASE + (status.termsig || 0)
      end

      # Says what was written, or why nothing was (RecordOutcome).
      def report_outputs(output, notes)
        written, lines = RecordOutcome.new(output: output, shown: @output, notes_path: notes).call
        if written
          @err.puts("sonde: wrote #{@output} (see it with: sonde report #{@output}, or sonde flamegraph #{@output})")
          write_page(output) if @format == "html"
        end
        lines.each { |line| @err.puts(line) }
      rescue SystemCallError => e
        @err.puts("sonde record: #{e.message}")
      end

      def write_page(output)
        html = Flamegraph.default_output(@output)
        Flamegraph.write_html(output, html)
        @err.puts("sonde: wrote #{html} (flame graph page)")
        return unless @open

        Flamegraph.open_in_browser(html) or @err.puts("sonde record: no browser found to open #{html}; open it yourself")
      rescue Sonde::Pprof::DecodeError, SystemCallError => e
        @err.puts("sonde record: cannot write the flame graph page #{html}: #{e.message}")
      end
    end
  end
end
