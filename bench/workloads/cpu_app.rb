# frozen_string_literal: true

# The cpu workload's application: a 20-layer middleware stack, a router, a
# handler and its helpers (about 30 frames). bench/workloads/cpu.rb times it
# in a process of its own; bench/cpu_in_process.rb times it in slices under
# each profiler in turn, in one process.

MIDDLEWARE_LAYERS = 20
FULL_SIZE_REQUESTS = 18_000
ROWS_PER_REQUEST = 40

# One middleware layer: adds a header and calls the next one.
class Layer
  def initialize(name, inner)
    @name = name
    @inner = inner
  end

  def call(request)
    status, headers, body = @inner.call(request)
    headers[@name] = request[:path].length.to_s
    [status, headers, body]
  end
end

# Routes a request to the report handler.
class Router
  def initialize
    @handler = ReportHandler.new
  end

  def call(request)
    query = parse_query(request[:query])
    [200, {}, @handler.render(query)]
  end

  private

  def parse_query(query)
    query.split("&").to_h { |pair| pair.split("=", 2) }
  end
end

# Builds rows, sorts and totals them, renders them to a string.
class ReportHandler
  def render(query)
    rows = build_rows(Integer(query.fetch("seed")))
    rows = sort_rows(rows)
    "#{rows.map { |row| format_row(row) }.join("\n")}\ntotal=#{total(rows)}"
  end

  private

  def build_rows(seed)
    Array.new(ROWS_PER_REQUEST) { |i| { id: i, score: score(seed, i), name: "item-#{i}" } }
  end

  def score(seed, index)
    value = seed
    8.times { |round| value = ((value * 31) + index + round) % 1_000_003 }
    value
  end

  def sort_rows(rows)
    rows.sort_by { |row| -row[:score] }
  end

  def format_row(row)
    format("%<id>5d %<name>-10s %<score>8d", row)
  end

  def total(rows)
    rows.sum { |row| row[:score] }
  end
end

# The application, as a Rack-like callable.
def build_cpu_app
  (1..MIDDLEWARE_LAYERS).reduce(Router.new) { |inner, n| Layer.new("x-layer-#{n}", inner) }
end

# One request.
def call_cpu_app(app, n)
  app.call({ path: "/report/#{n}", query: "seed=#{n}&format=text" })
end
