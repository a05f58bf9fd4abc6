# frozen_string_literal: true

require "tmpdir"
require "fileutils"
require "sonde/pprof"

# test/workloads/taking_turns.rb recorded with the default options, once per
# test process: its workload burns for about 3.6 s, and TimelineTest, the
# Firefox export, the flame graph's timeline and the browser test all read
# the same recording. Callers only read it: the file is never written to
# again, and its folder goes when the process ends.
module TakingTurns
  class << self
    # [profile, facts, path]; run_workload: the caller's (it asserts the
    # workload succeeded and parses its facts).
    def default_recording(run_workload)
      @default_recording ||= begin
        dir = Dir.mktmpdir("sonde-taking-turns")
        at_exit { FileUtils.rm_rf(dir) }
        path = File.join(dir, "turns.pprof")
        facts = run_workload.call("taking_turns", path, "{}")
        [Sonde::Pprof.read(path), facts, path].freeze
      end
    end
  end
end
