# frozen_string_literal: true

require_relative "stress_helper"

# Proves what sampling at 1000 Hz does to blocking system calls, and that
# the application never sees Errno::EINTR:
# - C code that blocks in a system call while holding the GVL (a C library;
#   test/support/eintr_probe.c) gets every signal Sonde sends: poll, select
#   and nanosleep, which the kernel never restarts, see EINTR at about the
#   rate of the signals; read on a pipe and accept on a socket, restarted
#   thanks to SA_RESTART, never do. With signals: false none sees any.
# - Ruby's own blocking calls (IO#read on a pipe, sleep, IO.select,
#   TCPServer#accept, Queue#pop, Mutex#lock, ConditionVariable#wait) never
#   raise Errno::EINTR, with signals, without, and under a storm of 2000
#   SIGPROFs a second aimed at the very thread that blocks.
# The counts go to RESULTS.md (section 5).
class EintrTest < Minitest::Test
  include SondeStress::Assertions

  NOT_RESTARTED = %w[poll_pipe select_pipe nanosleep_for].freeze
  RESTARTED = %w[read_pipe accept_socket].freeze
  RUBY_CALLS = ["IO#read (pipe)", "sleep", "IO.select", "TCPServer#accept", "Queue#pop", "Mutex#lock",
                "ConditionVariable#wait"].freeze

  def run_part(part, signals)
    seconds = SondeStress.size(0.3, 2.0)
    dir = SondeStress.build_c_extension(File.join(SondeStress::ROOT, "test", "support", "eintr_probe.c"))
    stdout, stderr, status = SondeStress.run_ruby("-I#{dir}", File.join(SondeStress::WORKLOADS, "eintr.rb"), part,
                                                  signals, seconds.to_s, timeout: 120)
    assert_clean_exit(status, stderr, "eintr #{part} #{signals}")
    assert_empty stderr
    facts = JSON.parse(stdout.lines.last)
    SondeStress.record("eintr #{part} #{signals}", seconds: seconds, results: facts["results"], stats: facts["stats"])
    facts["results"]
  end

  def test_c_calls_holding_the_gvl_with_signals
    results = run_part("c", "signals")
    NOT_RESTARTED.each do |call|
      sent = results[call]["signals_sent"]
      assert_operator sent, :>, 0, call
      assert_operator results[call]["eintr"], :>=, sent / 2, "#{call}: each signal interrupts it (#{results[call]})"
    end
    RESTARTED.each do |call|
      assert_operator results[call]["signals_sent"], :>, 0, call
      assert_equal 0, results[call]["eintr"], "#{call} is restarted (SA_RESTART)"
    end
  end

  def test_c_calls_holding_the_gvl_without_signals
    results = run_part("c", "nosignals")
    (NOT_RESTARTED + RESTARTED).each do |call|
      assert_equal 0, results[call]["signals_sent"], call
      assert_equal 0, results[call]["eintr"], call
    end
  end

  def check_ruby_calls(results)
    RUBY_CALLS.each do |call|
      assert_operator results[call]["calls"], :>, 0, call
      assert_equal 0, results[call]["eintr"], "#{call} let Errno::EINTR through"
    end
  end

  def test_ruby_blocking_calls_never_raise_eintr_with_signals
    check_ruby_calls(run_part("ruby", "signals"))
  end

  def test_ruby_blocking_calls_never_raise_eintr_without_signals
    results = run_part("ruby", "nosignals")
    check_ruby_calls(results)
    assert(RUBY_CALLS.all? { |call| results[call]["signals_sent"].zero? })
  end

  def test_ruby_blocking_calls_never_raise_eintr_under_a_signal_storm
    results = run_part("storm", "signals")
    check_ruby_calls(results)
    landed = RUBY_CALLS.sum { |call| results[call]["wrong_thread_signals"] }
    assert_operator landed, :>, results["storm"]["signals_sent"] / 4,
                    "most storm signals must land while the thread is off the GVL, in its blocking call"
  end
end
