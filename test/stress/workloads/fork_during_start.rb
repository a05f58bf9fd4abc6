# frozen_string_literal: true

# Forks while another thread is inside Sonde.start or Sonde.stop (both let
# other threads run while they wait for Sonde's threads), for
# test/stress/fork_storm_test.rb.
#
#   ruby fork_during_start.rb CHILDREN [continuous]
#
# One thread starts and stops Sonde over and over (in continuous mode,
# exporting to the directory DIR from the environment, with "continuous")
# while the main thread forks CHILDREN children back to back. A child in
# which Sonde is active must be sampling (restarted by the fork hook) and,
# in continuous mode, have a flusher; a child forked during a stop stays
# stopped. Prints one JSON line: counts of what the children saw.
require "json"
require "sonde"

CHILDREN = Integer(ARGV.fetch(0))
CONTINUOUS = ARGV[1] == "continuous"

Sonde.supported? || abort(Sonde.unsupported_reason) # loads the core before any fork
options = { rate: 1000 }
options.merge!(continuous: true, every: 3600, export: "dir:#{ENV.fetch("DIR")}") if CONTINUOUS
done = false
cycles = 0
starter = Thread.new do
  until done
    Sonde.start(**options)
    Sonde.stop
    cycles += 1
  end
end

reader, writer = IO.pipe
children = 0
while children < CHILDREN
  pid = fork do
    reader.close
    seen = if !Sonde::Native.active?
             "inactive"
           elsif !Sonde.running?
             "active but not sampling"
           elsif CONTINUOUS && Sonde.threads.none? { |t| t.name == "sonde-flusher" }
             "sampling without a flusher"
           else
             "sampling"
           end
    writer.puts(seen)
    Sonde.stop if Sonde::Native.active?
    exit!(0)
  end
  Process.wait(pid)
  children += 1
end
done = true
starter.join
writer.close
puts JSON.generate(children: children, cycles: cycles, seen: reader.each_line.map(&:chomp).tally)
