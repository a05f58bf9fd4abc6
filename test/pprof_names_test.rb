# frozen_string_literal: true

require_relative "support/test_helper"

# Function names must reach pprof viewers whole. `go tool pprof` treats a
# name whose system_name equals it as not yet demangled and, finding <...>
# or (...), cuts them out as C++ template and parameter lists: "block (2
# levels) in <main>" became "block  in " and "<main>" became "" (shown as
# <unknown>). Sonde writes no system_name, which marks the name as final.
class PprofNamesTest < Minitest::Test
  include SondeTestHelper

  def test_go_tool_pprof_shows_block_and_main_names_whole
    skip "go is not installed (apt-get install golang-go)" unless go_available?
    Dir.mktmpdir do |dir|
      out = File.join(dir, "names.pprof")
      run_workload("gvl_released_c", out, "0.5")
      top, stderr, status = Open3.capture3("go", "tool", "pprof", "-top", "-nodecount=100", out)
      assert_succeeded status, stderr
      names = Sonde::Pprof.read(out).functions.values.map(&:name)
      assert_includes names, "<main>"
      assert_includes top, "<main>"
      refute_includes top, "<unknown>"
      refute_match(/block +in +$/, top)
      # Ruby 3.1's backend names blocks as Ruby's backtraces do.
      if Sonde::Platform.backend == :mjit_header
        assert_includes names, "block (2 levels) in <main>"
        assert_includes top, "block (2 levels) in <main>"
      end
    end
  end
end
