# frozen_string_literal: true

require "optparse"
require "sonde/errors"
require "sonde/flamegraph"
require "sonde/cli/profile_input"
require "sonde/cli/profile_file_command"

module Sonde
  module CLI
    # `sonde flamegraph FILE... [-o OUT.html] [--title TEXT] [--open]`: writes
    # the interactive flame graph page of a pprof profile (several files are
    # merged into one first). Errors are one
    # line on err, never a backtrace: 2 for usage, 1 for a bad file.
    class FlamegraphCommand
      include ProfileFileCommand

      PREFIX = "sonde flamegraph: "
      USAGE = "sonde flamegraph FILE... [-o OUT.html] [--title TEXT] [--open]"
      INITIAL = { output: nil, title: nil, open: false }.freeze

      private

      def parse_arguments(argv)
        parse_files(argv)
      end

      def execute(files)
        write(files, @output || Flamegraph.default_output(files.first))
      end

      def parser
        option_parser("Writes an interactive flame graph of a pprof profile: one HTML file that opens from disk,\n" \
                      "with no network. CPU or wall time, allocations, live heap, threads, states, zoom, search,\n" \
                      "top functions; a timeline of the threads when the samples keep their moments.\n" \
                      "Several FILEs are merged first, as go tool pprof merges them.") do |opts|
          opts.on("-o", "--output FILE", "Where to write the page (default: the first FILE with .html)") do |value|
            @output = value
          end
          opts.on("--title TEXT", "The page's title (default: FILE's name, \"+ N more\" for several)") { |value| @title = text_option("--title", value) }
          opts.on("--open", "Open the page in a browser once written") { @open = true }
          opts.on("-h", "--help", "Show this help") { @help = true }
          remove_exiting_builtins(opts)
        end
      end

      def write(files, output)
        profile = read_profiles(files)
        title = @title || ProfileFileCommand.display_name(files.first, more: files.size - 1)
        page = Flamegraph.html(profile, title: title)
        Flamegraph.write_atomically(output, page)
        @err.puts "sonde: wrote #{output}"
        open_page(output) if @open
        EXIT_OK
      rescue ProfileInput::Error => e
        fail_with(EXIT_FILE_ERROR, e.message)
      rescue SystemCallError => e
        fail_with(EXIT_FILE_ERROR, "cannot write #{output}: #{e.message.sub(/ @ .*/, "")}")
      end

      def open_page(output)
        return if Flamegraph.open_in_browser(output)

        @err.puts "#{PREFIX}no browser found to open #{output} (set BROWSER, or install xdg-utils); open it yourself"
      end

    end
  end
end
