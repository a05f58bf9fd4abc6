# frozen_string_literal: true

require_relative "support/test_helper"

# Ruby 3.3's M:N threads (RUBY_MN_THREADS=1) share native threads between
# Ruby threads, so per-thread CPU clocks and thread ids mean nothing there:
# Sonde refuses them with a clear error, and never crashes.
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
    assert status.success?, stderr
    lines = stdout.lines.map(&:chomp)
    assert_equal "false", lines[0]
    assert_match(/M:N threads \(RUBY_MN_THREADS=1\)/, lines[1])
    assert_equal "raised Sonde::UnsupportedError", lines[2]
    assert_equal "12", lines[3], "the application runs on"
  end

  def test_m_n_threads_off_is_profiled
    skip "M:N threads exist from Ruby 3.3 on" unless Sonde::Platform.backend == :public_api

    stdout, stderr, status = run_ruby("-e", <<~RUBY, env: { "RUBY_MN_THREADS" => "0" })
      require "sonde"
      puts Sonde.supported?
    RUBY
    assert status.success?, stderr
    assert_equal "true", stdout.strip
  end
end
