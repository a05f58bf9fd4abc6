# frozen_string_literal: true

# Which pinned gem list (gems/rails-*.txt, written by script/real-stack-pin)
# this Ruby runs, and its activation: the part of `bundler/setup` this app
# needs. Bundler is left out because its lockfile holds one resolution and
# this app has two (Rails 7.2 on Ruby 3.1, Rails 8.1 on 3.3 and 3.4), and
# Debian's Bundler on 3.1 lives outside the app's GEM_PATH. Activating every
# pinned gem up front, as Bundler does, puts their lib folders ahead of
# anything else a Ruby may find first.
module ShopGems
  DIR = File.expand_path("../gems", __dir__)
  # Rails 8 asks for Ruby 3.2; 7.2 is the newest Rails that takes 3.1.
  LISTS = { "rails-7.2.txt" => ->(version) { version < Gem::Version.new("3.2") },
            "rails-8.1.txt" => ->(version) { version >= Gem::Version.new("3.2") } }.freeze

  Pin = Struct.new(:name, :version, :platform) do
    def file_name
      [name, version, platform].compact.join("-") + ".gem"
    end
  end

  module_function

  def list_path(ruby_version = RUBY_VERSION)
    version = Gem::Version.new(ruby_version)
    name, = LISTS.find { |_, fits| fits.call(version) }
    File.join(DIR, name)
  end

  def pins(path = list_path)
    File.readlines(path, chomp: true).reject { |line| line.start_with?("#") || line.strip.empty? }.map do |line|
      name, version, platform = line.split
      Pin.new(name, version, platform)
    end
  end

  def all_pins
    LISTS.keys.flat_map { |name| pins(File.join(DIR, name)) }.uniq
  end

  def activate!
    pins.each { |pin| gem pin.name, "= #{pin.version}" }
  end
end
