# frozen_string_literal: true

# json_parse: an allocation-heavy workload that looks like real work, for
# the allocation-profiling cost benchmark (bench/alloc_cost.rb). alloc.rb
# allocates from Ruby code in a tight loop; here most objects come from a C
# extension (the json parser: a Hash, an Array or a String per JSON value,
# about 160,000 per parse) and the Ruby code that walks the result
# allocates little. A NEWOBJ hook is paid per object whoever allocates it,
# so this is where a per-allocation cost shows as it would in an API server
# decoding request bodies.
#
# The document (about 3 MB) is generated once, before the measured body,
# from a seeded Random: every run parses the same bytes.
require "json"
require_relative "../support/workload"

FULL_SIZE_PARSES = 10
RECORDS = 9_000
SEED = 42
WORDS = %w[alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa].freeze

def record(random, id)
  {
    "id" => id,
    "name" => "#{WORDS.sample(random: random)} #{WORDS.sample(random: random)}-#{id}",
    "email" => "user#{id}@example.#{%w[com org net].sample(random: random)}",
    "active" => random.rand(2).zero?,
    "score" => random.rand.round(6),
    "tags" => Array.new(random.rand(1..6)) { WORDS.sample(random: random) },
    "address" => { "street" => "#{random.rand(1..999)} #{WORDS.sample(random: random)} st",
                   "zip" => format("%05d", random.rand(100_000)), "geo" => [random.rand(-90.0..90.0).round(5),
                                                                            random.rand(-180.0..180.0).round(5)] },
    "orders" => Array.new(random.rand(0..5)) do |n|
      { "n" => n, "total" => random.rand(1_000_000) / 100.0, "items" => Array.new(random.rand(1..4)) { random.rand(1000) } }
    end
  }
end

def document
  random = Random.new(SEED)
  JSON.generate({ "version" => 1, "records" => Array.new(RECORDS) { |id| record(random, id) } })
end

# Reads what an application would read off each record (no full
# recursive walk: that is Ruby method calls, not allocation, and took longer
# than the parse itself), so the parse's allocations dominate the run.
def summarize(parsed, totals)
  parsed.fetch("records").each do |row|
    totals[row.fetch("tags").first] += row.fetch("orders").sum { |order| order.fetch("total") }
    totals[:name_bytes] += row.fetch("name").bytesize
    totals[:active] += 1 if row.fetch("active")
  end
end

source = document
SondeBench::Workload.measure("json_parse") do
  totals = Hash.new(0)
  parses = SondeBench::Workload.each_round(FULL_SIZE_PARSES) { summarize(JSON.parse(source), totals) }
  { threads: 1, document_bytes: source.bytesize, parses: parses, name_bytes: totals[:name_bytes],
    active: totals[:active] }
end
