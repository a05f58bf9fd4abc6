# frozen_string_literal: true

# The report's section on the two costs measured beside every peer outside
# `rake bench`: an idle process's CPU (bench/idle_cost.rb, `rake bench:idle`)
# and each profiler's share of the cpu workload's perf samples
# (bench/cpu_cost_perf.rb, `rake bench:cpu_perf`). Those runs take their
# own half hour each, so this section quotes the tables of their latest
# results files as they are, with the date each was written; it measures
# nothing itself.
module SondeBench
  class SideBySideReport
    ROOT = File.expand_path("../..", __dir__)
    SOURCES = [
      ["bench/IDLE_RESULTS.md", "rake bench:idle", "What an idle process costs"],
      ["bench/CPU_COST_PERF.md", "rake bench:cpu_perf", "What CPU sampling costs, counted under perf"]
    ].freeze

    def initialize(root: ROOT)
      @root = root
    end

    def to_markdown
      <<~MD
        ## 6. Side by side: idle processes, and sampling counted under perf

        Two costs measured beside every peer that installs here, in runs of their own (each file
        says how many rounds, the spread, the Rubies and the load), quoted from their latest results files.

        #{SOURCES.map { |path, command, title| quote(path, command, title) }.join("\n")}
      MD
    end

    private

    # The file but for its title (so with its date, commit and method) (its headings one level down, under this
    # section), or a line saying it is missing.
    def quote(path, command, title)
      file = File.join(@root, path)
      return "### #{title}\n\nNot run yet: `#{command}` writes [#{path}](#{File.basename(path)}).\n" unless File.exist?(file)

      text = File.read(file)
      body = text.lines.drop_while { |line| !line.start_with?("# ") }.drop(1).join
      <<~MD
        ### #{title}

        Quoted from [#{path}](#{File.basename(path)}) (`#{command}`):

        #{body.gsub(/^## /, "#### ").strip}
      MD
    end
  end
end
