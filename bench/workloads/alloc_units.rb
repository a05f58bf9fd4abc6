# frozen_string_literal: true

# One run of bench/alloc_instructions.rb: UNITS units of an allocation
# workload under one profiler setting, in a process of its own (run under
# cachegrind, which counts the instructions every thread executes).
#
#   ruby alloc_units.rb WORKLOAD VARIANT UNITS
#
# WORKLOAD: alloc (Object.new, a String, an Array per step: nothing but
# allocation) or json_parse (JSON.parse of the 3 MB document of
# bench/workloads/json_document.rb). VARIANT: none, sonde (time only),
# alloc, alloc-duty-1, heap, heap-duty-1 (Sonde at 100 Hz in each).
require_relative "json_document"

workload, variant, units = ARGV
units = Integer(units)
STEPS = 100_000

def alloc_unit
  i = 0
  while i < STEPS
    Object.new
    "s" * 3
    [1, 2]
    i += 1
  end
end

SOURCE = workload == "json_parse" ? document : nil

def json_unit(totals)
  summarize(JSON.parse(SOURCE), totals)
end

VARIANTS = {
  "none" => nil, "sonde" => {}, "alloc" => { alloc: true }, "alloc-duty-1" => { alloc: true, alloc_duty: 1 },
  "heap" => { heap: true }, "heap-duty-1" => { heap: true, alloc_duty: 1 }
}.freeze
options = VARIANTS.fetch(variant) { abort "variant must be one of #{VARIANTS.keys.join(", ")}, got #{variant}" }
if options
  require "sonde"
  Sonde.start(rate: 100, **options)
end
totals = Hash.new(0)
units.times { workload == "json_parse" ? json_unit(totals) : alloc_unit }
if options
  stats = Sonde.stats
  Sonde.stop
  warn "sonde stats: #{stats.select { |k, _| k.to_s.match?(/tick|pass|rate|sample/) }}"
end
