# frozen_string_literal: true

require_relative "support/test_helper"

# docs/stats.md's table is the documentation of Sonde.stats (sonde.rb
# points to it): every key Sonde.stats returns is in the table, and every
# key in the table is returned, so neither can drift from the other.
class StatsDocTest < Minitest::Test
  include SondeTestHelper

  STATS_PAGE = File.join(ROOT, "docs", "stats.md")

  # The keys the table names: `a`, `b` cells; `prefix_min`, `_avg` stands
  # for prefix_min and prefix_avg.
  def documented_keys
    File.read(STATS_PAGE).scan(/^\| ((?:`[^`]+`(?:, )?)+) \|/).flat_map do |(cell)|
      names = cell.scan(/`([^`]+)`/).flatten
      prefix = names.first.sub(/_[a-z]+\z/, "")
      names.map { |name| name.start_with?("_") ? "#{prefix}#{name}" : name }
    end.map(&:to_sym)
  end

  def test_every_stat_is_documented_and_every_documented_stat_exists
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, export: "dir:#{dir}", rate: 200)
      Thread.new { 20_000.times { |i| i.to_s } }.join
      running = Sonde.stats.keys
      Sonde.stop
      stopped = Sonde.stats.keys
      returned = (running + stopped).uniq
      documented = documented_keys
      assert_empty returned - documented, "Sonde.stats returns keys docs/stats.md does not list"
      assert_empty documented - returned, "docs/stats.md lists keys Sonde.stats does not return"
    end
  end
end
