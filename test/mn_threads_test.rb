# frozen_string_literal: true

require_relative "support/test_helper"

# Ruby 3.3's M:N threads (RUBY_MN_THREADS=1) share native threads between
# Ruby threads, so per-thread CPU clocks and thread ids mean nothing there:
# Sonde refuses them with a clear error, and never crashes. It tells them
# from what the VM does at load (vm_public.c, refuse_mn_threads).
class MnThreadsTest < Minitest::Test
  include SondeTestHelper

  def test_m_n_threads_are_refused_with_an_unsupported_error
    skip "M:N threads exist from Ruby 3.3 on" unless Sonde::Platform.backend == :public_api

    stdout, stderr, status = run_ruby("-e", <<~RUBY, env: { "RUBY_MN_THREADS" => "1" })
      require "sonde"
      puts Sonde.supported?
      puts Sonde.unsupported_reason
      begin
        Sonde.start
      rescue Sonde::UnsupportedError => e
        puts "raised \#{e.class}"
      end
      puts Array.new(4) { |i| Thread.new { i * 2 } }.sum(&:value)
    RUBY
    assert_succeeded status, stderr
    lines = stdout.lines.map(&:chomp)
    assert_equal "false", lines[0]
    assert_match(/M:N threads \(RUBY_MN_THREADS=1\)/, lines[1])
    assert_equal "raised Sonde::UnsupportedError", lines[2]
    assert_equal "12", lines[3], "the application runs on"
  end

  # Told from the VM, not the environment: a launcher that cleans the
  # environment before Sonde loads used to get Sonde running under M:N
  # threads (50 threads merged into 1-2, 50-455 s of CPU in 10 s).
  def test_m_n_threads_are_refused_when_the_variable_is_gone_by_the_time_sonde_loads
    skip "M:N threads exist from Ruby 3.3 on" unless Sonde::Platform.backend == :public_api

    stdout, stderr, status = run_ruby("-e", <<~RUBY, env: { "RUBY_MN_THREADS" => "1" })
      ENV.delete("RUBY_MN_THREADS")
      require "sonde"
      puts Sonde.supported?
      puts Sonde.unsupported_reason
      begin
        Sonde.start
      rescue Sonde::UnsupportedError => e
        puts "raised \#{e.class}"
      end
    RUBY
    assert_succeeded status, stderr
    lines = stdout.lines.map(&:chomp)
    assert_equal "false", lines[0]
    assert_match(/M:N threads \(RUBY_MN_THREADS=1\): Ruby threads share native threads in this process \(at load, 5 live threads ran on [1-4]\)/,
                 lines[1])
    assert_equal "raised Sonde::UnsupportedError", lines[2]
  end

  def test_m_n_threads_off_is_profiled
    skip "M:N threads exist from Ruby 3.3 on" unless Sonde::Platform.backend == :public_api

    stdout, stderr, status = run_ruby("-e", <<~RUBY, env: { "RUBY_MN_THREADS" => "0" })
      require "sonde"
      puts Sonde.supported?
    RUBY
    assert_succeeded status, stderr
    assert_equal "true", stdout.strip
  end
end
