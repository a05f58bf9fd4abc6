# frozen_string_literal: true

require "sonde/pprof"
require "support/pprof_fixture"

# A profile with allocation and heap samples beside CPU and wall ones, built
# with protoc (not with Sonde's encoder), for every view: the report, the
# flame graph page, collapsed stacks and speedscope. Sample types, in order:
# cpu-time, cpu-samples, wall-time, alloc-samples, heap-live-samples,
# heap-live-size. Every sample is "running".
#
# thread 1 "main":   [main@2 > work@11]                cpu 30 ms (3)  wall 40 ms
#                    [main@3 > make_foos@21]           Foo    alloc 1,000,000  live 200,000  48 MB
#                    [main@3 > make_foos@22 > format_name@41]
#                                                      String alloc   600,000  live       0   0
# thread 2 "worker": [main@4 > recurse@31]             cpu 50 ms (5)  wall 100 ms
#                    [main@4 > recurse@31 > make_bars@51]
#                                                      Bar    alloc   300,000  live 100,000  16 MB
#                    [main@4 > recurse@31 > make_bars@52]
#                                                      (VM internal) alloc 100,000  live 0   0
#
# Allocations (2,000,000): self make_foos 1,000,000, format_name 600,000,
#   make_bars 400,000; total main 2,000,000, make_foos 1,600,000, recurse 400,000.
# Live heap (64 MB in 300,000 objects): self make_foos 48 MB, make_bars 16 MB;
#   total main 64 MB, recurse 16 MB.
#
# with_unscaled: the same with alloc-samples-unscaled after alloc-samples,
# as Sonde writes it: the allocation samples rest on 40 (Foo), 20
# (String), 12 (Bar) and 3 ((VM internal)) samples, 75 in all, 60 on main.
module AllocationFixture
  MS = 1_000_000
  MB = 1 << 20
  TYPES = [%w[cpu-time nanoseconds], %w[cpu-samples count], %w[wall-time nanoseconds], %w[alloc-samples count],
           %w[heap-live-samples count], %w[heap-live-size bytes]].freeze

  UNSCALED = %w[alloc-samples-unscaled count].freeze

  def self.bytes
    @bytes ||= build.gzip
  end

  def self.profile
    Sonde::Pprof.decode(bytes)
  end

  # times: each sample's unscaled count multiplied (10: 750 in all).
  def self.with_unscaled(times = 1)
    (@with_unscaled ||= {})[times] ||= Sonde::Pprof.decode(build(unscaled: times).gzip)
  end

  # unscaled: nil, or the multiplier of the unscaled counts.
  def self.build(unscaled: nil)
    f = PprofFixture::Builder.new
    types = unscaled ? TYPES.dup.insert(4, UNSCALED) : TYPES
    types.each { |type, unit| f.sample_type(type, unit) }
    # values: cpu-time .. heap-live-size as in TYPES; the unscaled count goes after alloc-samples.
    sample = lambda do |frames, values, labels, draws = 0|
      f.sample(frames, unscaled ? values.dup.insert(4, draws * unscaled) : values, labels)
    end
    main = ->(line) { f.frame("main", "app.rb", line: line, start_line: 1) }
    work = f.frame("work", "app.rb", line: 11, start_line: 10)
    make_foos = ->(line) { f.frame("make_foos", "app/foo.rb", line: line, start_line: 20) }
    format_name = f.frame("format_name", "app/foo.rb", line: 41, start_line: 40)
    recurse = f.frame("recurse", "app.rb", line: 31, start_line: 30)
    make_bars = ->(line) { f.frame("make_bars", "app/bar.rb", line: line, start_line: 50) }
    t1 = { "thread id" => 1, "thread name" => "main", "state" => "running" }
    t2 = { "thread id" => 2, "thread name" => "worker", "state" => "running" }
    allocated = ->(thread, name) { thread.merge("allocation class" => name) }
    sample.call([work, main[2]], [30 * MS, 3, 40 * MS, 0, 0, 0], t1)
    sample.call([make_foos[21], main[3]], [0, 0, 0, 1_000_000, 200_000, 48 * MB], allocated[t1, "Foo"], 40)
    sample.call([format_name, make_foos[22], main[3]], [0, 0, 0, 600_000, 0, 0], allocated[t1, "String"], 20)
    sample.call([recurse, main[4]], [50 * MS, 5, 100 * MS, 0, 0, 0], t2)
    sample.call([make_bars[51], recurse, main[4]], [0, 0, 0, 300_000, 100_000, 16 * MB], allocated[t2, "Bar"], 12)
    sample.call([make_bars[52], recurse, main[4]], [0, 0, 0, 100_000, 0, 0], allocated[t2, "(VM internal)"], 3)
    f
  end
end
