# frozen_string_literal: true

require "open3"
require "zlib"

# Builds pprof fixtures for the tests without Sonde's own code: a profile is
# written in protobuf text format and encoded by protoc against
# test/support/profile.proto.
#
#   fixture = PprofFixture::Builder.new
#   fixture.sample_type("cpu-time", "nanoseconds")
#   main = fixture.frame("main", "app.rb", line: 3, start_line: 1)
#   fixture.sample([main], [10], "thread id" => 1)
#   bytes = fixture.gzip
module PprofFixture
  PROTO_DIR = __dir__
  PROTO_FILE = "profile.proto"
  MESSAGE = "perftools.profiles.Profile"

  # Encodes a Profile given in text format; returns the raw protobuf bytes.
  def self.encode(text)
    out, err, status = Open3.capture3("protoc", "--encode=#{MESSAGE}", "--proto_path=#{PROTO_DIR}", PROTO_FILE,
                                      stdin_data: text, binmode: true)
    raise "protoc failed: #{err.strip}\n#{text}" unless status.success?

    out.b
  end

  def self.protoc?
    system("protoc --version > /dev/null 2>&1")
  end

  # The pieces of a profile, kept as text-format fields.
  class Builder
    def initialize
      @strings = { "" => 0 }
      @fields = []
      @functions = {}
      @location_count = 0
    end

    # Interns s; returns its string-table index.
    def string(s)
      @strings[s] ||= @strings.size
    end

    def sample_type(type, unit)
      @fields << "sample_type { type: #{string(type)} unit: #{string(unit)} }"
    end

    # Returns the id of the function (name, filename), adding it if new.
    def function(name, filename, start_line: 0)
      @functions[[name, filename]] ||= begin
        id = @functions.size + 1
        @fields << "function { id: #{id} name: #{string(name)} system_name: #{string(name)} " \
                   "filename: #{string(filename)} start_line: #{start_line} }"
        id
      end
    end

    def location(function_id, line)
      id = (@location_count += 1)
      @fields << "location { id: #{id} line { function_id: #{function_id} line: #{line} } }"
      id
    end

    # A location in function (name, filename) at line; returns its id.
    def frame(name, filename, line:, start_line: 0)
      location(function(name, filename, start_line: start_line), line)
    end

    # stack: location ids, leaf first. labels: key => String or Integer.
    def sample(stack, values, labels = {})
      parts = stack.map { |id| "location_id: #{id}" }
      parts.concat(values.map { |v| "value: #{v}" })
      labels.each do |key, value|
        parts << if value.is_a?(Integer)
                   "label { key: #{string(key)} num: #{value} }"
                 else
                   "label { key: #{string(key)} str: #{string(value)} }"
                 end
      end
      @fields << "sample { #{parts.join(" ")} }"
    end

    # Any other field, in text format (e.g. "time_nanos: 5").
    def field(text)
      @fields << text
    end

    def to_text
      strings = @strings.keys.map { |s| "string_table: #{quote(s)}" }
      [*@fields, *strings].join("\n") + "\n"
    end

    def encode
      PprofFixture.encode(to_text)
    end

    def gzip
      Zlib.gzip(encode)
    end

    private

    def quote(s)
      escaped = s.gsub(/[\\"]/) { |c| "\\#{c}" }.gsub("\n", "\\n")
      "\"#{escaped}\""
    end
  end
end
