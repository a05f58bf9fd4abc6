# frozen_string_literal: true

require "zlib"
require "sonde/pprof"
require "support/pprof_fixture"

# A small profile, built with protoc (not with Sonde's encoder), for the
# derived formats: flame graph page, collapsed stacks, speedscope.
#
# thread 1 "main":   [main@2 > work@11]           running   cpu 30 ms (3)  wall  40 ms (4)
#                    [main@2 > work@11 > helper@6] running   cpu 10 ms (1)  wall  10 ms (1)
#                    [main@3 > Kernel#sleep]       sleeping  cpu  0         wall 200 ms (20)
# thread 2 "worker": [main@4 > recurse@21 > recurse@22]
#                                                  running   cpu 50 ms (5)  wall 100 ms (10)
#                    [main@4 > recurse@21 > helper@7] waiting for gvl cpu 0  wall 10 ms (1)
module DerivedFixture
  MS = 1_000_000
  CPU = 60 * MS
  WALL = 360 * MS

  def self.bytes
    @bytes ||= build.gzip
  end

  def self.build
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    f.sample_type("cpu-samples", "count")
    f.sample_type("wall-time", "nanoseconds")
    f.sample_type("wall-samples", "count")
    main = ->(line) { f.frame("main", "app.rb", line: line, start_line: 1) }
    work = ->(line) { f.frame("work", "app.rb", line: line, start_line: 10) }
    helper = ->(line) { f.frame("helper", "lib/helper.rb", line: line, start_line: 5) }
    recurse = ->(line) { f.frame("recurse", "app.rb", line: line, start_line: 20) }
    sleep_frame = f.frame("Kernel#sleep", "", line: 0)
    t1 = { "thread id" => 1, "thread name" => "main", "state" => "running" }
    t2 = { "thread id" => 2, "thread name" => "worker", "state" => "running" }
    f.sample([work[11], main[2]], [30 * MS, 3, 40 * MS, 4], t1)
    f.sample([helper[6], work[11], main[2]], [10 * MS, 1, 10 * MS, 1], t1)
    f.sample([sleep_frame, main[3]], [0, 0, 200 * MS, 20], t1.merge("state" => "sleeping"))
    f.sample([recurse[22], recurse[21], main[4]], [50 * MS, 5, 100 * MS, 10], t2)
    f.sample([helper[7], recurse[21], main[4]], [0, 0, 10 * MS, 1], t2.merge("state" => "waiting for gvl"))
    f
  end

  def self.profile
    Sonde::Pprof.decode(bytes)
  end

  # Files that are not readable profiles, each with what the error must say.
  def self.malformed(dir)
    {
      "empty.pprof" => ["".b, /empty input/],
      "truncated.pprof" => [bytes[0, 40], /truncated gzip data/],
      "text.pprof" => ["hello, world\n", /not a pprof profile/],
      "gzip-text.pprof" => [Zlib.gzip("hello, world\n" * 10), /not a pprof profile/],
      "random.pprof" => [Random.new(1).bytes(500), /not a pprof profile/]
    }.to_h do |name, (content, message)|
      path = File.join(dir, name)
      File.binwrite(path, content)
      [path, message]
    end
  end

  # A big profile made in Ruby, as a long multi-thread run would give: 8
  # threads, thousands of distinct stacks each, deep stacks.
  def self.big_profile(threads: 8, stacks_per_thread: 2_500, functions: 400, seed: 42)
    random = Random.new(seed)
    function_table = (1..functions).to_h do |id|
      [id, Sonde::Pprof::Function.new(id: id, name: "Module#{id % 37}::Class#{id % 11}#method_#{id}",
                                      filename: "app/models/file_#{id % 50}.rb", start_line: id)]
    end
    locations = (1..functions).to_h { |id| [id, Sonde::Pprof::Location.new(id: id, function_id: id, line: id + 1)] }
    states = ["running", "waiting for gvl", "sleeping", "blocked"]
    samples = []
    threads.times do |t|
      trunk = Array.new(8) { random.rand(1..functions) }
      stacks_per_thread.times do
        depth = random.rand(5..40)
        # Few choices per depth, as real call trees branch: many frames wide enough to draw.
        stack = trunk + Array.new(depth) { |d| ((d * 10 + random.rand(0..3)) % functions) + 1 }
        cpu = random.rand(0..20) * 10 * MS
        samples << Sonde::Pprof::Sample.new(
          location_ids: stack.reverse, values: [cpu, cpu / (10 * MS), cpu + random.rand(1..5) * 10 * MS, 1],
          labels: { "thread id" => 1000 + t, "thread name" => "worker-#{t}", "state" => states.sample(random: random) }
        )
      end
    end
    Sonde::Pprof::Profile.new(
      sample_types: [%w[cpu-time nanoseconds], %w[cpu-samples count], %w[wall-time nanoseconds], %w[wall-samples count]],
      samples: samples, locations: locations, functions: function_table, time_nanos: 0, duration_nanos: 60 * 1_000_000_000,
      period_type: %w[wall-time nanoseconds], period: 10 * MS, comments: [], default_sample_type: nil
    )
  end
end
