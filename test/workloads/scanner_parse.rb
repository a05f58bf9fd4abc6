# frozen_string_literal: true

# A program whose run is mostly allocation and GC: a JSON parser written
# in Ruby (StringScanner tokens, a String, Array or Hash per value, all
# short-lived) reads a 40 KB document again and again. Its live set is
# small and steady, so how often it collects depends on how big Ruby lets
# the heap grow, which is what a library's load can change. Prints one JSON
# line: GC.count and GC time of the parsing, and the heap's pages at its end.
#
#   ruby test/workloads/scanner_parse.rb [PARSES]
require "json"
require "strscan"

# Recursive descent over a StringScanner: the kind of code a pure-Ruby
# parser is made of.
class ScannerParser
  NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?(?:[eE][-+]?\d+)?/.freeze
  STRING = /"((?:[^"\\]|\\.)*)"/.freeze
  ESCAPE = /\\(.)/.freeze
  ESCAPES = { "n" => "\n", "t" => "\t", '"' => '"', "\\" => "\\", "/" => "/" }.freeze

  def initialize(text)
    @scanner = StringScanner.new(text)
  end

  def parse
    value = parse_value
    @scanner.skip(/\s*/)
    raise ArgumentError, "trailing bytes at #{@scanner.pos}" unless @scanner.eos?

    value
  end

  private

  def parse_value
    @scanner.skip(/\s*/)
    if @scanner.skip(/\{/) then parse_object
    elsif @scanner.skip(/\[/) then parse_array
    elsif @scanner.scan(STRING) then @scanner[1].gsub(ESCAPE) { ESCAPES.fetch(Regexp.last_match(1), "?") }
    elsif @scanner.scan(NUMBER) then @scanner[1] ? Float(@scanner[0]) : Integer(@scanner[0], 10)
    elsif @scanner.skip(/true/) then true
    elsif @scanner.skip(/false/) then false
    elsif @scanner.skip(/null/) then nil
    else raise ArgumentError, "unexpected byte at #{@scanner.pos}"
    end
  end

  def parse_object
    object = {}
    @scanner.skip(/\s*/)
    return object if @scanner.skip(/\}/)

    loop do
      key = parse_value
      @scanner.skip(/\s*:/) || raise(ArgumentError, "no ':' at #{@scanner.pos}")
      object[key] = parse_value
      @scanner.skip(/\s*/)
      return object if @scanner.skip(/\}/)

      @scanner.skip(/,/) || raise(ArgumentError, "no ',' at #{@scanner.pos}")
    end
  end

  def parse_array
    array = []
    @scanner.skip(/\s*/)
    return array if @scanner.skip(/\]/)

    loop do
      array << parse_value
      @scanner.skip(/\s*/)
      return array if @scanner.skip(/\]/)

      @scanner.skip(/,/) || raise(ArgumentError, "no ',' at #{@scanner.pos}")
    end
  end
end

random = Random.new(7)
teams = %w[Rapid Austria Sturm Salzburg Ried Admira Mattersburg Wacker Wiener Kapfenberg]
matches = Array.new(240) do |n|
  { "round" => "Round #{(n / 5) + 1}", "date" => format("2011-%02d-%02d", (n % 12) + 1, (n % 28) + 1),
    "team1" => { "name" => teams.sample(random: random), "code" => "T#{random.rand(100)}" },
    "team2" => { "name" => teams.sample(random: random), "code" => "T#{random.rand(100)}" },
    "score" => [random.rand(5), random.rand(5)], "attendance" => random.rand(1000.0..30_000.0).round(1),
    "note" => "said \"well played\"\\n" }
end
document = JSON.generate({ "name" => "League 2011/12", "matches" => matches })
parses = Integer(ARGV.fetch(0, "60"), 10)
ScannerParser.new(document).parse # warm: the first parse's allocations are not the steady state's

before = GC.stat
parses.times { ScannerParser.new(document).parse }
after = GC.stat
puts JSON.generate(gc_count: after[:count] - before[:count], gc_time_ms: after[:time].to_i - before[:time].to_i,
                   heap_pages: after[:heap_allocated_pages], document_bytes: document.bytesize)
