# frozen_string_literal: true

# What allocation profiling costs, measured in one process: slices of the
# same work with no profiler and under each variant, in shuffled rounds,
# each variant started just before its slice and stopped just after, timed
# on the calling thread's own CPU clock. Separate processes (alloc_cost.rb)
# see the machine's noise (its A/A row is off by up to 24% here); slices of
# one process share the heap, the loaded code and the moment, so the
# difference between two variants is what they cost. A GC.start before each
# slice gives each the same heap to start from. Sonde samples time at 100 Hz
# in every Sonde variant, so "sonde" (time only) is the baseline of what
# alloc: adds.
#
#   ruby bench/alloc_in_process.rb [ROUNDS] [OUT.json]
#
# Workloads: alloc (Object.new, a String, an Array per step: nothing but
# allocation) and json_parse (JSON.parse of the json_parse workload's 3 MB
# document, most objects made by the C parser), each slice about half a
# second of its unit repeated. Prints a Markdown table
# (fastest slice and median per variant, each over none) and, with OUT,
# writes every slice's time as JSON. rake bench:alloc runs it on each Ruby.
require "json"
require "sonde"
require_relative "workloads/json_document"

ROUNDS = Integer(ARGV.fetch(0, "15"))
OUT = ARGV[1]
ALLOC_STEPS = 300_000

def alloc_slice
  i = 0
  while i < ALLOC_STEPS
    Object.new
    "s" * 3
    [1, 2]
    i += 1
  end
end

JSON_SOURCE = document

def json_slice
  totals = Hash.new(0)
  2.times { summarize(JSON.parse(JSON_SOURCE), totals) }
end

# A slice lasts about SLICE_SECONDS (its unit repeated, counted at warm-up):
# 50 ticks at 100 Hz, so that each listened-to variant hears its share of
# ticks in every slice (one tick in 20 at continuous mode's duty), not in one slice of
# several, which would make its fastest slice one that heard nothing.
SLICE_SECONDS = 0.5
UNITS = { "alloc" => method(:alloc_slice), "json_parse" => method(:json_slice) }.freeze
thread_cpu = -> { Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) }
WORKLOADS = UNITS.to_h do |name, unit|
  unit.call # warm up: inline caches, the heap's size
  started = thread_cpu.call
  unit.call
  repeats = [(SLICE_SECONDS / (thread_cpu.call - started)).ceil, 1].max
  [name, -> { repeats.times { unit.call } }]
end.freeze
# Continuous mode's duty (a one-off profile's default is 1, the rows after).
duty = Sonde::Options::CONTINUOUS_ALLOC_DUTY
VARIANTS = {
  "none" => nil,
  "none (A/A)" => nil,
  "sonde" => {},
  "sonde alloc (defaults: duty #{duty})" => { alloc: true, alloc_duty: duty },
  "sonde alloc duty 1" => { alloc: true, alloc_duty: 1 },
  "sonde heap (defaults)" => { heap: true, alloc_duty: duty },
  "sonde heap duty 1" => { heap: true, alloc_duty: 1 },
}.freeze

times = WORKLOADS.keys.product(VARIANTS.keys).to_h { |key| [key, []] }
listened = Hash.new { |hash, key| hash[key] = [0, 0] }
# Per slice of a listening variant: [allocations heard, allocations Ruby
# counted, seconds spent switching windows].
parts = Hash.new { |hash, key| hash[key] = [] }
allocated = -> { GC.stat(:total_allocated_objects) }
random = Random.new(1)
ROUNDS.times do
  WORKLOADS.each do |workload, slice|
    VARIANTS.to_a.shuffle(random: random).each do |variant, options|
      GC.start
      Sonde.start(rate: 100, **options) if options
      allocated_before = allocated.call
      started = thread_cpu.call
      slice.call
      times[[workload, variant]] << (thread_cpu.call - started)
      allocations = allocated.call - allocated_before
      next unless options

      stats = Sonde.stats
      Sonde.stop
      listened[[workload, variant]][0] += stats.fetch(:alloc_listened_ticks)
      listened[[workload, variant]][1] += stats.fetch(:alloc_ticks)
      next unless stats.fetch(:alloc)

      parts[[workload, variant]] << [stats.fetch(:allocations_heard), allocations, stats.fetch(:alloc_window_switch_seconds)]
    end
  end
end

median = ->(values) { values.sort[values.size / 2] }
puts "#{RUBY_DESCRIPTION}: #{ROUNDS} rounds, thread CPU per slice, each over none's"
puts
puts "| workload | variant | fastest ms | vs none | median ms | vs none | paired median (p25–p75) | ticks listened |"
puts "|---|---|---|---|---|---|---|---|"
WORKLOADS.each_key do |workload|
  base = times[[workload, "none"]]
  VARIANTS.each_key do |variant|
    own = times[[workload, variant]]
    # Each slice over the unprofiled slice of its own round: the two ran
    # within a few seconds of each other, so a slow stretch of the machine
    # weighs on both.
    ratios = own.zip(base).map { |mine, none| mine / none - 1 }.sort
    quartile = ->(q) { ratios[((ratios.size - 1) * q).round] * 100 }
    heard, ticks = listened[[workload, variant]]
    share = ticks.positive? ? format("%.1f%% of %d", 100.0 * heard / ticks, ticks) : "–"
    puts format("| %s | %s | %.1f | %+.1f%% | %.1f | %+.1f%% | %+.1f%% (%+.1f%%–%+.1f%%) | %s |", workload, variant,
                own.min * 1000, (own.min / base.min - 1) * 100, median.(own) * 1000,
                (median.(own) / median.(base) - 1) * 100, quartile.(0.5), quartile.(0.25), quartile.(0.75), share)
  end
end
# The cost at a duty from its parts, each measured with little noise: an
# allocation heard costs what it costs with the hook on all the time (the
# duty-1 variant's time over time sampling's, per allocation heard, median
# over rounds: a difference of a third to a half of the slice, far above the
# noise), and windows add the time spent switching them (Sonde's own clock).
# Estimated cost = (heard x cost per heard + switching) over none's median,
# heard and switching as means over the slices: a window of json_parse
# spans whole parses (no pass runs inside the C call), so a slice hears a
# few parses or none, and only the mean says what listening costs in time.
puts
puts "Estimated from its parts (what allocation profiling adds to time sampling; cost per heard allocation: " \
     "median over rounds; heard and switching: means over slices):"
puts
puts "| workload | variant | allocations heard per slice (share) | µs per heard allocation (from duty 1) | switching ms per slice | estimated cost |"
puts "|---|---|---|---|---|---|"
WORKLOADS.each_key do |workload|
  base = median.(times[[workload, "none"]])
  %w[alloc heap].each do |kind|
    always = VARIANTS.keys.find { |name| name.start_with?("sonde #{kind} duty 1") }
    windowed = VARIANTS.keys.find { |name| name.start_with?("sonde #{kind} (defaults") }
    per_heard = median.(times[[workload, always]].zip(times[[workload, "sonde"]], parts[[workload, always]])
                .map { |mine, sonde, (heard, _, _)| (mine - sonde) / [heard, 1].max })
    slices = parts[[workload, windowed]]
    heard = slices.sum(&:first).fdiv(slices.size)
    share = slices.sum(&:first).fdiv([slices.sum { |slice| slice[1] }, 1].max)
    switching = slices.sum(&:last) / slices.size
    estimate = (heard * per_heard + switching) / base
    puts format("| %s | %s | %.0f (%.1f%%) | %.3f | %.2f | %+.1f%% |", workload, windowed, heard, share * 100,
                per_heard * 1e6, switching * 1000, estimate * 100)
  end
end
File.write(OUT, JSON.generate(times.map { |(workload, variant), values| { workload:, variant:, seconds: values } })) if OUT
