# frozen_string_literal: true

require "zlib"
require_relative "../pprof"

module Sonde
  module Exporters
    # Writes a profile's tags into the pprof itself, as comments
    # ("service=web", "pid=1234", ...; `go tool pprof -comments` lists them),
    # for the exporters whose target keeps nothing but the file (dir:). The
    # HTTP exporters send the tags in their requests instead.
    #
    # A protobuf message is extended by appending fields to it: the new
    # strings go to the end of the string table (field 6), so their indexes
    # start at the table's size so far, and the comments (field 13) point at
    # them. Nothing else is decoded or re-encoded. Pure; runs on the
    # exporter's thread.
    module PprofComments
      STRING_TABLE_FIELD = 6
      COMMENT_FIELD = 13
      VARINT = 0
      LENGTH_DELIMITED = 2

      module_function

      # "key=value" for each tag, sorted by key, so that files compare.
      def from_tags(tags)
        (tags || {}).map { |key, value| "#{key}=#{value}" }.sort
      end

      # The pprof bytes with the comments added, gzip'd when they were.
      # Raises Sonde::Pprof::DecodeError when the bytes are not a pprof.
      def append(bytes, comments)
        return bytes if comments.empty?

        bytes = bytes.b
        gzipped = bytes.start_with?(Pprof::GZIP_MAGIC)
        raw = gzipped ? Pprof::Gunzip.new(bytes, Pprof::MAX_DECOMPRESSED_BYTES).call : bytes.dup
        first_index = string_count(raw)
        comments.each do |comment|
          text = comment.to_s.encode(Encoding::UTF_8, invalid: :replace, undef: :replace).b
          raw << key(STRING_TABLE_FIELD, LENGTH_DELIMITED) << varint(text.bytesize) << text
        end
        comments.each_index { |i| raw << key(COMMENT_FIELD, VARINT) << varint(first_index + i) }
        gzipped ? Zlib.gzip(raw) : raw
      end

      # How many strings the profile's string table holds.
      def string_count(raw)
        count = 0
        Pprof::WireReader.new(raw).each_field(0, raw.bytesize) do |number, _type, _value, _stop|
          count += 1 if number == STRING_TABLE_FIELD
        end
        raise Pprof::DecodeError, "not a pprof profile: no string table" if count.zero?

        count
      end

      def key(field, wire_type)
        varint((field << 3) | wire_type)
      end

      def varint(value)
        out = String.new(encoding: Encoding::BINARY)
        while value >= 0x80
          out << ((value & 0x7f) | 0x80)
          value >>= 7
        end
        out << value
      end
    end
  end
end
