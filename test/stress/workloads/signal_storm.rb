# frozen_string_literal: true

# Every place a SIGPROF can land, at 1000 Hz, for SECONDS: threads that
# allocate and make the GC run (GC.start, and GC.compact where Ruby has it,
# which moves the objects frames point at), a thread in C code without the
# GVL (its CPU timer fires while a GC runs on another thread: the test-only
# extension test/support/cpu_burner.c, whose directory is the first
# argument; Ruby 3.1's zlib crashes under GC.compact on its own), threads born
# and killed all the time, and the main thread in one long C call that
# holds the GVL (no safe point: the CPU samples its timer captures cannot
# be recorded until it returns, so the capture buffer fills and counts its
# drops). Prints one JSON line: Sonde's stats and what the profile holds.
require "json"
require "sonde"
require "sonde/pprof"

$LOAD_PATH.unshift(ARGV.fetch(0))
require "cpu_burner"

SECONDS = Float(ARGV.fetch(1, "3"))
out = ARGV.fetch(2)

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

Sonde.start(rate: 1000)
stop = false
workers = []
workers << Thread.new do
  Thread.current.name = "allocator"
  kept = []
  until stop
    kept << Array.new(16) { "x" * 64 }
    kept.clear if kept.size > 5_000
    Thread.pass if kept.size % 100 == 0
  end
end
workers << Thread.new do
  Thread.current.name = "collector"
  until stop
    GC.start
    GC.compact if GC.respond_to?(:compact) && rand < 0.2
    sleep 0.005
  end
end
workers << Thread.new do
  Thread.current.name = "burner without the GVL"
  CpuBurner.without_gvl(0.05) until stop
end

born = 0
deadline = monotonic + SECONDS
long_call_done = false
while monotonic < deadline
  batch = Array.new(10) do |i|
    born += 1
    Thread.new(i) do |n|
      n.even? ? 2_000.times { |k| k * k } : sleep
    end
  end
  sleep 0.002
  batch.each(&:kill).each(&:join)
  next if long_call_done

  # 1.5 s of CPU in one C call holding the GVL: at the kernel's 250 Hz
  # some 375 CPU samples of this thread alone, three times what the
  # capture buffer holds (Bignum#to_s of 7**6_000_000, used before, took
  # 0.7-1 s and once filled it without a drop).
  CpuBurner.holding_gvl(1.5)
  long_call_done = true
end
stop = true
workers.each(&:join)
profile = Sonde.stop
profile.write(out)
decoded = profile.decode
names = decoded.samples.flat_map { |s| decoded.frames(s).map { |function, _| function.name } }.uniq
puts JSON.generate(stats: profile.stats, threads_born: born, functions: names.size,
                   gc_frames: names.include?("Garbage Collection"),
                   long_call: names.include?("CpuBurner.holding_gvl"),
                   without_gvl: names.include?("CpuBurner.without_gvl"))
