# frozen_string_literal: true

# puma_worker: the shape of a Rails worker under Puma, for what one sampling
# pass costs there (issue 22 measured 108 µs a pass in a real one). Nine
# threads, every stack 80-150 frames deep; six parked (Queue#pop,
# ConditionVariable#wait, IO.select with a timeout, sleep, a blocking pipe
# read, Thread#join: the main thread), three serving short requests.
#
# The depth is synthesized, not booted: the frames are made of many distinct
# methods, blocks and C methods taking blocks, in the proportions of a Rails
# 7.2 request's stack under Puma (Puma's server and thread pool, about 25
# Rack middlewares of which several wrap the next in a block or in
# Mutex#synchronize/catch/Array#each, routing, ActiveSupport callbacks and
# instrumentation, the controller's action). Booting Rails in every run of
# the benchmark would cost seconds per run and tie the benchmark to the
# real-stack gem cache; what a pass costs depends on the depth, the
# distinct frames and where threads park, which this has.
#
# Runs for SONDE_BENCH_SECONDS, else a fixed number of requests.
require_relative "../support/summary"
require_relative "../support/workload"

module WorkerShape
  THREADS = 9
  BUSY_THREADS = 3
  FULL_SIZE_REQUESTS = 3_000
  WORK_STEPS = 400
  # A request's own work, then a short wait, as for its database.
  REQUEST_WAIT_S = 0.0005
  # The reactor's IO.select wakes up on its timeout (Puma's does too).
  SELECT_TIMEOUT_S = 0.2

  # How each layer passes the request on: each kind adds the frames Rails'
  # layers add (a method; a method and a block through a helper; a method,
  # a C method and a block).
  KINDS = {
    plain: "def call(env) = @inner.call(env)",
    instrument: "def call(env) = instrument { @inner.call(env) }\n  def instrument = yield",
    synchronize: "def call(env) = @lock.synchronize { @inner.call(env) }",
    catch: "def call(env) = catch(:halt) { @inner.call(env) }",
    each: "def call(env)\n    result = nil\n    [env].each { |e| result = @inner.call(e) }\n    result\n  end",
    tap: "def call(env) = env.tap { |e| break @inner.call(e) }"
  }.freeze

  # The layers of the stack, outermost first: [name, kind]. Each becomes a
  # class of its own, so every frame is a distinct method.
  LAYERS = [
    %w[PumaThreadPoolSpawn plain], %w[PumaServerProcessClient plain], %w[PumaServerHandleRequest each],
    %w[PumaRequest plain], %w[RailsEngineCall plain], %w[HostAuthorization plain], %w[SendfileMiddleware plain],
    %w[StaticFiles plain], %w[ExecutorMiddleware instrument], %w[CacheStore synchronize],
    %w[RuntimeHeader plain], %w[MethodOverride plain], %w[RequestId plain], %w[RemoteIp plain],
    %w[RailsLogger instrument], %w[ShowExceptions catch], %w[DebugExceptions plain], %w[ActionableExceptions plain],
    %w[Reloader instrument], %w[Callbacks instrument], %w[QueryCache synchronize], %w[CookiesMiddleware plain],
    %w[SessionStore plain], %w[Flash plain], %w[ContentSecurityPolicy plain], %w[PermissionsPolicy plain],
    %w[HeadMiddleware plain], %w[ConditionalGet plain], %w[ETagMiddleware plain], %w[TempfileReaper plain],
    %w[Tracing instrument], %w[Labels instrument], %w[RouteSet each], %w[Journey each], %w[RouteDispatcher plain],
    %w[ControllerDispatch plain], %w[Metal plain], %w[AbstractProcess instrument], %w[Instrumentation instrument],
    %w[Rescue catch], %w[CallbacksAround tap], %w[CallbacksChain instrument], %w[CallbacksBefore each],
    %w[ParamsWrapper plain], %w[Rendering plain], %w[BasicImplicitRender plain], %w[ActionBody instrument]
  ].freeze

  # The leaf's frames above the layers: the action's own helpers, deeper
  # for some threads than others (views, partials, models).
  def self.nest(levels, env)
    return env.fetch(:leaf).call(env) if levels <= 0

    nest(levels - 1, env)
  end

  class Action
    def initialize(levels)
      @levels = levels
    end

    def call(env) = WorkerShape.nest(@levels, env)
  end

  LAYERS.each_with_index do |(name, kind), index|
    module_eval(<<~RUBY, __FILE__, __LINE__ + 1)
      class #{name}
        def initialize(inner)
          @inner = inner
          @lock = Mutex.new
        end

        #{KINDS.fetch(kind.to_sym)}
        LAYER_INDEX = #{index}
      end
    RUBY
  end

  # The whole stack, around an action nested levels deep.
  def self.stack(levels)
    LAYERS.reverse.inject(Action.new(levels)) { |inner, (name, _)| const_get(name).new(inner) }
  end

  # SONDE_BENCH_STACK_READS=1 (run without a profiler): what reading a
  # serving thread's stack costs where a sampling pass reads it, 10 ms of
  # the application after the previous read, and what the same read costs
  # right after, with the caches that first read filled. A thread reading
  # stacks stands in for the pass: every 10 ms it reads each serving
  # thread's stack twice in a row (Sonde::Native::Testing.stack_read_ns).
  # Returns a thread whose value is the medians.
  STACK_READ_INTERVAL_S = 0.01

  def self.read_stacks_meanwhile(busy)
    require "sonde"
    Sonde::Native.load!
    Thread.new do
      first = []
      again = []
      frames = []
      while busy.any?(&:alive?)
        sleep(STACK_READ_INTERVAL_S)
        busy.each do |thread|
          depth, (cold, warm) = Sonde::Native::Testing.stack_read_ns(thread, 2)
          next if depth.zero?

          frames << depth
          first << cold
          again << warm
        rescue ArgumentError
          next # it ended meanwhile
        end
      end
      median = ->(values) { SondeBench::Summary.percentile(values, 0.5) }
      { reads: first.size, frames: median.call(frames), first_ns: median.call(first), again_ns: median.call(again) }
    end
  end

  def self.work(seed)
    text = +""
    WORK_STEPS.times { |i| text << ((seed * 31) + i).to_s(36) }
    { body: text, digest: text.sum }
  end
end

SondeBench::Workload.measure("puma_worker") do
  queue = Queue.new
  mutex = Mutex.new
  condition = ConditionVariable.new
  released = false
  reader, writer = IO.pipe
  selected_reader, selected_writer = IO.pipe
  stop = false
  # Each parked thread's leaf: where it waits, at its own depth.
  parked = [
    [0, ->(_) { queue.pop }],
    [10, ->(_) { mutex.synchronize { condition.wait(mutex) until released } }],
    [25, ->(_) { IO.select([selected_reader], nil, nil, WorkerShape::SELECT_TIMEOUT_S) until stop }],
    [40, ->(_) { sleep(WorkerShape::SELECT_TIMEOUT_S) until stop }],
    [55, ->(_) { reader.read(1) }]
  ]
  threads = parked.map do |levels, leaf|
    Thread.new { WorkerShape.stack(levels).call({ leaf: leaf }) }
  end
  requests = 0
  busy = Array.new(WorkerShape::BUSY_THREADS) do |n|
    Thread.new do
      served = 0
      request = lambda do |env|
        result = WorkerShape.work(env.fetch(:seed))
        sleep(WorkerShape::REQUEST_WAIT_S)
        result
      end
      stack = WorkerShape.stack(n * 20)
      SondeBench::Workload.each_round(WorkerShape::FULL_SIZE_REQUESTS / WorkerShape::BUSY_THREADS) do |round|
        stack.call({ leaf: request, seed: round })
        served += 1
      end
      served
    end
  end
  Thread.pass until threads.all? { |thread| thread.status == "sleep" }
  stack_reads = WorkerShape.read_stacks_meanwhile(busy) if ENV["SONDE_BENCH_STACK_READS"] == "1"
  # The main thread waits as Puma's worker does, deep in its own frames.
  requests = WorkerShape.stack(30).call({ leaf: ->(_) { busy.sum(&:value) } })
  stop = true
  queue << :done
  mutex.synchronize do
    released = true
    condition.signal
  end
  writer.write("x")
  selected_writer.write("x")
  threads.each(&:join)
  [reader, writer, selected_reader, selected_writer].each(&:close)
  details = { threads: 1 + threads.size + busy.size, requests: requests }
  details[:stack_reads] = stack_reads.value if stack_reads
  details
end
