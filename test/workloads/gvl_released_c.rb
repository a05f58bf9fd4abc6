# frozen_string_literal: true

# CPU time spent in C code that released the GVL. The "compressor" thread
# deflates a few megabytes again and again: Ruby's zlib runs deflate without
# the GVL (zstream_run through rb_thread_call_without_gvl), so the thread
# burns CPU while the main thread holds the GVL spinning in Ruby. Its CPU
# must show under its own Ruby stack (compress < Zlib::Deflate.deflate),
# although it never holds the GVL while it burns. Prints each thread's CPU
# clock and how many deflate calls ran.
require "json"
require "zlib"
require "sonde"

out = ARGV.fetch(0)
SECONDS = Float(ARGV.fetch(1, "2.0"))
RATE = Integer(ARGV.fetch(2, "100"))
# Text-like input: compressible, so deflate at level 9 works hard on it.
DATA = Array.new(40_000) { |i| "line #{i}: #{(i * 7919) % 104_729} the quick brown fox #{i % 97}\n" }.join

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def compress(seconds)
  started = thread_cpu
  calls = 0
  while thread_cpu - started < seconds
    Zlib::Deflate.deflate(DATA, Zlib::BEST_COMPRESSION)
    calls += 1
  end
  calls
end

def spin(seconds)
  started = thread_cpu
  x = 0
  x += 1 while thread_cpu - started < seconds
  x
end

facts = {}
main_cpu_before = nil
Sonde.profile(out: out, rate: RATE) do
  main_cpu_before = thread_cpu # building DATA took CPU before the profile started
  compressor = Thread.new do
    Thread.current.name = "compressor"
    calls = compress(SECONDS)
    facts["compressor"] = { cpu: thread_cpu, calls: calls }
  end
  spin(SECONDS)
  compressor.join
  facts["main"] = { cpu: thread_cpu - main_cpu_before }
end
puts JSON.generate(threads: facts, stats: Sonde.stats)
