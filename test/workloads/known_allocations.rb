# frozen_string_literal: true

# Allocates known numbers of objects of known classes from known methods,
# with Sonde sampling allocations (and the live heap), and prints what it
# really did as one JSON line. Usage: known_allocations.rb MODE OUT [INTERVAL]
#   counts:     1,000,000 Foo from make_foos, 250,000 Bar from make_bars, and
#               200,000 Qux/Baz from make_pattern, where every 8th object is
#               a Baz (a pattern a fixed sampling interval of 8 would alias)
#   heap:       100,000 Foo kept alive by make_survivors, 900,000 dropped by
#               make_garbage; OUT gets the profile of a flush after GC, and
#               OUT.after that of the stop, after the survivors are dropped
#   compaction: the heap mode's survivors, then GC.compact, then more survivors
#   windows:    Foo and Bar, 4 to 1, from make_foos and make_bars for 3
#               seconds, at continuous mode's alloc_duty (every other mode
#               listens at every tick, the default)
#   heap_windows: for 3 seconds, rounds of 50 Bar kept and 450 Foo dropped,
#               at continuous mode's alloc_duty; OUT gets a flush after GC
#   threads:    200,000 Foo on a thread named "allocator", 100,000 on main,
#               inside Sonde.with_labels(phase: "labelled")
#   internals:  every allocation sampled (interval 1) while code makes the
#               VM's own objects (blocks, ifuncs, method objects, call infos
#               of keyword calls made by send), with GCs between: their
#               class word is not a class
#   burst:      3 calls of String#split making 300,000 Strings each from
#               make_split: one C call, no safe point, far more samples
#               than the buffer holds at the interval given
require "json"
require "objspace"
require "sonde"

class Foo; end
class Bar; end
class Baz; end
class Qux; end

WINDOWS_SECONDS = 3.0

def make_foos(count) = count.times { Foo.new }
def make_bars(count) = count.times { Bar.new }

def make_pattern(count)
  i = 0
  while i < count
    (i % 8).zero? ? Baz.new : Qux.new
    i += 1
  end
end

def make_survivors(count) = Array.new(count) { Foo.new }
def make_survivors_of(klass, count) = Array.new(count) { klass.new }
def make_split(text) = text.split(",")
def keywords(a:, b: 2) = a + b
def make_garbage(count) = count.times { Foo.new }

mode, out, interval = ARGV
options = { alloc_interval: Integer(interval || Sonde::Options::DEFAULT_ALLOC_INTERVAL) }
options[%w[counts threads burst internals windows].include?(mode) ? :alloc : :heap] = true
# Every mode but the windows ones listens at every tick (the default), so
# that what it checks is the sampling alone; they take continuous mode's duty.
options[:alloc_duty] = Sonde::Options::CONTINUOUS_ALLOC_DUTY if %w[windows heap_windows].include?(mode)

text = "x," * 300_000 if mode == "burst"
facts = { "mode" => mode }
allocated_before = GC.stat(:total_allocated_objects)
Sonde.start(**options)
case mode
when "counts"
  make_foos(1_000_000)
  make_bars(250_000)
  make_pattern(200_000)
  facts["foo"] = 1_000_000
  facts["bar"] = 250_000
  facts["baz"] = 25_000
  facts["qux"] = 175_000
when "heap"
  survivors = make_survivors(100_000)
  make_garbage(900_000)
  GC.start
  File.binwrite(out, Sonde.flush.pprof)
  facts["survivors"] = survivors.size
  facts["foo_memsize"] = ObjectSpace.respond_to?(:memsize_of) ? ObjectSpace.memsize_of(survivors.first) : nil
  survivors = nil
  GC.start
  GC.start
  out += ".after"
when "compaction"
  survivors = make_survivors(100_000)
  GC.compact
  more = make_survivors(50_000)
  GC.start
  facts["survivors_after_compaction"] = more.size
  facts["kept"] = survivors.size
when "internals"
  20.times do
    5_000.times do |i|
      [i, i + 1].each_slice(1).map { |slice| slice.sum }.then { |x| method(:Integer).to_proc.call(x.first) }
      # A call made at run time with keywords gets a call info whose
      # class word points at the keywords' malloc'd description.
      Kernel.instance_method(:then).bind_call(i) { |n| __send__(:keywords, a: n, b: 1) }
      send(:keywords, a: i)
    end
    GC.start
  end
when "burst"
  3.times { make_split(text) }
  facts["strings"] = 900_000
when "windows"
  # Foo and Bar in step for WINDOWS_SECONDS, while the hook is on for one
  # tick in 1 / alloc_duty: whatever was not listened to is estimated.
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  rounds = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < WINDOWS_SECONDS
    make_foos(400)
    make_bars(100)
    rounds += 1
  end
  facts["foo"] = rounds * 400
  facts["bar"] = rounds * 100
when "heap_windows"
  # For WINDOWS_SECONDS, each round allocates 50 Bar it keeps and 450 Foo
  # it drops, at continuous mode's alloc_duty.
  kept = []
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  rounds = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < WINDOWS_SECONDS
    kept.concat(make_survivors_of(Bar, 50))
    make_garbage(450)
    rounds += 1
  end
  GC.start
  facts["survivors"] = kept.size
  facts["garbage"] = rounds * 450
  facts["allocated_at_flush"] = GC.stat(:total_allocated_objects) - allocated_before
  File.binwrite(out, Sonde.flush.pprof)
  out += ".after"
when "threads"
  Thread.new do
    Thread.current.name = "allocator"
    make_foos(200_000)
  end.join
  Sonde.with_labels(phase: "labelled") { make_foos(100_000) }
end
facts["stats"] = Sonde.stats.transform_keys(&:to_s)
File.binwrite(out, Sonde.stop.pprof)
facts["stats_after_stop"] = Sonde.stats.transform_keys(&:to_s)
facts["allocated"] = GC.stat(:total_allocated_objects) - allocated_before
puts JSON.generate(facts)
