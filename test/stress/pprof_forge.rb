# frozen_string_literal: true

require "zlib"
require "stringio"

# Writes pprof (perftools.profiles.Profile) protobuf bytes by hand, for the
# bad-input and fuzz tests of test/stress/: unlike protoc (test/support/
# pprof_fixture.rb), it can also write what protoc refuses to: out-of-range
# string indexes, overlong or overflowing varints, wrong wire types, fields
# cut short. Not a test file itself (rake stress runs *_test.rb only).
#
#   forge = PprofForge::Builder.standard       # a small valid Sonde-like profile
#   forge.sample([1], [1, 2, 3, 4], "thread name" => 7)   # a label with num where str belongs
#   File.binwrite("x.pprof", forge.gzip)
module PprofForge
  VARINT = 0
  LEN = 2
  UINT64 = 1 << 64

  module_function

  # A varint of an unsigned integer (negative numbers as two's complement,
  # as protobuf writes int64). Values of 2**64 and above are written too:
  # that is what an overflowing varint is.
  def varint(value)
    value += UINT64 if value.negative?
    out = +"".b
    loop do
      byte = value & 0x7f
      value >>= 7
      return out << byte.chr if value.zero?

      out << (byte | 0x80).chr
    end
  end

  def tag(number, wire_type)
    varint((number << 3) | wire_type)
  end

  # One field: an Integer is a varint, a String a length-delimited field.
  def field(number, value)
    return tag(number, VARINT) + varint(value) if value.is_a?(Integer)

    bytes = value.b
    tag(number, LEN) + varint(bytes.bytesize) + bytes
  end

  # A message from [number, value] pairs (repeated numbers allowed).
  def message(*pairs)
    pairs.map { |number, value| field(number, value) }.join.b
  end

  def packed(values)
    values.map { |value| varint(value) }.join.b
  end

  # Builds a Profile message field by field; the string table is written
  # last (the decoder must resolve indexes after reading everything).
  class Builder
    attr_reader :strings

    # Sonde's four sample types, two functions, two locations, three samples
    # on two threads: every command reads it (the base of the bad inputs).
    def self.standard
      forge = new
      %w[cpu-time nanoseconds cpu-samples count wall-time nanoseconds wall-samples count].each_slice(2) do |type, unit|
        forge.sample_type(type, unit)
      end
      forge.function(1, "Object#work", "app.rb", 10)
      forge.function(2, "<main>", "app.rb", 1)
      forge.location(1, 1, 12)
      forge.location(2, 2, 30)
      forge.sample([1, 2], [10_000_000, 1, 10_000_000, 1], "thread id" => 1, "thread name" => "main", "state" => "running")
      forge.sample([2], [0, 0, 20_000_000, 1], "thread id" => 1, "thread name" => "main", "state" => "sleeping")
      forge.sample([1, 2], [5_000_000, 1, 5_000_000, 1], "thread id" => 2, "thread name" => "worker", "state" => "running")
      forge.scalar(9, 1_700_000_000_000_000_000) # time_nanos
      forge.scalar(10, 1_000_000_000) # duration_nanos
      forge.raw(11, PprofForge.message([1, forge.string("wall-time")], [2, forge.string("nanoseconds")]))
      forge.scalar(12, 10_000_000) # period
      forge
    end

    def initialize
      @strings = [""]
      @string_index = { "" => 0 }
      @fields = []
    end

    # The index of text in the string table (added when new).
    def string(text)
      @string_index[text] ||= (@strings << text).size - 1
    end

    def sample_type(type, unit)
      raw(1, PprofForge.message([1, string(type)], [2, string(unit)]))
    end

    def function(id, name, filename, start_line = 0)
      raw(5, PprofForge.message([1, id], [2, name.is_a?(Integer) ? name : string(name)], [3, string(name.to_s)],
                                [4, filename.is_a?(Integer) ? filename : string(filename)], [5, start_line]))
    end

    def location(id, function_id, line)
      raw(4, PprofForge.message([1, id], [4, PprofForge.message([1, function_id], [2, line])]))
    end

    # labels: key => String (str) or Integer (num). location_ids and values
    # are packed.
    def sample(location_ids, values, labels = {})
      label_fields = labels.map do |key, value|
        body = value.is_a?(Integer) ? [[1, string(key)], [3, value]] : [[1, string(key)], [2, string(value)]]
        [3, PprofForge.message(*body)]
      end
      raw(2, PprofForge.message([1, PprofForge.packed(location_ids)], [2, PprofForge.packed(values)], *label_fields))
    end

    def scalar(number, value)
      @fields << PprofForge.field(number, value)
    end

    def raw(number, value)
      @fields << PprofForge.field(number, value)
    end

    # Bytes written as they are, tag and all (a broken field).
    def bytes(text)
      @fields << text.b
    end

    def encode(string_table: @strings)
      (@fields + string_table.map { |text| PprofForge.field(6, text) }).join.b
    end

    def gzip(**options)
      PprofForge.gzip(encode(**options))
    end
  end

  # gzip with a fixed header time: Zlib.gzip stamps the current second, so
  # two runs of the same seed straddling a second boundary made different
  # inputs (seen: the reproducibility test failed on one byte of MTIME).
  # GzipWriter takes 0 as "now", hence 1.
  def self.gzip(bytes)
    io = StringIO.new(+"".b)
    writer = Zlib::GzipWriter.new(io)
    writer.mtime = 1
    writer.write(bytes)
    writer.close
    io.string
  end

  # Mutates real profiles the way a fuzzer does: bit flips, byte inserts and
  # deletes, truncation, splices of two profiles, interesting bytes, runs of
  # 0xff (overlong varints), on the raw protobuf (then gzip'd again or not)
  # or on the gzip'd bytes. Input number i of a seed is always the same, so
  # a hang or crash found by a worker can be made again from (seed, i).
  class Mutator
    INTERESTING = [0x00, 0x01, 0x02, 0x07, 0x08, 0x0a, 0x10, 0x12, 0x7f, 0x80, 0x81, 0xfe, 0xff].freeze
    KINDS = %i[flip flip interesting small small insert delete truncate splice duplicate varint_run].freeze

    # corpus: gzip'd profiles (binary Strings).
    def initialize(corpus)
      @gzipped = corpus.map(&:b)
      @raw = @gzipped.map { |bytes| bytes.start_with?("\x1f\x8b".b) ? Zlib.gunzip(bytes).b : bytes }
      @trees = @raw.map { |bytes| Tree.parse(bytes) }
    end

    # [bytes, description] of input number index for seed. A third of the
    # inputs change the protobuf's fields (Tree: values, numbers, wire
    # types; the bytes stay well-formed, so the decoder gets further), the
    # rest its bytes.
    def input(seed, index)
      random = Random.new((seed * 1_000_003) + index)
      which = random.rand(@raw.size)
      target = %i[fields fields raw raw raw gzip gzip][random.rand(7)]
      target = :raw if target == :fields && @trees[which].nil?
      if target == :fields
        bytes, steps = @trees[which].mutated(random, 1 + random.rand(3))
      else
        bytes = (target == :raw ? @raw[which] : @gzipped[which]).dup
        steps = Array.new(1 + random.rand(4)) { KINDS[random.rand(KINDS.size)] }
        steps.each { |kind| bytes = mutate(kind, bytes, random) }
      end
      regzip = target != :gzip && random.rand < 0.5
      bytes = PprofForge.gzip(bytes) if regzip
      [bytes.b, "corpus #{which}, #{target}#{regzip ? " re-gzip'd" : ""}: #{steps.join(" ")}"]
    end

    private

    def mutate(kind, bytes, random)
      return bytes + random.bytes(1 + random.rand(8)) if bytes.empty?

      size = bytes.bytesize
      at = random.rand(size)
      case kind
      when :flip
        bytes.setbyte(at, bytes.getbyte(at) ^ (1 << random.rand(8)))
        bytes
      when :interesting
        bytes.setbyte(at, INTERESTING[random.rand(INTERESTING.size)])
        bytes
      when :small
        # One-byte varints (ids, indexes, small values) stay one byte: the
        # message keeps its shape and decodes further.
        bytes.setbyte(at, random.rand(0x80)) if bytes.getbyte(at) < 0x80
        bytes
      when :insert then bytes.byteslice(0, at) + random.bytes(1 + random.rand(16)) + bytes.byteslice(at..)
      when :delete then bytes.byteslice(0, at) + bytes.byteslice((at + 1 + random.rand(16))..).to_s
      when :truncate then bytes.byteslice(0, at)
      when :splice
        other = @raw[random.rand(@raw.size)]
        bytes.byteslice(0, at) + other.byteslice(random.rand(other.bytesize)..).to_s
      when :duplicate
        length = 1 + random.rand([size - at, 64].min)
        chunk = bytes.byteslice(at, length)
        to = random.rand(size)
        bytes.byteslice(0, to) + chunk + bytes.byteslice(to..)
      when :varint_run then bytes.byteslice(0, at) + ("\xff".b * (5 + random.rand(8))) + bytes.byteslice(at..)
      end
    end
  end

  # A protobuf message as a tree of fields, to mutate field by field and
  # write back: a length-delimited field that reads as a message is one
  # (up to a few levels), else bytes. The string table stays bytes.
  class Tree
    Node = Struct.new(:number, :type, :value) # value: Integer, String (bytes or fixed) or [Node]
    MAX_DEPTH = 3
    VALUES = [0, 1, 2, 3, 7, 127, 128, (1 << 31), (1 << 32), (1 << 63) - 1, (1 << 63), UINT64 - 1, UINT64 + 1].freeze
    STRINGS = ["", "thread name", "thread id", "state", "cpu-time", "wall-time", "running", "\xFF\xFE".b, "x" * 300].freeze
    OPERATIONS = %i[value value value number wire_type drop duplicate bytes string_index].freeze

    def self.parse(bytes, depth = 0)
      nodes = []
      reader = Reader.new(bytes)
      until reader.done?
        tag = reader.varint or return nil
        number = tag >> 3
        type = tag & 7
        return nil if number.zero?

        value =
          case type
          when VARINT then reader.varint or return nil
          when 1 then reader.take(8) or return nil
          when 5 then reader.take(4) or return nil
          when LEN
            payload = reader.take(reader.varint || (return nil)) or return nil
            child = depth < MAX_DEPTH && !(depth.zero? && number == 6) && !payload.empty? ? parse(payload, depth + 1) : nil
            child || payload
          else return nil
          end
        nodes << Node.new(number, type, value)
      end
      depth.zero? ? new(nodes) : nodes
    end

    def initialize(nodes)
      @nodes = nodes
      @all = []
      collect(@nodes)
      @string_count = nodes.count { |node| node.number == 6 }
    end

    # [bytes, steps]: count field changes, written back as protobuf.
    def mutated(random, count)
      changes = {}.compare_by_identity
      steps = Array.new(count) do
        node = @all[random.rand(@all.size)]
        operation = OPERATIONS[random.rand(OPERATIONS.size)]
        changes[node] = change(node, operation, random)
        "#{operation}@#{node.number}"
      end
      [encode(@nodes, changes), steps]
    end

    private

    def collect(nodes)
      nodes.each do |node|
        @all << node
        collect(node.value) if node.value.is_a?(Array)
      end
    end

    # The node's replacement: an Array of nodes (none when dropped).
    def change(node, operation, random)
      case operation
      when :value then [Node.new(node.number, VARINT, VALUES[random.rand(VALUES.size)] + random.rand(2))]
      when :string_index then [Node.new(node.number, VARINT, @string_count + random.rand(3) - 1)]
      when :number then [Node.new(1 + random.rand(15), node.type, node.value)]
      when :wire_type then [Node.new(node.number, node.type == VARINT ? LEN : VARINT, node.type == VARINT ? "" : 1)]
      when :drop then []
      when :duplicate then [node, node]
      when :bytes then [Node.new(node.number, LEN, STRINGS[random.rand(STRINGS.size)])]
      end
    end

    def encode(nodes, changes)
      nodes.map do |node|
        (changes[node] || [node]).map { |one| encode_node(one, changes) }.join
      end.join.b
    end

    def encode_node(node, changes)
      case node.value
      when Integer then PprofForge.tag(node.number, VARINT) + PprofForge.varint(node.value)
      when Array then PprofForge.field(node.number, encode(node.value, changes))
      else
        node.type == LEN ? PprofForge.field(node.number, node.value) : PprofForge.tag(node.number, node.type) + node.value
      end
    end

    # Reads varints and byte runs; nil past the end.
    class Reader
      def initialize(bytes)
        @bytes = bytes
        @pos = 0
      end

      def done?
        @pos >= @bytes.bytesize
      end

      def varint
        value = 0
        shift = 0
        loop do
          return nil if done? || shift > 63

          byte = @bytes.getbyte(@pos)
          @pos += 1
          value |= (byte & 0x7f) << shift
          return value if byte < 0x80

          shift += 7
        end
      end

      def take(length)
        return nil if length > @bytes.bytesize - @pos

        chunk = @bytes.byteslice(@pos, length)
        @pos += length
        chunk
      end
    end
  end

  # What `sonde report`, `sonde convert` and `sonde flamegraph` do with a
  # file's bytes, in-process. Returns :rendered, or the documented error
  # (Sonde::Pprof::DecodeError, Sonde::Convert::ProfileError, a
  # Sonde::ArgumentError for --function) as :rejected; anything else raises.
  module Target
    module_function

    def load
      require "json"
      require "stringio"
      require "sonde/pprof"
      require "sonde/report"
      require "sonde/convert"
      require "sonde/flamegraph"
    end

    def exercise(bytes)
      profile = begin
        Sonde::Pprof.decode(bytes)
      rescue Sonde::Pprof::DecodeError
        return :rejected
      end
      render(profile)
      :rendered
    end

    def render(profile)
      io = StringIO.new
      Sonde::Report.new(profile).render(io)
      Sonde::Report.new(profile, by: :thread, sample: :wall, top: 5).render(io)
      Sonde::Report.new(profile, by: :state, lines: true, focus: /work|main/, ignore: /sleep/).render(io)
      function = profile.functions.values.first&.name
      begin
        Sonde::Report.new(profile, function: function).render(io) if function && !function.empty?
      rescue Sonde::ArgumentError
        nil # ambiguous or absent: a usage error, documented
      end
      begin
        Sonde::Convert.new(profile, to: :collapsed).write(io)
      rescue Sonde::Convert::ProfileError
        nil # no sample types: a file error, documented
      end
      Sonde::Convert.new(profile, to: :speedscope, name: "fuzz").write(io)
      Sonde::Flamegraph.html(profile, title: "fuzz")
    end
  end
end
