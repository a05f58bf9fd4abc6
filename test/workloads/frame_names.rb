# frozen_string_literal: true

# Names a profile gives frames, next to the names Ruby's own backtraces
# give the same code. Hot spots: Kernel#is_a? in a loop; two blocks of one
# method (Names::Hot#two_blocks, lines FIRST_BLOCK_LINE and SECOND_BLOCK_LINE);
# a method of a module that has a module prepended (Names::Mixin#mixed), which
# Ruby 3.3 named as a singleton method. Writes the profile to ARGV[0] and
# prints one JSON line: each hot spot's backtrace label and line, and
# Kernel's ancestors before and after Sonde loaded.
require "json"

ancestors_before = Kernel.ancestors.map(&:to_s)
require "sonde"

module Names
  LABELS = {}

  def self.label_here(key)
    LABELS[key] ||= caller_locations(1, 1).first.then { |here| { "label" => here.label, "line" => here.lineno } }
  end

  module Mixin
    def mixed(rounds)
      Names.label_here("mixed")
      x = 0
      rounds.times { x += 1 if x.is_a?(Integer) }
      x
    end
  end
  Mixin.prepend(Module.new)

  class Hot
    include Mixin

    def two_blocks(rounds)
      x = 0
      rounds.times do # FIRST_BLOCK
        Names.label_here("first_block")
        x += 1 if x.is_a?(Integer)
      end
      rounds.times do # SECOND_BLOCK
        Names.label_here("second_block")
        x += 1 if x.is_a?(String)
      end
      x
    end
  end
end

hot = Names::Hot.new
profile = Sonde.profile(rate: 250) do
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV.fetch(1, "1.0"))
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    hot.two_blocks(20_000)
    hot.mixed(20_000)
  end
end
profile.write(ARGV.fetch(0))
source = File.readlines(__FILE__)
puts JSON.generate(
  "labels" => Names::LABELS,
  "first_block_line" => source.index { |line| line.include?("# FIRST_BLOCK\n") } + 1,
  "second_block_line" => source.index { |line| line.include?("# SECOND_BLOCK\n") } + 1,
  "kernel_ancestors_before" => ancestors_before,
  "kernel_ancestors_after" => Kernel.ancestors.map(&:to_s),
  "file" => __FILE__
)
