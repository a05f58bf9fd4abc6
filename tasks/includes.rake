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
  puts "include cycles: none but the allowed #{allowed.join(", ")} (issue 25)"
end
