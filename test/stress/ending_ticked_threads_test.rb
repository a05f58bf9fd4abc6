# frozen_string_literal: true

require_relative "stress_helper"

# The trigger signals the GVL holder as it read it a moment before, and
# that thread may end in between. With pthread_kill, which reads the
# target's descriptor (freed with the thread's stack), the trigger crashed
# with SIGSEGV on Ruby 3.4 (7 of 40 runs of stack_reuse_test's child); it
# signals by tid now (tgkill), which fails on a thread that is gone. This
# workload, its napper down from 1.6 s to 0.4 s (the run ends while a
# stale holder is still ticked), crashed the build before the fix
# (e26303d) in 19 of 40 runs and this one in 0 of 40, at 0.3-0.5 s a run.
# It runs RUNS times on 3.4, whose threads each get a native thread of
# their own (3.1 reuses them, and its thread stacks stay mapped): at 19 in
# 40, all RUNS pass unseen by chance 0.04% of the time.
class EndingTickedThreadsTest < Minitest::Test
  include SondeStress::Assertions

  WORKLOAD = File.join(SondeStress::WORKLOADS, "ending_ticked_threads.rb")
  RUNS = 12

  def test_threads_that_end_while_ticked_on_ruby_34
    build_on_other_ruby("3.4")
    RUNS.times do |run|
      out, err, status = SondeStress.run_command({}, SondeStress::SCRIPT_RUBY, "3.4", "ruby",
                                                 "-I#{SondeStress::LIB}", WORKLOAD, timeout: 120)
      assert_clean_exit(status, err, "run #{run + 1} of #{RUNS}")
      assert_operator Integer(out.lines.last), :>=, 200, "the born threads ended under Sonde"
    end
  end
end
