# frozen_string_literal: true

# EINTR under sampling at 1000 Hz, for test/stress/eintr_test.rb. Needs
# eintr_probe (test/support/eintr_probe.c) on the load path.
#
#   ruby eintr.rb c SIGNALS SECONDS     blocking system calls made by C code
#                                       that holds the GVL: how many EINTRs
#                                       each saw (poll, select, nanosleep,
#                                       read on a pipe, accept on a socket)
#   ruby eintr.rb ruby SIGNALS SECONDS  Ruby's own blocking calls, each in a
#                                       loop for SECONDS while a thread
#                                       burns CPU: how many Errno::EINTR
#                                       reached the application (must be 0)
#   ruby eintr.rb storm signals SECONDS the same calls while a C thread also
#                                       sends SIGPROF to the calling thread
#                                       at 2000 Hz, so that nearly every call
#                                       is interrupted inside its syscall
#
# SIGNALS is "signals" or "nosignals". Prints one JSON line.
require "json"
require "socket"
require "sonde"
require "eintr_probe"
require_relative "clock_helpers"

PART = ARGV.fetch(0)
SIGNALS = ARGV.fetch(1) == "signals"
SECONDS = Float(ARGV.fetch(2))

# Runs the block in a loop for SECONDS; counts the calls and the
# Errno::EINTR that got through. Anything else raised fails the run.
def hammer(results, name)
  eintr = 0
  calls = 0
  before = Sonde.stats
  deadline = monotonic + SECONDS
  while monotonic < deadline
    begin
      yield
      calls += 1
    rescue Errno::EINTR
      eintr += 1
    end
  end
  after = Sonde.stats
  results[name] = { calls: calls, eintr: eintr, signals_sent: after[:signals_sent] - before[:signals_sent],
                    wrong_thread_signals: after[:wrong_thread_signals] - before[:wrong_thread_signals] }
end

# A helper thread that calls the block every `every` seconds until stopped.
def ticker(every)
  stop = false
  thread = Thread.new do
    until stop
      sleep every
      yield
    end
  end
  -> { (stop = true) && thread.join }
end

def ruby_calls(results)
  reader, writer = IO.pipe
  stop_writer = ticker(0.0005) { writer.write("x") }
  hammer(results, "IO#read (pipe)") { reader.read(1) }
  stop_writer.call

  hammer(results, "sleep") { sleep 0.0005 }

  stop_writer = ticker(0.002) { writer.write("x") }
  hammer(results, "IO.select") { IO.select([reader], nil, nil, 0.001) && reader.read_nonblock(16, exception: false) }
  stop_writer.call
  reader.close
  writer.close

  server = TCPServer.new("127.0.0.1", 0)
  port = server.addr[1]
  stop_client = ticker(0.0005) { TCPSocket.new("127.0.0.1", port).close }
  hammer(results, "TCPServer#accept") { server.accept.close }
  stop_client.call
  server.close

  queue = Queue.new
  stop_producer = ticker(0.0005) { queue << 1 }
  hammer(results, "Queue#pop") { queue.pop }
  stop_producer.call

  mutex = Mutex.new
  holder_stop = false
  holder = Thread.new do
    until holder_stop
      mutex.synchronize { sleep 0.001 }
      Thread.pass
    end
  end
  hammer(results, "Mutex#lock") { mutex.synchronize { nil } }
  holder_stop = true
  holder.join

  condition = ConditionVariable.new
  stop_signaller = ticker(0.0005) { mutex.synchronize { condition.signal } }
  hammer(results, "ConditionVariable#wait") { mutex.synchronize { condition.wait(mutex, 0.01) } }
  stop_signaller.call
end

def c_calls(results)
  %w[poll_pipe select_pipe nanosleep_for read_pipe accept_socket].each do |call|
    before = Sonde.stats
    eintr = EintrProbe.public_send(call, SECONDS)
    results[call] = { eintr: eintr, signals_sent: Sonde.stats[:signals_sent] - before[:signals_sent] }
  end
end

# The overhead budget would stretch the interval: allow its maximum, so that
# signals come at the rate.
Sonde.start(rate: 1000, overhead_target: 20, signals: SIGNALS)
results = {}
if PART == "ruby" || PART == "storm"
  # A thread that burns CPU: the GVL changes hands all the time, so signals
  # aimed at its holder land now and then on a thread entering a blocking call.
  stop = false
  busy = Thread.new do
    x = 0
    until stop
      x += 1
      Thread.pass if (x % 2_000).zero?
    end
  end
  EintrProbe.storm_start(2000) if PART == "storm"
  ruby_calls(results)
  results["storm"] = { signals_sent: EintrProbe.storm_stop } if PART == "storm"
  stop = true
  busy.join
else
  c_calls(results)
end
stats = Sonde.stop.stats
puts JSON.generate(part: PART, signals: SIGNALS, seconds: SECONDS, results: results,
                   stats: stats.slice(:samples, :signals_sent, :signals_received, :wrong_thread_signals))
