# frozen_string_literal: true

# What a one-off profile and continuous mode's duty make of allocations.
# Usage: alloc_duty.rb MODE OUT; prints one JSON line of facts.
#   one_off: Sonde.profile(alloc: true) { 1,000,000 Foo }, at the defaults
#            (about 0.2 s: at a duty of 0.05 it would get no listened tick)
#   flushes: alloc_duty 0.01 (one tick in 100), 40 flushes about 5 ticks
#            apart while Foo are made: most periods have no listened tick,
#            and every full block of 100 ticks has one. OUT.N gets each
#            flush's profile; the facts list each one's ticks and listened
#            ticks (from its stats, cumulative, so by difference)
require "json"
require "sonde"

class Foo; end

def make_foos(count) = count.times { Foo.new }

mode, out = ARGV
facts = { "mode" => mode }
case mode
when "one_off"
  before = GC.stat(:total_allocated_objects)
  profile = Sonde.profile(alloc: true) { make_foos(1_000_000) }
  facts["allocated"] = GC.stat(:total_allocated_objects) - before
  facts["alloc_duty"] = profile.stats[:alloc_duty]
  File.binwrite(out, profile.pprof)
when "flushes"
  Sonde.start(alloc: true, alloc_duty: 0.01, rate: 100)
  previous = { alloc_ticks: 0, alloc_listened_ticks: 0 }
  facts["periods"] = Array.new(40) do |n|
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.05
    make_foos(500) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    profile = n == 39 ? Sonde.stop : Sonde.flush
    File.binwrite("#{out}.#{n}", profile.pprof)
    stats = profile.stats
    period = { "ticks" => stats[:alloc_ticks] - previous[:alloc_ticks],
               "listened" => stats[:alloc_listened_ticks] - previous[:alloc_listened_ticks] }
    previous = stats
    period
  end
else
  abort "alloc_duty.rb: MODE must be one_off or flushes, got #{mode.inspect}"
end
puts JSON.generate(facts)
