# frozen_string_literal: true

require_relative "support/test_helper"
require "sonde/exporters"

# The settings tables are the one source of every option: Sonde::Options::
# SETTINGS (Sonde.start) and Sonde::Exporters::Settings::ROWS (an export
# entry's options), and the registry the one source of every exporter kind.
# Their pages document each once, with its default and its variable; every
# documented one exists; where a page gives a range, the check accepts its
# ends and refuses just past them.
class OptionsDocTest < Minitest::Test
  include SondeTestHelper

  RUBY_API = File.join(ROOT, "docs", "ruby-api.md")
  PRODUCTION = File.join(ROOT, "docs", "production.md")

  # The rows of the table under heading (a line "## heading") whose header
  # row starts with header, as arrays of cells.
  def table_rows(path, heading, header)
    section = File.read(path)[/^##+ #{Regexp.escape(heading)}\n(.*?)(?=^##+ |\z)/m, 1]
    refute_nil section, "#{path} has no section #{heading.inspect}"
    table = section.scan(/(?:^\|.*\|\n)+/).find { |lines| lines.start_with?(header) }
    refute_nil table, "#{path}'s #{heading.inspect} has no table #{header.inspect}"
    table.lines.drop(2).map { |line| line.strip.delete_prefix("| ").delete_suffix(" |").split(" | ") }
  end

  # How a page writes a default: nil and an empty Hash are "none", a
  # String in backticks.
  def shown_default(value)
    case value
    when nil then "none"
    when Hash then value.empty? ? "none" : value.to_s
    when String then "`#{value}`"
    else value.to_s
    end
  end

  def assert_default_cell(shown, cell, what)
    assert(cell == shown || cell.start_with?("#{shown} ", "#{shown}:"),
           "#{what}: the page gives the default #{cell.inspect}, the table #{shown.inspect}")
  end

  # A cell that gives a range ("1..5000", "0.01..1", "1..100000: files ...",
  # "above 0, at most 20") states what the row's check accepts: its ends
  # pass, values just past them are refused.
  def assert_range_cell(row, cell, what)
    if (match = /\A(\d+(?:\.\d+)?)\.\.(\d+(?:\.\d+)?)\b/.match(cell))
      low, high = [match[1], match[2]].map { |text| text.include?(".") ? Float(text) : Integer(text, 10) }
      step = [low, high].any?(Float) ? 0.001 : 1
      accepted = [low, high]
      refused = [low - step, high + step]
    elsif (match = /\Aabove (\d+), at most (\d+)\b/.match(cell))
      low, high = Integer(match[1], 10), Integer(match[2], 10)
      accepted = [high, low + 0.001]
      refused = [low, high + 0.001]
    elsif cell == "true, false"
      accepted = [true, false]
      refused = ["true", 1]
    else
      return
    end
    accepted.each { |value| refute row.check(value).equal?(Sonde::Setting::REFUSED), "#{what}: #{value} is refused, #{cell.inspect} says" }
    refused.each { |value| assert row.check(value).equal?(Sonde::Setting::REFUSED), "#{what}: #{value.inspect} is accepted, #{cell.inspect} says not" }
  end

  def test_every_option_is_documented_once_with_its_default_and_variable
    rows = table_rows(RUBY_API, "Options", "| option | variable | default |")
    documented = rows.map { |cells| cells.first[/\A`(\w+):`\z/, 1]&.to_sym }
    assert_empty documented.select(&:nil?), "a row of the Options table does not name one option as `name:`"
    duplicates = documented.tally.select { |_, count| count > 1 }.keys
    assert_empty duplicates, "options documented twice"
    settings = Sonde::Options::SETTINGS.map(&:name)
    assert_empty settings - documented, "options in Sonde::Options::SETTINGS that docs/ruby-api.md does not document"
    assert_empty documented - settings, "options docs/ruby-api.md documents that Sonde::Options::SETTINGS lacks"

    rows.each do |name, variable, default, accepted, _meaning|
      setting = Sonde::Options::BY_NAME.fetch(name[/\w+/].to_sym)
      assert_default_cell(shown_default(setting.default), default, name)
      if setting.variable
        assert_includes variable, "`#{setting.variable}", "#{name}: its variable"
      else
        refute_match(/SONDE_/, variable, "#{name} has no variable")
      end
      assert_range_cell(setting, accepted, name)
    end
    alloc_duty = rows.find { |cells| cells.first == "`alloc_duty:`" }
    assert_includes alloc_duty[2], "`continuous: true`: #{Sonde::Options::CONTINUOUS_ALLOC_DUTY}"
  end

  def test_every_exporter_option_is_documented_once_with_its_default_and_exporters
    rows = table_rows(PRODUCTION, "Exporters", "| option | exporters | default |")
    documented = rows.map { |cells| cells.first[/\A`(\w+)`\z/, 1]&.to_sym }
    assert_empty documented.select(&:nil?), "a row of the exporter options table does not name one option"
    assert_equal documented.uniq, documented, "exporter options documented twice"
    names = Sonde::Exporters::Settings::ROWS.map(&:name)
    assert_empty names - documented, "exporter options docs/production.md does not document"
    assert_empty documented - names, "exporter options docs/production.md documents that do not exist"

    kinds = Sonde::Exporters::Registry.kinds
    rows.each do |name, exporters, default, accepted|
      row = Sonde::Exporters::Settings::BY_NAME.fetch(name.delete("`").to_sym)
      assert_default_cell(shown_default(row.default), default, name)
      taking = kinds.select { |kind| Sonde::Exporters.option_names(Sonde::Exporters::Registry.fetch(kind)).include?(row.name) }
      expected = taking == kinds ? "all" : taking.join(", ")
      assert_equal expected, exporters, "#{name}: the exporters that take it"
      assert_range_cell(row, accepted, name)
    end
  end

  def test_every_exporter_kind_is_documented_and_every_documented_one_exists
    section = File.read(PRODUCTION)[/^## Exporters\n(.*?)(?=^## )/m, 1]
    documented = section.scan(/^\| `(\w+):[A-Z]+` \|/).flatten
    assert_equal Sonde::Exporters::Registry.kinds.sort, documented.sort
  end

  # lib/sonde.rb points at the table instead of keeping a list of its own.
  def test_sonde_start_keeps_no_list_of_options
    source = File.read(File.join(LIB, "sonde.rb"))
    comment = source[/((?:^ *#.*\n)+) *def start\(/, 1]
    refute_nil comment, "Sonde.start has no comment"
    listed = comment.scan(/^ *#\s+(\w+):/).flatten.map(&:to_sym) & Sonde::Options::SETTINGS.map(&:name)
    assert_empty listed, "Sonde.start's comment lists options; docs/ruby-api.md is their one page"
  end
end
