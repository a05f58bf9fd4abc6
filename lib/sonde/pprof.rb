# frozen_string_literal: true

require "zlib"
require "sonde/errors"
require "sonde/pprof/limits"

module Sonde
  # Reads pprof profiles (perftools.profiles.Profile, gzip-compressed or raw
  # protobuf) into plain Ruby objects. Pure Ruby: the protobuf wire format is
  # read by hand so that reading a profile needs no protobuf gem, and every
  # malformed input becomes a DecodeError with a one-line message.
  module Pprof
    # The input is not a readable pprof profile; the message says why.
    class DecodeError < Sonde::Error; end
    # The input is over one of the caps of Pprof::Limits; the message names
    # the cap and the variable that raises it.
    class LimitError < DecodeError; end

    # A gzip bomb must not take the process down: refuse to inflate past this.
    MAX_DECOMPRESSED_BYTES = 1 << 30
    GZIP_MAGIC = "\x1f\x8b".b.freeze

    Sample = Struct.new(:location_ids, :values, :labels, keyword_init: true)
    # A location with several lines (inlined calls) keeps its first, innermost one.
    Location = Struct.new(:id, :function_id, :line, keyword_init: true)
    Function = Struct.new(:id, :name, :filename, :start_line, keyword_init: true)

    # Stands in for the function of a location that has no line information.
    UNKNOWN_FUNCTION = Function.new(id: 0, name: "<unknown>", filename: "", start_line: 0).freeze

    # A decoded profile. locations and functions are Hashes by id.
    # end_nanos: where the time it covers ends, time + duration unless
    # given (merged profiles: the latest end of theirs, while the duration
    # is the sum, as go tool pprof sums it). Not in the pprof format.
    class Profile
      attr_reader :sample_types, :samples, :locations, :functions, :time_nanos, :duration_nanos,
                  :period_type, :period, :comments, :default_sample_type, :end_nanos

      def initialize(sample_types:, samples:, locations:, functions:, time_nanos:, duration_nanos:,
                     period_type:, period:, comments:, default_sample_type:, end_nanos: nil)
        @sample_types = sample_types
        @samples = samples
        @locations = locations
        @functions = functions
        @time_nanos = time_nanos
        @duration_nanos = duration_nanos
        @period_type = period_type
        @period = period
        @comments = comments
        @default_sample_type = default_sample_type
        @end_nanos = end_nanos || (time_nanos.to_i + duration_nanos.to_i)
      end

      # Index of the sample type named type_name in each sample's values, or nil.
      def value_index(type_name)
        sample_types.index { |type, _unit| type == type_name }
      end

      # The sample's stack as [Function, line] pairs, leaf first.
      def frames(sample)
        sample.location_ids.map do |id|
          location = locations.fetch(id)
          [functions.fetch(location.function_id, UNKNOWN_FUNCTION), location.line]
        end
      end
    end

    module_function

    # Decodes a profile from a String of bytes, gzip-compressed or not.
    # limits: the caps (Pprof::Limits, from SONDE_READ_MAX_* by default).
    def decode(bytes, max_decompressed_bytes: MAX_DECOMPRESSED_BYTES, limits: Limits.from_env)
      bytes = bytes.b
      raise DecodeError, "not a pprof profile: empty input" if bytes.empty?

      bytes = Gunzip.new(bytes, max_decompressed_bytes, limits).call if bytes.start_with?(GZIP_MAGIC)
      raise DecodeError, "not a pprof profile: empty after decompression" if bytes.empty?

      ProfileDecoder.new(bytes, limits).call
    end

    # Reads and decodes the profile at path. File errors (Errno::ENOENT and
    # the like) are left to the caller. A device (/dev/zero, /dev/urandom)
    # is refused and a file or pipe is read only up to the decompressed
    # limit, so an endless input ends in a DecodeError rather than filling
    # memory or reading forever.
    def read(path, max_decompressed_bytes: MAX_DECOMPRESSED_BYTES, limits: Limits.from_env)
      bytes = File.open(path, "rb") do |file|
        stat = file.stat
        raise DecodeError, "not a pprof profile: a device, not a file" if stat.chardev? || stat.blockdev?

        read_at_most(file, max_decompressed_bytes)
      end
      decode(bytes, max_decompressed_bytes: max_decompressed_bytes, limits: limits)
    end

    READ_CHUNK = 1 << 20

    def read_at_most(io, limit)
      bytes = +"".b
      while (chunk = io.read([READ_CHUNK, limit + 1 - bytes.bytesize].min))
        bytes << chunk
        raise DecodeError, "profile too large: more than #{limit} bytes" if bytes.bytesize > limit
      end
      bytes
    end

    # Inflates gzip data in bounded steps, so a gzip bomb stops at the limit
    # instead of filling memory.
    class Gunzip
      INPUT_CHUNK = 16 * 1024
      # Tells zlib to expect a gzip header (16) with the largest window.
      GZIP_WINDOW_BITS = Zlib::MAX_WBITS + 16

      # limits: Pprof::Limits whose inflate ratio applies; nil for Sonde's
      # own profiles.
      def initialize(bytes, limit, limits = nil)
        @bytes = bytes
        @limit = limit
        @limits = limits
      end

      def call
        inflater = Zlib::Inflate.new(GZIP_WINDOW_BITS)
        out = +"".b
        offset = 0
        while offset < @bytes.bytesize && !inflater.finished?
          inflater.inflate(@bytes.byteslice(offset, INPUT_CHUNK)) { |chunk| append(out, chunk) }
          offset += INPUT_CHUNK
        end
        raise DecodeError, "not a pprof profile: truncated gzip data" unless inflater.finished?

        out
      rescue Zlib::Error => e
        raise DecodeError, "not a pprof profile: corrupt gzip data (#{e.message})"
      ensure
        # Resetting first keeps zlib from warning about an unfinished stream.
        inflater&.reset
        inflater&.close
      end

      private

      def append(out, chunk)
        if out.bytesize + chunk.bytesize > @limit
          raise DecodeError, "profile too large: more than #{@limit} bytes once decompressed"
        end

        out << chunk
        @limits&.check_inflated(out.bytesize, @bytes.bytesize)
      end
    end

    # Protobuf wire format over a binary String: yields each field of a range
    # of bytes. Offsets in errors count from the start of the protobuf data.
    class WireReader
      VARINT = 0
      FIXED64 = 1
      LEN = 2
      FIXED32 = 5
      FIXED_SIZES = { FIXED64 => 8, FIXED32 => 4 }.freeze
      MAX_VARINT_BYTES = 10
      MULTI_BYTE = /[\x80-\xff]/n.freeze
      INT64_RANGE = 1 << 64
      INT64_MAX = (1 << 63) - 1

      def initialize(bytes)
        @bytes = bytes
        @pos = 0
      end

      # Yields (field_number, wire_type, value, stop) for each field between
      # start and stop. value is the integer of a varint or fixed field, or the
      # start offset of a length-delimited one, whose end offset is then given
      # as stop. The block may read nested fields: the cursor is put back
      # after it.
      def each_field(start, stop)
        @pos = start
        while @pos < stop
          field_start = @pos
          tag = read_varint(stop)
          number = tag >> 3
          type = tag & 7
          fail_at(field_start, "field number 0") if number.zero?
          value, field_stop = field_value(type, number, stop, field_start)
          yield number, type, value, field_stop
          @pos = field_stop
        end
      end

      # Reads the varints of a packed repeated field.
      def packed_varints(start, stop)
        slice = @bytes.byteslice(start, stop - start)
        # Small ids (under 128) are one byte each: let unpack do the work.
        return slice.unpack("C*") unless slice.match?(MULTI_BYTE)

        @pos = start
        values = []
        values << read_varint(stop) while @pos < stop
        values
      end

      def string(start, stop)
        @bytes.byteslice(start, stop - start)
      end

      def self.signed(value)
        value > INT64_MAX ? value - INT64_RANGE : value
      end

      def fail_at(pos, what)
        raise DecodeError, "not a pprof profile: #{what} at byte #{pos}"
      end

      private

      # Reads the varint at the cursor and moves past it.
      def read_varint(stop)
        pos = @pos
        fail_at(pos, "truncated varint") if pos >= stop
        byte = @bytes.getbyte(pos)
        if byte < 0x80
          @pos = pos + 1
          return byte
        end

        read_long_varint(pos, stop)
      end

      def read_long_varint(pos, stop)
        start = pos
        value = 0
        shift = 0
        MAX_VARINT_BYTES.times do
          fail_at(pos, "truncated varint") if pos >= stop
          byte = @bytes.getbyte(pos)
          pos += 1
          value |= (byte & 0x7f) << shift
          if byte < 0x80
            # The tenth byte holds bit 63 only: more is not a 64-bit value
            # (protobuf readers, Go's among them, refuse it).
            fail_at(start, "varint overflows 64 bits") if value >= INT64_RANGE
            @pos = pos
            return value
          end

          shift += 7
        end
        fail_at(pos, "varint longer than #{MAX_VARINT_BYTES} bytes")
      end

      # [value, end offset] of the field whose tag was just read.
      def field_value(type, number, stop, field_start)
        case type
        when VARINT
          value = read_varint(stop)
          [value, @pos]
        when LEN
          length = read_varint(stop)
          fail_at(field_start, "field #{number} is #{length} bytes long, past the end of its message") if length > stop - @pos
          [@pos, @pos + length]
        when FIXED64, FIXED32
          size = FIXED_SIZES.fetch(type)
          fail_at(field_start, "truncated fixed-size field #{number}") if size > stop - @pos
          [@bytes.byteslice(@pos, size).unpack1(type == FIXED64 ? "Q<" : "L<"), @pos + size]
        else
          fail_at(field_start, "unsupported wire type #{type} for field #{number}")
        end
      end
    end

    # Turns the protobuf fields of a Profile into a Profile. String indexes are
    # resolved at the end, since the string table may come after its users.
    class ProfileDecoder
      def initialize(bytes, limits)
        @limits = limits
        @wire = WireReader.new(bytes)
        @size = bytes.bytesize
        @strings = []
        @raw_sample_types = []
        @raw_samples = []
        @locations = {}
        @raw_functions = []
        @comment_indexes = []
        @scalars = Hash.new(0)
        @raw_period_type = nil
      end

      def call
        @wire.each_field(0, @size) { |number, type, value, stop| profile_field(number, type, value, stop) }
        check_string_table
        build_profile
      end

      private

      def profile_field(number, type, value, stop)
        case number
        when 1 then @raw_sample_types << value_type(expect_len(number, type, value), stop)
        when 2
          @limits.count(:samples)
          @raw_samples << sample(expect_len(number, type, value), stop)
        when 4
          @limits.count(:locations)
          add_location(expect_len(number, type, value), stop)
        when 5
          @limits.count(:functions)
          @raw_functions << function(expect_len(number, type, value), stop)
        when 6
          @limits.count(:strings)
          @strings << string_entry(expect_len(number, type, value), stop)
        when 9, 10, 12, 14 then @scalars[number] = expect_varint(number, type, value)
        when 11 then @raw_period_type = value_type(expect_len(number, type, value), stop)
        when 13
          comments = repeated(type, value, stop)
          @limits.count(:strings, comments.size)
          @comment_indexes.concat(comments)
        end
      end

      def expect_len(number, type, value)
        return value if type == WireReader::LEN

        raise DecodeError, "not a pprof profile: field #{number} has wire type #{type}, expected #{WireReader::LEN}"
      end

      def expect_varint(number, type, value)
        return value if type == WireReader::VARINT

        raise DecodeError,
              "not a pprof profile: field #{number} has wire type #{type}, expected #{WireReader::VARINT}"
      end

      # A repeated integer field, packed or not.
      def repeated(type, value, stop)
        type == WireReader::LEN ? @wire.packed_varints(value, stop) : [value]
      end

      def string_entry(start, stop)
        string = @wire.string(start, stop).force_encoding(Encoding::UTF_8)
        string.valid_encoding? ? string : string.scrub
      end

      # The values of fields 1..count of a message (0 when absent): a
      # value type [type, unit], a label [key, str, num], a line [function, line].
      def leading_fields(start, stop, count)
        fields = Array.new(count, 0)
        @wire.each_field(start, stop) { |number, _type, value, _| fields[number - 1] = value if number <= count }
        fields
      end

      def value_type(start, stop)
        leading_fields(start, stop, 2)
      end

      def sample(start, stop)
        location_ids = []
        values = []
        labels = []
        @wire.each_field(start, stop) do |number, type, value, field_stop|
          case number
          when 1
            ids = repeated(type, value, field_stop)
            @limits.count(:frames, ids.size)
            location_ids.concat(ids)
          when 2
            numbers = repeated(type, value, field_stop)
            @limits.count(:values, numbers.size)
            values.concat(numbers.map { |v| WireReader.signed(v) })
          when 3
            @limits.count(:labels)
            labels << label(expect_len("sample.label", type, value), field_stop)
          end
        end
        [location_ids, values, labels]
      end

      # [key, str, num] as string indexes and an integer.
      def label(start, stop)
        leading_fields(start, stop, 3)
      end

      def add_location(start, stop)
        id = 0
        line = nil
        @wire.each_field(start, stop) do |number, type, value, field_stop|
          id = value if number == 1
          line ||= line_entry(expect_len("location.line", type, value), field_stop) if number == 4
        end
        function_id, line_number = line || [0, 0]
        @locations[id] = Location.new(id: id, function_id: function_id, line: WireReader.signed(line_number))
      end

      def line_entry(start, stop)
        leading_fields(start, stop, 2)
      end

      def function(start, stop)
        fields = { 1 => 0, 2 => 0, 4 => 0, 5 => 0 }
        @wire.each_field(start, stop) { |number, _type, value, _| fields[number] = value if fields.key?(number) }
        fields
      end

      def check_string_table
        return if @strings.first == ""

        raise DecodeError, "not a pprof profile: the string table is empty" if @strings.empty?

        raise DecodeError, "not a pprof profile: the string table does not start with the empty string"
      end

      def string(index, what)
        return @strings[index] if index < @strings.size

        raise DecodeError,
              "not a pprof profile: #{what} refers to string #{index}, but the string table has #{@strings.size}"
      end

      def build_profile
        functions = build_functions
        check_locations(functions)
        sample_types = @raw_sample_types.map.with_index { |vt, i| value_type_strings(vt, "sample type #{i + 1}") }
        Profile.new(
          sample_types: sample_types,
          samples: build_samples(sample_types.size),
          locations: @locations,
          functions: functions,
          time_nanos: WireReader.signed(@scalars[9]),
          duration_nanos: WireReader.signed(@scalars[10]),
          period_type: @raw_period_type && value_type_strings(@raw_period_type, "period type"),
          period: WireReader.signed(@scalars[12]),
          comments: @comment_indexes.map { |index| string(index, "a comment") },
          default_sample_type: @scalars.key?(14) ? string(@scalars[14], "default sample type") : nil
        )
      end

      def value_type_strings(value_type, what)
        [string(value_type[0], what), string(value_type[1], what)]
      end

      def build_functions
        @raw_functions.to_h do |fields|
          id = fields[1]
          what = "function #{id}"
          [id, Function.new(id: id, name: string(fields[2], what), filename: string(fields[4], what),
                            start_line: WireReader.signed(fields[5]))]
        end
      end

      def check_locations(functions)
        @locations.each_value do |location|
          next if location.function_id.zero? || functions.key?(location.function_id)

          raise DecodeError,
                "not a pprof profile: location #{location.id} refers to missing function #{location.function_id}"
        end
      end

      def build_samples(type_count)
        @raw_samples.each_with_index.map do |(location_ids, values, labels), i|
          check_sample(i + 1, location_ids, values, type_count)
          Sample.new(location_ids: location_ids, values: values, labels: sample_labels(labels, i + 1))
        end
      end

      def check_sample(number, location_ids, values, type_count)
        if values.size != type_count
          raise DecodeError,
                "not a pprof profile: sample #{number} has #{values.size} values for #{type_count} sample types"
        end
        missing = location_ids.find { |id| !@locations.key?(id) }
        return unless missing

        raise DecodeError, "not a pprof profile: sample #{number} refers to missing location #{missing}"
      end

      # The hot path of big profiles: string lookups are inlined, and the
      # error text is only built when it is needed.
      def sample_labels(labels, number)
        strings = @strings
        result = {}
        size = strings.size
        # Indexes are compared with the size first: one of 2**63 or more
        # (a corrupt file) is a Bignum, which Array#[] refuses with RangeError.
        labels.each do |key, str, num|
          name = key < size ? strings[key] : string(key, "a label of sample #{number}")
          result[name] =
            if str.zero? then WireReader.signed(num)
            elsif str < size then strings[str]
            else string(str, "a label of sample #{number}")
            end
        end
        result
      end
    end
  end
end
