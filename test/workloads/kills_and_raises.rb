# frozen_string_literal: true

# Thread#kill and Thread#raise aimed at threads while Sonde samples (at
# 1000 Hz unless told), many of them landing as the thread starts (when
# Sonde's thread-begin hook runs) or in the middle of a sampling pass. Each must be delivered
# exactly as without Sonde: every killed thread ends, every raised-into
# thread rescues its exception. Prints counts; a lost kill shows as a thread
# still alive after its join times out.
require "json"
require "sonde"

COUNT = Integer(ARGV.fetch(0, "1000"))
RATE = Integer(ARGV.fetch(1, "1000"))
JOIN_TIMEOUT = 5

class Delivered < StandardError; end

def spin(n)
  x = 0
  n.times { |i| x += i * i }
  x
end

Sonde.start(rate: RATE)
survivors = 0
rescued = Queue.new
COUNT.times do |i|
  # One queue per thread: a killed thread may still say it started after
  # the kill was sent, and that must not stand for the next thread's start.
  started = Queue.new
  thread = Thread.new do
    begin
      started << true
      i.even? ? sleep : loop { spin(1_000) }
    rescue Delivered
      rescued << i
    end
  end
  started.pop if i.odd? # a raise is delivered inside the begin: counted there
  # Kills go to half the threads at once (often still starting) and half
  # once they run; raises only once the thread is inside its begin/rescue.
  started.pop if i.even? && i % 4 == 2
  if i % 2 == 0
    thread.kill
  else
    thread.raise(Delivered)
  end
  survivors += 1 unless thread.join(JOIN_TIMEOUT)
end
stats = Sonde.stop.stats
puts JSON.generate(count: COUNT, survivors: survivors, rescued: rescued.size,
                   samples: stats[:samples], cpu_signals: stats[:cpu_signals])
