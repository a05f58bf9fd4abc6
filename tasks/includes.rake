# frozen_string_literal: true

require_relative "include_cycles"

desc "Fails on an include cycle among ext/sonde's modules (tasks/include_cycles.rb); run by test:c"
task "test:includes" do
  dir = File.expand_path("../ext/sonde", __dir__)
  new_cycles, gone = IncludeCycles.check(dir)
  gone.each do |cycle|
    puts "include cycles: the allowed cycle #{cycle.join(" <-> ")} is gone; remove it from IncludeCycles::ALLOWED"
  end
  abort "include cycles among ext/sonde modules:\n  #{new_cycles.join("\n  ")}" unless new_cycles.empty?
  allowed = IncludeCycles::ALLOWED.map { |cycle| cycle.join(" <-> ") }
  puts allowed.empty? ? "include cycles: none" : "include cycles: none but the allowed #{allowed.join(", ")}"
end

require_relative "state_owners"

desc "Fails when a file writes per-thread state it does not own (tasks/state_owners.rb); run by test:c"
task "test:owners" do
  dir = File.expand_path("../ext/sonde", __dir__)
  violations = StateOwners.violations(dir)
  abort "per-thread state written outside its owner:\n  #{violations.join("\n  ")}" unless violations.empty?
  raw = StateOwners.raw_atomics(dir)
  abort "atomics not through shared.h:\n  #{raw.join("\n  ")}" unless raw.empty?
  puts "state owners: thread_context written only in #{StateOwners::OWNER}, its sampling record only in " \
       "#{StateOwners::PARTS.fetch("sampling")}; atomics only through shared.h"
end
