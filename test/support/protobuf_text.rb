# frozen_string_literal: true

require "open3"

# Decodes protobuf bytes with protoc (`protoc --decode=TYPE SCHEMA`) and reads
# its text format into Hashes: each message is {field name => [values]}, a
# value an Integer, a binary String or a nested message. The tests use it to
# read what an encoder of Sonde's wrote without any of Sonde's code.
module ProtobufText
  SUPPORT = __dir__
  # protoc writes one field per line: "name: value", "name {" or "}".
  SCALAR = /\A(\w+): (.*)\z/.freeze
  OPEN = /\A(\w+) \{\z/.freeze
  ESCAPES = { "n" => "\n", "r" => "\r", "t" => "\t", "\"" => "\"", "'" => "'", "\\" => "\\" }.freeze

  module_function

  # The message of type (a full name) in bytes, by schema (a .proto in test/support).
  def decode(bytes, type:, schema:)
    out, err, status = Open3.capture3("protoc", "--proto_path=#{SUPPORT}", "--decode=#{type}", schema,
                                      stdin_data: bytes, binmode: true)
    raise "protoc could not decode the bytes as #{type}: #{err}" unless status.success?

    parse(out)
  end

  def parse(text)
    stack = [Hash.new { |hash, key| hash[key] = [] }]
    text.each_line(chomp: true) do |raw|
      line = raw.strip
      next if line.empty?

      if line == "}"
        stack.pop
      elsif (open = OPEN.match(line))
        child = Hash.new { |hash, key| hash[key] = [] }
        stack.last[open[1]] << child
        stack.push(child)
      elsif (scalar = SCALAR.match(line))
        stack.last[scalar[1]] << value(scalar[2])
      else
        raise "unexpected protoc output line: #{raw.inspect}"
      end
    end
    raise "unbalanced protoc output" unless stack.size == 1

    stack.first
  end

  def value(text)
    return unquote(text[1...-1]) if text.start_with?("\"")
    return Integer(text) if text.match?(/\A-?\d+\z/)

    text # an enum's name, true or false
  end

  # Text format's C-style escapes, to the bytes they stand for.
  def unquote(text)
    out = String.new(encoding: Encoding::BINARY)
    scanner = text.b
    i = 0
    while i < scanner.size
      char = scanner[i]
      if char != "\\"
        out << char
        i += 1
        next
      end
      following = scanner[i + 1]
      if (octal = scanner[i + 1, 3][/\A[0-7]{1,3}/])
        out << octal.to_i(8).chr
        i += 1 + octal.size
      elsif following == "x" && (hex = scanner[i + 2, 2][/\A\h{1,2}/])
        out << hex.to_i(16).chr
        i += 2 + hex.size
      else
        out << ESCAPES.fetch(following) { raise "unknown escape \\#{following} in #{text.inspect}" }
        i += 2
      end
    end
    out
  end
end
