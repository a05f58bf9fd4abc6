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

    # OptionParser's own message for a value an option's type refuses
    # ("invalid argument: --rate abc") names neither the option apart nor
    # what it takes: this says both, from the option's help text.
    #   --rate: "abc" is not accepted (expected: samples per second, 1-5000 (default: 100))
    def invalid_argument(parser, error)
      option, value = error.args.first.to_s.split("=", 2)
      value = error.args[1] if value.nil?
      switch = parser.top.search(:long, option.delete_prefix("--")) || parser.top.search(:short, option.delete_prefix("-"))
      expected = switch ? " (expected: #{Array(switch.desc).join(" ")})" : ""
      "#{option}: #{value.to_s.inspect} is not accepted#{expected}"
    end

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
