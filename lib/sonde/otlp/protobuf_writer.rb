# frozen_string_literal: true

module Sonde
  module Otlp
    # The protobuf wire format, as much of it as the OTLP profiles messages
    # use: varint scalars (int32, int64, uint32, uint64), fixed64, strings and
    # bytes, embedded messages, and packed repeated varints and fixed64s.
    # Proto3 leaves a scalar field at its default (0, "") off the wire;
    # #message writes an embedded message even when it is empty, which is
    # how a dictionary's zero entry is present.
    #
    #   ProtobufWriter.new.varint(1, 42).string(2, "x").message(3) { |m| m.varint(1, 7) }.to_s
    class ProtobufWriter
      VARINT = 0
      FIXED64 = 1
      LENGTH_DELIMITED = 2
      # A negative int32 or int64 goes on the wire as its 64-bit two's
      # complement, ten bytes as a varint.
      UINT64_MASK = (1 << 64) - 1

      def initialize
        @out = String.new(encoding: Encoding::BINARY)
      end

      # An int32, int64, uint32 or uint64 field; 0 is left off unless
      # present: (a oneof member, whose default is a value too).
      def varint(field, value, present: false)
        return self if value.zero? && !present

        tag(field, VARINT)
        put_varint(value & UINT64_MASK)
        self
      end

      # A bool field; false is left off.
      def bool(field, value)
        varint(field, value ? 1 : 0)
      end

      # A fixed64 field; 0 is left off.
      def fixed64(field, value)
        return self if value.zero?

        tag(field, FIXED64)
        @out << [value].pack("Q<")
        self
      end

      # A string field (UTF-8 on the wire; its bytes as they are); "" is left off.
      def string(field, text)
        text.empty? ? self : bytes(field, text)
      end

      # A string or bytes field whatever its length ("" too): a repeated
      # string's empty entry, such as string_table[0], must be present.
      def bytes(field, data)
        tag(field, LENGTH_DELIMITED)
        put_varint(data.bytesize)
        @out << data.b
        self
      end

      # An embedded message, written by the block into a writer of its own;
      # present even when empty.
      def message(field)
        inner = ProtobufWriter.new
        yield inner
        bytes(field, inner.to_s)
      end

      # A packed repeated int32/int64/uint64 field; nothing when empty.
      def packed_varints(field, values)
        return self if values.empty?

        packed = ProtobufWriter.new
        values.each { |value| packed.put_varint(value & UINT64_MASK) }
        bytes(field, packed.to_s)
      end

      # A packed repeated fixed64 field; nothing when empty.
      def packed_fixed64(field, values)
        return self if values.empty?

        bytes(field, values.pack("Q<*"))
      end

      def to_s
        @out
      end

      protected

      def put_varint(value)
        while value >= 0x80
          @out << ((value & 0x7f) | 0x80)
          value >>= 7
        end
        @out << value
      end

      private

      def tag(field, wire_type)
        put_varint((field << 3) | wire_type)
      end
    end
  end
end
