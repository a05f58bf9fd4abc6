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
require_relative "../support/workload"
require_relative "json_document"

FULL_SIZE_PARSES = 10

source = document
SondeBench::Workload.measure("json_parse") do
  totals = Hash.new(0)
  parses = SondeBench::Workload.each_round(FULL_SIZE_PARSES) { summarize(JSON.parse(source), totals) }
  { threads: 1, document_bytes: source.bytesize, parses: parses, name_bytes: totals[:name_bytes],
    active: totals[:active] }
end
