# frozen_string_literal: true

# Allocates enough that GC runs often (minor and major), and reports the GC
# time Ruby measured itself (GC.stat(:time), milliseconds) over the same span.
require "json"
require "sonde"

out = ARGV.fetch(0)
gc = ARGV.fetch(1, "true") == "true"

def churn
  kept = []
  1_000_000.times do |i|
    kept << (("x" * 40) + i.to_s)
    kept.shift if kept.size > 60_000
  end
  3.times { GC.start }
end

# At the kernel's tick (250 Hz here): GC's share of the CPU samples is an
# estimate; churn's million strings give it 70 to 250 GC samples, where
# 300,000 gave about 20 and missed GC.stat(:time) by up to 31%.
Sonde.start(rate: 250, gc: gc)
before = GC.stat(:time)
cpu_before = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
churn
cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu_before
gc_ms = GC.stat(:time) - before
profile = Sonde.stop
profile.write(out)
puts JSON.generate(gc_ms: gc_ms, main_cpu: cpu, stats: profile.stats)
