# frozen_string_literal: true

require "minitest/autorun"
require "sonde/quantities"

# Values as the report and the flame graph page show them, by unit.
class QuantitiesTest < Minitest::Test
  def test_durations
    {
      0 => "0 ns", 999 => "999 ns", 1_500 => "1.50 µs", 153_000 => "153 µs", 999_999 => "1.00 ms",
      15_240_000 => "15.2 ms", 2_030_000_000 => "2.03 s", 125_000_000_000 => "125 s"
    }.each { |ns, text| assert_equal text, Sonde::Quantities.duration(ns), "#{ns} ns" }
  end

  # Powers of 1024, as go tool pprof and speedscope show sizes.
  def test_bytes
    {
      0 => "0 B", 1023 => "1023 B", 1024 => "1.00 KB", 1536 => "1.50 KB", 153_600 => "150 KB",
      1_048_575 => "1.00 MB", 48 << 20 => "48.0 MB", (5 << 30) + (1 << 29) => "5.50 GB", 3 << 40 => "3.00 TB"
    }.each { |size, text| assert_equal text, Sonde::Quantities.bytes(size), "#{size} bytes" }
  end

  def test_counts
    { 0 => "0", 999 => "999", 1_000 => "1,000", 1_000_000 => "1,000,000", -1_234 => "-1,234", 2.6 => "3" }
      .each { |number, text| assert_equal text, Sonde::Quantities.count(number), number.to_s }
  end

  # A unit Sonde does not write (a profile from elsewhere) reads as plain numbers.
  def test_format_by_unit
    assert_equal "15.2 ms", Sonde::Quantities.format(15_240_000, "nanoseconds")
    assert_equal "48.0 MB", Sonde::Quantities.format(48 << 20, "bytes")
    assert_equal "1,000,000", Sonde::Quantities.format(1_000_000, "count")
    assert_equal "1,500", Sonde::Quantities.format(1_500, "microseconds")
    assert_equal %i[duration bytes count count], %w[nanoseconds bytes count objects].map { |unit| Sonde::Quantities.kind(unit) }
  end
end
