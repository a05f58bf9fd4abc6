# frozen_string_literal: true

require "minitest"

# One retry for the tests whose verdict is statistical: a share, a rate or a
# count read from sampling on a noisy, shared machine, checked against a
# bound taken from that measure's spread. Such a test may fail once without
# a regression; it gets one more run, in a fresh instance (setup and
# teardown again), and fails only if that run fails too. The first failure
# is printed either way ("RETRIED ..."), so a bound that starts to fail once
# in a while is seen, not hidden. Every other test (an exact result, an
# error, a crash, a skip) is never retried.
#
# A test is marked where it is defined, with a comment above it giving the
# spread measured for what it bounds (SONDE_SPREAD_LOG, script/spread):
#
#   # Statistical. Its bounds against what 3 runs measured (...): "burn's CPU
#   # time vs the burner thread's CPU clock" -0.5% to -0.1% of ±15%.
#   statistical def test_cpu_time_matches_the_thread_clock
#     ...
#   end
#
# Only assertion failures are retried: an exception that is not an
# assertion (the workload crashed, a file was missing) is no sampling noise.
module Statistical
  # What `statistical` adds to every test class.
  module Marking
    # Marks the test named NAME (what `def` returns) as statistical; returns NAME.
    def statistical(name)
      raise ArgumentError, "statistical marks a test method, not #{name.inspect}" unless name.to_s.start_with?("test_")

      statistical_tests << name.to_s
      name
    end

    def statistical_tests
      @statistical_tests ||= []
    end

    def statistical?(name)
      ancestors.any? { |klass| klass.respond_to?(:statistical_tests) && klass.statistical_tests.include?(name.to_s) }
    end
  end

  # Prepended to Minitest::Test: the run of a marked test, with its one retry.
  module Retry
    def run
      first = super
      return first if @statistical_retry || !Statistical.retry?(self.class, name, first)

      Statistical.say("RETRIED #{self.class}##{name}: first failure: #{Statistical.message_of(first)}")
      # A class whose tests share one workload run forgets it: the retry measures again.
      self.class.forget_shared_run if self.class.respond_to?(:forget_shared_run)
      again = self.class.new(name)
      again.instance_variable_set(:@statistical_retry, true)
      second = again.run
      Statistical.combine(first, second)
    end
  end

  # SONDE_TEST_LANE=statistical runs only the marked tests of each class,
  # SONDE_TEST_LANE=deterministic only the others (rake test runs the two
  # lanes side by side: the deterministic one, at a lower priority, cannot
  # fail from the load the other puts on the machine); unset, every test.
  module Lanes
    LANES = %w[statistical deterministic].freeze

    def runnable_methods
      methods = super
      lane = ENV.fetch("SONDE_TEST_LANE", "")
      return methods if lane.empty?
      raise ArgumentError, "SONDE_TEST_LANE=#{lane}: expected one of #{LANES.join(", ")}" unless LANES.include?(lane)

      methods.select { |method| statistical?(method) == (lane == "statistical") }
    end
  end

  class << self
    def say(line)
      $stdout.puts("\n#{line}")
      $stdout.flush
    end

    # A marked test whose failures are all assertion failures (no skip, no
    # error) gets its retry.
    def retry?(klass, name, result)
      return false unless klass.respond_to?(:statistical?) && klass.statistical?(name)
      return false if result.failures.empty?

      result.failures.all? do |failure|
        failure.is_a?(Minitest::Assertion) && !failure.is_a?(Minitest::Skip) &&
          !failure.is_a?(Minitest::UnexpectedError)
      end
    end

    def message_of(result)
      result.failures.map(&:message).join(" | ").gsub(/\s*\n\s*/, " ")
    end

    # The second run's result, timed over both runs; when it failed too, its
    # failure names both runs' messages.
    def combine(first, second)
      label = "#{second.klass}##{second.name}"
      second.time += first.time
      outcome = if second.passed? then "passed"
                elsif second.skipped? then "skipped"
                else "failed too: #{message_of(second)}"
                end
      say("RETRIED #{label}: second run #{outcome}")
      retried << "#{label} (second run #{outcome.split(":").first})"
      return second if second.passed? || second.skipped?

      failure = second.failures.first
      return second if failure.is_a?(Minitest::UnexpectedError)

      both = Minitest::Assertion.new("failed twice (statistical, retried once):\n" \
                                     "  first run: #{message_of(first)}\n  second run: #{message_of(second)}")
      both.set_backtrace(failure.backtrace)
      second.failures = [both, *second.failures.drop(1)]
      second
    end

    # Every retry of this process, for the summary at the end of the run.
    def retried
      @retried ||= []
    end
  end
end

Minitest::Test.prepend(Statistical::Retry)
Minitest.after_run do
  unless Statistical.retried.empty?
    Statistical.say("RETRIED #{Statistical.retried.size} statistical test(s) in this run:\n  " +
                    Statistical.retried.join("\n  "))
  end
end
Minitest::Test.extend(Statistical::Marking)
Minitest::Test.singleton_class.prepend(Statistical::Lanes)
