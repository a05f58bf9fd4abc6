# frozen_string_literal: true

require_relative "version"
require_relative "errors"

module Sonde
  # The `sonde` command: dispatches to one class per subcommand. Each
  # subcommand returns an exit status and reports errors as one line on
  # stderr, never as a backtrace.
  module CLI
    COMMANDS = {
      "record" => ["cli/record_command", :RecordCommand, "run a command and profile its Ruby process"],
      "report" => ["cli/report_command", :ReportCommand, "print the top functions of a profile, by CPU and wall time"],
      "flamegraph" => ["cli/flamegraph_command", :FlamegraphCommand, "write an interactive flame graph page (HTML)"],
      "convert" => ["cli/convert_command", :ConvertCommand, "convert a profile to collapsed stacks or speedscope"],
    }.freeze

    USAGE_ERROR = 2

    module_function

    def run(argv, out: $stdout, err: $stderr)
      command, *rest = argv
      case command
      when nil, "-h", "--help", "help"
        out.puts(help)
        command.nil? ? USAGE_ERROR : 0
      when "-v", "--version"
        out.puts("sonde #{Sonde::VERSION}")
        0
      else
        path, name, = COMMANDS[command]
        unless path
          err.puts("sonde: unknown command #{command.inspect}; commands: #{COMMANDS.keys.join(", ")} (see sonde --help)")
          return USAGE_ERROR
        end
        require_relative path
        const_get(name).run(rest, out: out, err: err)
      end
    end

    def help
      lines = ["Usage: sonde COMMAND [OPTIONS]", "", "Sampling CPU and wall-time profiler for Ruby.", "", "Commands:"]
      COMMANDS.each { |name, (_, _, summary)| lines << format("  %-10s %s", name, summary) }
      lines << "" << "Run `sonde COMMAND --help` for a command's options."
      lines.join("\n")
    end
  end
end
