# frozen_string_literal: true

# The thread_starts workload in one process, in slices: each round runs one
# slice of threads started and joined one after another with no profiler
# (twice: "none (A/A)" is the noise), one under Sonde, one under
# StackProf's cpu mode, and one beside a native thread of the process's own
# that only sleeps, in a shuffled order; each profiler started just before
# its slice and stopped just after.
#
# Why in one process: the same program's CPU per thread moves by 20-40%
# from one process to the next here, more than the 10% being measured;
# slices of one process share the heap, the loaded code and the moment of
# the machine. And why not perf: perf's cpu-clock sampling gives a thread
# its own period counter, so a thread that ends before one period of CPU
# (a thread of this workload lives about 50 us, the period at 4,000 Hz is
# 250 us) is never sampled; on Ruby 3.3+, where every Ruby thread is a new
# native thread, perf saw a fifth of the process's CPU.
#
# The sleeping thread (pthread_create on libc's sleep, through Fiddle) is
# the cost of one more native thread in the process that Ruby does not
# know, whoever owns it: Sonde's trigger is one. The sleeping Ruby thread
# (Thread.new { sleep }) is the cost of one more Ruby thread that waits:
# Sonde's idle helper is one. Both sleep almost always. (A C program's
# thread creation, timed the same way here, does not move with either
# kind of sleeping thread beside it: the cost is in Ruby's handling.)
# "sonde, no signals" (signals: false) runs without CPU timers and so
# without the thread-begin and thread-end hooks that come with them: what
# is left is the GVL hooks and the thread registry (3.3+), and the
# difference from "sonde" is what those two hooks cost a thread (3.3+ has
# no begin hook, and its end hook does nothing for a thread no pass met:
# that one is counted at its EXITED GVL event, in both modes).
#
#   ruby bench/thread_start_in_process.rb ROUNDS THREADS_PER_SLICE RATE
#
# Prints one JSON line: {"slices" => {kind => [process CPU us per thread,
# ...]}} (one per round), and how many threads Sonde's thread-end hook
# saw (none fails the run: its hooks were not there to be measured).
require "json"
require "sonde"
require "stackprof"
require_relative "support/workload"

# The native thread, made and ended through libc: it runs sleep() until
# cancelled (sleep is a cancellation point).
class SleepingNativeThread
  def self.available?
    require "fiddle"
    true
  rescue LoadError
    false
  end

  def initialize
    libc = Fiddle.dlopen(nil)
    pointer = Fiddle::TYPE_VOIDP
    @create = Fiddle::Function.new(libc["pthread_create"], [pointer, pointer, pointer, pointer], Fiddle::TYPE_INT)
    @cancel = Fiddle::Function.new(libc["pthread_cancel"], [Fiddle::TYPE_UINTPTR_T], Fiddle::TYPE_INT)
    @join = Fiddle::Function.new(libc["pthread_join"], [Fiddle::TYPE_UINTPTR_T, pointer], Fiddle::TYPE_INT)
    @sleep = libc["sleep"]
    @handle = Fiddle::Pointer.malloc(Fiddle::SIZEOF_UINTPTR_T, Fiddle::RUBY_FREE)
  end

  SECONDS = 3600

  def start
    error = @create.call(@handle, nil, @sleep, SECONDS)
    raise "pthread_create failed: #{error}" unless error.zero?

    sleep(0.001) # asleep before the slice
  end

  def stop
    thread = @handle[0, Fiddle::SIZEOF_UINTPTR_T].unpack1("J")
    @cancel.call(thread)
    @join.call(thread, nil)
  end
end

rounds = Integer(ARGV.fetch(0))
threads = Integer(ARGV.fetch(1))
rate = Integer(ARGV.fetch(2))
kinds = ["none", "none (A/A)", "sonde", "sonde, no signals", "stackprof-cpu"]
sleeper = SleepingNativeThread.new if SleepingNativeThread.available?
kinds << "a sleeping thread" if sleeper
kinds << "a sleeping Ruby thread"
sleeping_ruby_thread = nil
process_cpu = -> { SondeBench::Workload.process_cpu }
run_slice = -> { threads.times { Thread.new { Array.new(8) { |k| k * k }.sum }.join } }
run_slice.call # warm up: Ruby's thread machinery, the heap's size
results = kinds.to_h { |kind| [kind, []] }
sonde_threads_ended = 0
random = Random.new(1)
rounds.times do
  kinds.shuffle(random: random).each do |kind|
    case kind
    when "sonde" then Sonde.start(rate: rate)
    when "sonde, no signals" then Sonde.start(rate: rate, signals: false)
    when "stackprof-cpu" then StackProf.start(mode: :cpu, interval: 1_000_000 / rate, raw: true)
    when "a sleeping thread" then sleeper.start
    when "a sleeping Ruby thread"
      sleeping_ruby_thread = Thread.new { sleep }
      Thread.pass until sleeping_ruby_thread.status == "sleep"
    end
    started = process_cpu.call
    run_slice.call
    results[kind] << (process_cpu.call - started) * 1e6 / threads
    case kind
    when "sonde"
      Sonde.stop
      stats = Sonde.stats
      sonde_threads_ended += stats.fetch(:threads_ended) + stats.fetch(:unmet_ended_threads)
    when "sonde, no signals" then Sonde.stop
    when "stackprof-cpu" then StackProf.stop
    when "a sleeping thread" then sleeper.stop
    when "a sleeping Ruby thread" then sleeping_ruby_thread.kill.join
    end
  end
end
abort "thread_start_in_process: Sonde saw no thread end" if sonde_threads_ended.zero?
puts JSON.generate(slices: results, sonde_threads_ended: sonde_threads_ended)
