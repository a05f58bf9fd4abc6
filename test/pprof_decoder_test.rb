# frozen_string_literal: true

require "minitest/autorun"
require "tempfile"
require "zlib"
require "sonde/pprof"
require "support/pprof_fixture"

# Sonde::Pprof.decode against profiles encoded by protoc (an independent
# encoder), plus hand-made broken inputs.
class PprofDecoderTest < Minitest::Test
  DecodeError = Sonde::Pprof::DecodeError

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
  end

  def full_fixture
    fixture = PprofFixture::Builder.new
    fixture.sample_type("cpu-time", "nanoseconds")
    fixture.sample_type("wall-time", "nanoseconds")
    main = fixture.frame("Object#main", "app.rb", line: 3, start_line: 1)
    work = fixture.frame("Worker#run", "worker.rb", line: 12, start_line: 10)
    fixture.sample([work, main], [10_000_000, -5], "thread id" => 7, "thread name" => "worker")
    fixture.sample([main], [0, 20_000_000], "state" => "sleeping")
    fixture.field("time_nanos: 1700000000123456789")
    fixture.field("duration_nanos: 2500000000")
    fixture.field("period_type { type: #{fixture.string("cpu-time")} unit: #{fixture.string("nanoseconds")} }")
    fixture.field("period: 10000000")
    fixture.field("comment: #{fixture.string("sonde 0.1")}")
    fixture.field("comment: #{fixture.string("rate: 100 Hz")}")
    fixture.field("default_sample_type: #{fixture.string("cpu-time")}")
    fixture
  end

  def assert_full_profile(profile)
    assert_equal [%w[cpu-time nanoseconds], %w[wall-time nanoseconds]], profile.sample_types
    assert_equal 2, profile.samples.size
    first = profile.samples.first
    assert_equal [2, 1], first.location_ids
    assert_equal [10_000_000, -5], first.values
    assert_equal({ "thread id" => 7, "thread name" => "worker" }, first.labels)
    assert_equal({ "state" => "sleeping" }, profile.samples[1].labels)
    assert_equal 1_700_000_000_123_456_789, profile.time_nanos
    assert_equal 2_500_000_000, profile.duration_nanos
    assert_equal %w[cpu-time nanoseconds], profile.period_type
    assert_equal 10_000_000, profile.period
    assert_equal ["sonde 0.1", "rate: 100 Hz"], profile.comments
    assert_equal "cpu-time", profile.default_sample_type
  end

  def test_decodes_raw_protobuf
    assert_full_profile(Sonde::Pprof.decode(full_fixture.encode))
  end

  def test_decodes_gzip
    assert_full_profile(Sonde::Pprof.decode(full_fixture.gzip))
  end

  def test_reads_a_file
    Tempfile.create(["fixture", ".pprof"]) do |file|
      file.binmode
      file.write(full_fixture.gzip)
      file.close
      assert_full_profile(Sonde::Pprof.read(file.path))
    end
  end

  def test_locations_functions_and_frames
    profile = Sonde::Pprof.decode(full_fixture.encode)
    assert_equal Sonde::Pprof::Location.new(id: 2, function_id: 2, line: 12), profile.locations[2]
    function = profile.functions[2]
    assert_equal ["Worker#run", "worker.rb", 10], [function.name, function.filename, function.start_line]
    frames = profile.frames(profile.samples.first)
    assert_equal [["Worker#run", 12], ["Object#main", 3]], frames.map { |fn, line| [fn.name, line] }
  end

  def test_value_index
    profile = Sonde::Pprof.decode(full_fixture.encode)
    assert_equal 0, profile.value_index("cpu-time")
    assert_equal 1, profile.value_index("wall-time")
    assert_nil profile.value_index("alloc-space")
  end

  def test_optional_fields_default_when_absent
    fixture = PprofFixture::Builder.new
    profile = Sonde::Pprof.decode(fixture.encode)
    assert_equal [], profile.samples
    assert_equal 0, profile.time_nanos
    assert_nil profile.period_type
    assert_nil profile.default_sample_type
    assert_equal [], profile.comments
  end

  # protoc writes repeated integers packed; other encoders may not.
  def test_unpacked_repeated_fields
    fixture = PprofFixture::Builder.new
    fixture.sample_type("samples", "count")
    fixture.frame("a", "a.rb", line: 1)
    fixture.frame("b", "b.rb", line: 2)
    unpacked_sample = len_field(2, varint_field(1, 2) + varint_field(1, 1) + varint_field(2, 9))
    comment = varint_field(13, fixture.string("unpacked comment"))
    profile = Sonde::Pprof.decode(fixture.encode + unpacked_sample + comment)
    assert_equal [2, 1], profile.samples.first.location_ids
    assert_equal [9], profile.samples.first.values
    assert_equal ["unpacked comment"], profile.comments
  end

  def test_skips_unknown_fields_of_every_wire_type
    fixture = full_fixture
    fixture.field("mapping { id: 1 memory_start: 4096 }")
    fixture.field("drop_frames: #{fixture.string("drop me")}")
    unknown = tag(100, 1) + [1].pack("Q<") + tag(101, 5) + [2].pack("L<") + varint_field(102, 3) +
              len_field(103, "opaque")
    assert_full_profile(Sonde::Pprof.decode(fixture.encode + unknown))
  end

  def test_empty_input
    assert_decode_error("", /empty input/)
  end

  def test_truncated_gzip
    gzip = full_fixture.gzip
    assert_decode_error(gzip[0, gzip.bytesize / 2], /truncated gzip/)
    assert_decode_error(gzip[0, 3], /gzip/)
  end

  def test_corrupt_gzip
    gzip = full_fixture.gzip.b
    gzip[3] = "\xff".b # reserved header flags
    assert_decode_error(gzip, /corrupt gzip/)
  end

  def test_neither_gzip_nor_protobuf
    assert_decode_error("this is not a profile\n", /not a pprof profile/)
    assert_decode_error("\x48\x01".b, /string table is empty/)
    assert_decode_error("\x32\x01x".b, /does not start with the empty string/)
  end

  def test_truncated_varint
    bytes = full_fixture.encode + "\x48\xff\xff".b
    error = assert_decode_error(bytes, /truncated varint at byte \d+/)
    assert_includes error.message, "at byte #{bytes.bytesize}"
  end

  def test_varint_too_long
    assert_decode_error("\x48".b + ("\xff".b * 11), /varint longer than 10 bytes/)
  end

  def test_length_past_the_end
    bytes = full_fixture.encode
    assert_decode_error(bytes + "\x32\x7f".b, /field 6 is 127 bytes long, past the end.* at byte #{bytes.bytesize}/)
  end

  def test_truncated_fixed_field
    assert_decode_error(full_fixture.encode + tag(100, 1) + "\x01\x02".b, /truncated fixed-size field 100/)
  end

  def test_string_index_out_of_range
    fixture = PprofFixture::Builder.new
    fixture.field("function { id: 1 name: 42 }")
    assert_decode_error(fixture.encode, /function 1 refers to string 42, but the string table has 1/)
  end

  def test_label_string_out_of_range
    fixture = PprofFixture::Builder.new
    fixture.field("sample { label { key: 9 num: 1 } }")
    assert_decode_error(fixture.encode, /label of sample 1 refers to string 9/)
  end

  def test_missing_location
    fixture = PprofFixture::Builder.new
    fixture.sample_type("samples", "count")
    fixture.sample([5], [1])
    assert_decode_error(fixture.encode, /sample 1 refers to missing location 5/)
  end

  def test_missing_function
    fixture = PprofFixture::Builder.new
    fixture.location(3, 10)
    assert_decode_error(fixture.encode, /location 1 refers to missing function 3/)
  end

  def test_values_must_match_sample_types
    fixture = PprofFixture::Builder.new
    fixture.sample_type("samples", "count")
    fixture.sample([], [1, 2])
    assert_decode_error(fixture.encode, /sample 1 has 2 values for 1 sample types/)
  end

  def test_wrong_wire_type
    assert_decode_error("\x30\x01".b, /field 6 has wire type 0, expected 2/)
  end

  def test_gzip_bomb_stops_at_the_limit
    bomb = Zlib.gzip("\0".b * (8 * 1024 * 1024))
    error = assert_raises(DecodeError) { Sonde::Pprof.decode(bomb, max_decompressed_bytes: 1024 * 1024) }
    assert_match(/too large: more than 1048576 bytes once decompressed/, error.message)
  end

  def test_default_limit_is_one_gib
    assert_equal 1 << 30, Sonde::Pprof::MAX_DECOMPRESSED_BYTES
  end

  def test_decode_error_is_a_sonde_error
    assert_operator DecodeError, :<, Sonde::Error
  end

  private

  def assert_decode_error(bytes, pattern)
    error = assert_raises(DecodeError) { Sonde::Pprof.decode(bytes) }
    assert_match pattern, error.message
    refute_includes error.message, "\n"
    error
  end

  # A tiny protobuf writer for inputs protoc will not produce.
  def varint(value)
    bytes = +"".b
    loop do
      byte = value & 0x7f
      value >>= 7
      bytes << (value.zero? ? byte : byte | 0x80).chr
      return bytes if value.zero?
    end
  end

  def tag(field, wire_type)
    varint((field << 3) | wire_type)
  end

  def varint_field(field, value)
    tag(field, 0) + varint(value)
  end

  def len_field(field, payload)
    tag(field, 2) + varint(payload.bytesize) + payload.b
  end
end
