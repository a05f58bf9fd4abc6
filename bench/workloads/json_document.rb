# frozen_string_literal: true

# The json_parse workload's document (about 3 MB, from a seeded Random:
# every run parses the same bytes) and what its code reads off each parse;
# shared by bench/workloads/json_parse.rb (one process per run) and
# bench/alloc_in_process.rb (slices in one process).
require "json"

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

