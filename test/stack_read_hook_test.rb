# frozen_string_literal: true

require_relative "support/test_helper"

# Sonde::Native::Testing.stack_read_ns, the hook `rake bench:cost` times
# stack reads with (bench/workloads/puma_worker.rb): it reads the whole
# stack of a thread, outside a run too, and refuses anything else.
class StackReadHookTest < Minitest::Test
  def setup
    Sonde::Native.load!
  end

  def dive(levels) = levels.zero? ? sleep : dive(levels - 1)

  def test_reads_a_parked_threads_whole_stack_each_time
    parked = Thread.new { dive(50) }
    Thread.pass until parked.status == "sleep"
    depth, durations = Sonde::Native::Testing.stack_read_ns(parked, 3)
    # 51 frames of dive, Kernel#sleep, the thread's block: and nothing cut.
    assert_equal 53, depth
    assert_equal 3, durations.size
    durations.each { |ns| assert_operator ns, :>, 0 }
  ensure
    parked&.kill&.join
  end

  def test_refuses_what_is_not_a_living_thread
    ended = Thread.new { nil }.tap(&:join)
    [ended, "main", nil].each do |thread|
      error = assert_raises(ArgumentError) { Sonde::Native::Testing.stack_read_ns(thread, 1) }
      assert_equal "not a living thread", error.message
    end
    [0, 101].each do |times|
      error = assert_raises(ArgumentError) { Sonde::Native::Testing.stack_read_ns(Thread.current, times) }
      assert_equal "times must be from 1 to 100", error.message
    end
  end
end
