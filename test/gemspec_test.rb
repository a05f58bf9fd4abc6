# frozen_string_literal: true

require_relative "support/test_helper"
require "rubygems"

# What `gem build` packs: the license the gemspec declares, and every file
# a user's install needs (the gemspec's globs skip a file that is absent,
# so a missing one would ship silently).
class GemspecTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  def spec
    Dir.chdir(ROOT) { Gem::Specification.load("sonde.gemspec") }
  end

  def test_the_license_file_ships
    assert_equal "MIT", spec.license
    assert_includes spec.files, "LICENSE"
    assert_match(/\AMIT License\n/, File.read(File.join(ROOT, "LICENSE")))
  end

  def test_every_library_file_and_the_cli_ship
    files = spec.files
    lib = Dir.chdir(ROOT) { Dir["lib/**/*.rb"] }.reject { |f| f.start_with?("lib/sonde/native/") }
    assert_empty lib - files
    assert_includes files, "exe/sonde"
    assert_includes files, "README.md"
    spec.extensions.each { |extconf| assert_includes files, extconf }
  end
end
