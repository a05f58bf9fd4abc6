# frozen_string_literal: true

require_relative "support/test_helper"

# The suite's one retry (test/support/statistical.rb): a statistical test
# that fails once passes, saying it retried and both results; one that fails
# twice fails with both messages; an unmarked test, an error and a skip are
# never run twice. The tests run in a child minitest, whose output is read.
class StatisticalTest < Minitest::Test
  include SondeTestHelper

  FIXTURE = <<~RUBY
    require "minitest/autorun"
    require "statistical"

    class Fixture < Minitest::Test
      RUNS = Hash.new(0)
      i_suck_and_my_tests_are_order_dependent!

      def setup
        @counted = false
      end

      statistical def test_a_fails_once
        RUNS[name] += 1
        puts "RUN \#{name} \#{RUNS[name]}"
        assert_operator RUNS[name], :>=, 2, "share 0.41 under its bound 0.5"
      end

      statistical def test_b_fails_twice
        RUNS[name] += 1
        puts "RUN \#{name} \#{RUNS[name]}"
        flunk "rate \#{RUNS[name] * 10} Hz under 50"
      end

      def test_c_unmarked_fails_once
        RUNS[name] += 1
        puts "RUN \#{name} \#{RUNS[name]}"
        assert_operator RUNS[name], :>=, 2, "deterministic"
      end

      statistical def test_d_errors
        RUNS[name] += 1
        puts "RUN \#{name} \#{RUNS[name]}"
        raise "the workload crashed"
      end

      statistical def test_e_skips
        RUNS[name] += 1
        puts "RUN \#{name} \#{RUNS[name]}"
        skip "no tool"
      end

      statistical def test_f_passes
        RUNS[name] += 1
        puts "RUN \#{name} \#{RUNS[name]}"
        assert true
      end
    end
  RUBY

  # One child run serves every test: they read its output.
  def setup
    @out, @err, @status = self.class.child ||= run_fixture
  end

  def run_fixture(env: {})
    Dir.mktmpdir do |dir|
      file = File.join(dir, "fixture_test.rb")
      File.write(file, FIXTURE)
      run_ruby("-I#{File.join(ROOT, "test", "support")}", file, env: { "SONDE_TEST_LANE" => nil }.merge(env),
               gems: true) # minitest
    end
  end

  class << self
    attr_accessor :child
  end

  def test_a_statistical_test_that_fails_once_passes_and_says_so
    assert_equal ["RUN test_a_fails_once 1", "RUN test_a_fails_once 2"], runs_of("test_a_fails_once")
    assert_includes @out, "RETRIED Fixture#test_a_fails_once: first failure: share 0.41 under its bound 0.5."
    assert_includes @out, "RETRIED Fixture#test_a_fails_once: second run passed"
    refute_match(/Failure:\s+Fixture#test_a_fails_once/, @out)
  end

  def test_a_statistical_test_that_fails_twice_fails_with_both_results
    assert_equal 2, runs_of("test_b_fails_twice").size
    assert_includes @out, "RETRIED Fixture#test_b_fails_twice: first failure: rate 10 Hz under 50"
    assert_includes @out, "RETRIED Fixture#test_b_fails_twice: second run failed too: rate 20 Hz under 50"
    assert_match(/Failure:\s+Fixture#test_b_fails_twice .*\n.*failed twice \(statistical, retried once\):\n\s+first run: rate 10 Hz under 50\n\s+second run: rate 20 Hz under 50/,
                 @out)
  end

  def test_an_unmarked_test_an_error_and_a_skip_run_once
    assert_equal 1, runs_of("test_c_unmarked_fails_once").size
    assert_equal 1, runs_of("test_d_errors").size
    assert_equal 1, runs_of("test_e_skips").size
    assert_equal 1, runs_of("test_f_passes").size
    %w[test_c_unmarked_fails_once test_d_errors test_e_skips test_f_passes].each do |name|
      refute_includes @out, "RETRIED Fixture##{name}"
    end
    assert_match(/Error:\s+Fixture#test_d_errors/, @out)
  end

  def test_the_run_fails_and_ends_with_a_summary_of_its_retries
    refute @status.success?, "two failures and an error: the run fails"
    assert_match(/6 runs, \d+ assertions, 2 failures, 1 errors, 1 skips/, @out)
    assert_match(/RETRIED 2 statistical test\(s\) in this run:\n  Fixture#test_a_fails_once \(second run passed\)\n  Fixture#test_b_fails_twice \(second run failed too\)\n\z/,
                 @out)
  end

  def test_each_lane_runs_its_own_tests_only
    marked = %w[test_a_fails_once test_b_fails_twice test_d_errors test_e_skips test_f_passes]
    { "statistical" => marked, "deterministic" => %w[test_c_unmarked_fails_once] }.each do |lane, names|
      out, = run_fixture(env: { "SONDE_TEST_LANE" => lane })
      assert_equal names, out.scan(/RUN (\w+) 1$/).flatten, "lane #{lane}"
    end
    _out, err, status = run_fixture(env: { "SONDE_TEST_LANE" => "fast" })
    refute status.success?
    assert_match(/SONDE_TEST_LANE=fast: expected one of statistical, deterministic/, err)
  end

  def test_only_a_test_method_can_be_marked
    error = assert_raises(ArgumentError) { Class.new(Minitest::Test) { statistical :setup } }
    assert_match(/statistical marks a test method/, error.message)
  end

  private

  # The fixture's "RUN <test> <n>" lines (minitest's reporter may print on
  # the same line before them).
  def runs_of(name)
    @out.scan(/RUN #{name} \d+$/)
  end
end
