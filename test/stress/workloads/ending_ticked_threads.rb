# frozen_string_literal: true

# Threads that end while the trigger ticks them, for
# test/stress/ending_ticked_threads_test.rb: twenty threads asleep, a
# thread napping (0.4 s), and 200 threads born at once, each queued for
# the GVL, summing a little, and ending, under Sonde at 100 Hz. Each tick
# signals the GVL holder as read a moment before; many of them have ended
# by then. Exits 0 and prints the threads Sonde saw end: by their end hook,
# or (3.3+) by their EXITED for those no pass met.
require "sonde"

Sonde.start(rate: 100)
idle = Array.new(20) { |i| Thread.new { Thread.current.name = "idle-#{i}"; sleep } }
Thread.pass until idle.all? { |thread| thread.status == "sleep" }
napper = Thread.new { 2.times { sleep(0.2) } }
born = Array.new(200) do
  Thread.new do
    sum = 0
    2_000.times { |i| sum += i }
    sum
  end
end
born.each(&:join)
napper.join
stats = Sonde.stop.stats
idle.each(&:kill)
puts stats[:threads_ended] + stats.fetch(:unmet_ended_threads, 0)
