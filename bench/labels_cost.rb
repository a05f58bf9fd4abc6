# frozen_string_literal: true

# What labels cost a Rack request, alone: runs bench/workloads/labels.rb
# (see there) and prints its table. `rake bench` runs the same workload on
# each Ruby and writes it to bench/RESULTS.md.
#
#   ruby bench/labels_cost.rb [WORK_SCALE]      (rake bench:labels; 1.0 = 100 rounds)
require "json"
require "rbconfig"
require_relative "support/workload"

scale = ARGV[0] || "1"
root = File.expand_path("..", __dir__)
output = IO.popen({ "SONDE_BENCH_SCALE" => scale }, [RbConfig.ruby, "-I", File.join(root, "lib"),
                                                      File.join(__dir__, "workloads", "labels.rb")], &:read)
abort "labels workload failed:\n#{output}" unless $?.success?

result = JSON.parse(output.lines.find { |l| l.start_with?(SondeBench::RESULT_PREFIX) }.delete_prefix(SondeBench::RESULT_PREFIX))
details = result.fetch("details")
puts "#{details["rounds"]} shuffled rounds, Sonde at #{details["rate_hz"]} Hz (#{details["cpu_samples"]} CPU samples); " \
     "CPU per request on the calling thread"
details.fetch("per_request_s").each do |app, variants|
  base = variants.fetch("no middleware")
  puts "#{app} app (#{details.dig("rows", app)} rows per response)"
  puts format("  %-30s %10s %10s %14s %14s", "", "fastest", "median", "fastest vs none", "median vs none")
  variants.each do |name, times|
    puts format("  %-30s %8.2fµs %8.2fµs %14.3f %14.3f", name, times["fastest_s"] * 1e6, times["median_s"] * 1e6,
                times["fastest_s"] / base["fastest_s"], times["median_s"] / base["median_s"])
  end
end
