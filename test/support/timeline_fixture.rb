# frozen_string_literal: true

require "sonde/pprof"

# Profiles with moments (end_timestamp_ns), made in Ruby as Sonde records
# them with a timeline, for the flame graph page's timeline: per 10 ms tick
# each thread has a wall sample in its state and, while running, a CPU
# sample, on one of its few hundred stacks (as a real thread's samples
# repeat); it serves requests (an endpoint label per request) and now and
# then runs a GC (a "Garbage Collection" sample in state gc).
module TimelineFixture
  MS = 1_000_000
  TICK = 10 * MS
  ORIGIN = 1_796_000_000_000_000_000 # epoch ns
  STATES = ["running", "waiting for gvl", "sleeping", "blocked"].freeze
  TYPES = [%w[cpu-time nanoseconds], %w[cpu-samples count], %w[wall-time nanoseconds], %w[wall-samples count]].freeze
  ENDPOINTS = ["GET /users", "POST /orders", "GET /health", "GET /search"].freeze

  module_function

  # threads threads of samples_per_thread timed samples each (CPU and wall
  # together), plus one untimed allocation-like sample per thread.
  def profile(threads: 4, samples_per_thread: 10_000, functions: 300, stacks_per_thread: 200, seed: 7)
    random = Random.new(seed)
    function_table = (1..functions).to_h do |id|
      [id, Sonde::Pprof::Function.new(id: id, name: "App#{id % 23}::Handler#{id % 7}#step_#{id}",
                                      filename: "app/handlers/file_#{id % 40}.rb", start_line: id)]
    end
    gc = functions + 1
    function_table[gc] = Sonde::Pprof::Function.new(id: gc, name: "Garbage Collection", filename: "", start_line: 0)
    locations = function_table.keys.to_h { |id| [id, Sonde::Pprof::Location.new(id: id, function_id: id, line: id + 1)] }
    samples = []
    last = ORIGIN
    threads.times do |t|
      trunk = Array.new(6) { random.rand(1..functions) }
      stacks = Array.new(stacks_per_thread) do
        (trunk + Array.new(random.rand(4..20)) { |d| ((d * 13 + random.rand(0..3)) % functions) + 1 }).reverse
      end
      last = [last, thread_samples(samples, random, t, samples_per_thread, stacks, gc)].max
    end
    Sonde::Pprof::Profile.new(
      sample_types: TYPES, samples: samples, locations: locations, functions: function_table,
      time_nanos: ORIGIN, duration_nanos: last - ORIGIN, period_type: %w[wall-time nanoseconds], period: TICK,
      comments: [], default_sample_type: nil
    )
  end

  # Appends one thread's samples; returns the end of its last one.
  def thread_samples(samples, random, thread, count, stacks, gc)
    base = { "thread id" => 100 + thread, "thread name" => "worker-#{thread}" }
    at = ORIGIN
    made = 0
    state = "running"
    request = nil
    while made < count
      at += TICK
      state = STATES.sample(random: random) if random.rand < 0.05
      request = random.rand < 0.5 ? ENDPOINTS.sample(random: random) : nil if random.rand < 0.03 # one request ends
      labels = base.merge("state" => state, "end_timestamp_ns" => at)
      labels["endpoint"] = request if request
      stack = stacks.sample(random: random)
      if random.rand < 0.01
        samples << sample([gc], [0, 0, TICK, 1], labels.merge("state" => "gc"))
      else
        samples << sample(stack, [0, 0, TICK, 1], labels)
        if state == "running" && made + 1 < count
          samples << sample(stack, [TICK, 1, 0, 0], labels)
          made += 1
        end
      end
      made += 1
    end
    samples << sample(stacks.first, [0, 0, 5 * MS, 1], base) # a moment the bound dropped: untimed
    at
  end

  def sample(stack, values, labels)
    Sonde::Pprof::Sample.new(location_ids: stack, values: values, labels: labels)
  end
end
