# frozen_string_literal: true

# Ruby's own NEWOBJ hook (ObjectSpace.trace_object_allocations_start), no
# Sonde, while four Ractors allocate strings and the main thread makes Time
# objects, whose data runs past a slot's first 40 bytes. For
# test/stress/ractors_test.rb: on Ruby 3.4 an allocation that waits for the
# VM lock, with the hook on, lets another Ractor's GC mark the half-made
# Time (its fields still hold the bytes of the string the slot held
# before), and the VM crashes in rb_gc_mark (ruby/ruby pull request
# #14596). Why Sonde turns allocation sampling off before Ractor.new there
# (lib/sonde/ractor_guard.rb).
#
#   ruby newobj_hook_ractors.rb SECONDS
#
# Prints "done" when it ran to its end.
require "objspace"

Warning[:experimental] = false
ObjectSpace.trace_object_allocations_start
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV.fetch(0))
ractors = Array.new(4) do
  Ractor.new(deadline) do |until_time|
    kept = nil
    kept = "string #{kept.to_s.size} " * 4 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_time
    kept.size
  end
end
times = []
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  200.times { |i| times << Time.at(0, i, :nanosecond) }
  times.clear if times.size > 2_000
end
ractors.each { |ractor| ractor.respond_to?(:value) ? ractor.value : ractor.take }
puts "done"
