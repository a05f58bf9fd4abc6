# frozen_string_literal: true

# alloc: allocation-heavy (strings, arrays and hashes built and dropped), so
# the GC runs many times a second. A profiler must not allocate in GC and
# must not make it slower; this measures how it fares.
require_relative "../support/workload"

FULL_SIZE_BATCHES = 1_500
RECORDS_PER_BATCH = 400

def build_batch(seed)
  Array.new(RECORDS_PER_BATCH) do |i|
    { id: seed + i, name: "record-#{seed}-#{i}", tags: ["t#{i % 7}", "u#{i % 11}"], score: (seed * i) % 977 }
  end
end

def summarize(batch)
  batch.group_by { |record| record[:tags].first }.transform_values { |records| records.sum { |r| r[:score] } }
end

SondeBench::Workload.measure("alloc") do
  kept = []
  SondeBench::Workload.each_round(FULL_SIZE_BATCHES) do |n|
    summary = summarize(build_batch(n))
    kept << summary if (n % 100).zero?
  end
  { threads: 1, kept: kept.size }
end
