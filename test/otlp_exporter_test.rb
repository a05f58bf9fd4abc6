# frozen_string_literal: true

require "open3"
require "zlib"
require_relative "support/exporter_test_helpers"
require_relative "support/protobuf_text"

# The OTLP exporter (otlp:URL) against a loopback receiver that decodes what
# it gets with protoc and a schema written out for the tests
# (support/otlp_profiles.proto), sharing no code with the encoder: what it
# posts, the tables the specification asks for, and the round trip (the
# same functions, stacks, labels and values as the pprof of the same period).
class OtlpExporterTest < Minitest::Test
  include ExporterTestHelpers

  SCHEMA = "otlp_profiles.proto"
  REQUEST = "sonde.test.otlp.ExportProfilesServiceRequest"
  TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
  SPAN_ID = "fedcba9876543210"
  TRACED_SCRIPT = <<~RUBY
    #{SondeTestHelper::BURN_SCRIPT}
    Sonde.start(rate: 250)
    Sonde.with_labels(endpoint: "UsersController#show") do
      Sonde.with_trace_context(trace_id: "#{TRACE_ID}", span_id: "#{SPAN_ID}", local_root_span_id: 42) { burn(0.15) }
    end
    burn(0.05)
    $stdout.binmode
    $stdout.write(Sonde.stop.pprof)
  RUBY

  def self.traced_pprof
    @traced_pprof ||= ExporterTestHelpers.profile_from(TRACED_SCRIPT)
  end

  def setup
    super
    skip "protoc is not installed (apt-get install protobuf-compiler)" unless system("protoc --version > /dev/null 2>&1")
  end

  def export_and_receive(pprof, status: 200, url_path: "")
    target = server(status: status)
    otlp = exporter("otlp:#{target.url}#{url_path}")
    otlp.export(Sonde::ExportedProfile.new(pprof: pprof, start_time: START, end_time: START + PERIOD, tags: TAGS))
    assert otlp.shutdown(timeout: 5)
    [otlp, target]
  end

  def decoded_request(http_request)
    assert_equal "gzip", http_request.headers["content-encoding"]
    ProtobufText.decode(Zlib.gunzip(http_request.body), type: REQUEST, schema: SCHEMA)
  end

  # A field of a parsed message, with proto3's default when absent.
  def field(message, name, default = 0)
    message.key?(name) ? message[name].first : default
  end

  def test_posts_an_export_profiles_request_to_the_profiles_path
    otlp, target = export_and_receive(ExporterTestHelpers.labelled_pprof_bytes)
    assert_equal 1, otlp.stats[:exported], otlp.stats.inspect
    request = target.requests.fetch(0)
    assert_equal ["POST", "/v1development/profiles"], [request.method, request.path]
    assert_equal "application/x-protobuf", request.headers["content-type"]
    assert_equal "sonde/#{Sonde::VERSION}", request.headers["user-agent"]
    message = decoded_request(request)
    resource_profiles = message.fetch("resource_profiles")
    assert_equal 1, resource_profiles.size
    attributes = field(resource_profiles.first, "resource").fetch("attributes").to_h do |pair|
      value = field(pair, "value")
      [field(pair, "key", ""), value.key?("int_value") ? field(value, "int_value") : field(value, "string_value", "")]
    end
    assert_equal({ "service.name" => "shop", "deployment.environment.name" => "prod", "service.version" => "1.2",
                   "host.name" => "web-1", "process.pid" => 4242, "team.name" => "core",
                   "process.runtime.name" => "ruby" },
                 attributes.slice("service.name", "deployment.environment.name", "service.version", "host.name",
                                  "process.pid", "team.name", "process.runtime.name"))
    scope_profiles = resource_profiles.first.fetch("scope_profiles")
    assert_equal 1, scope_profiles.size
    scope = field(scope_profiles.first, "scope")
    assert_equal ["sonde", Sonde::VERSION], [field(scope, "name", ""), field(scope, "version", "")]
  end

  # Every table's entry 0 is its zero value, present; there are no two
  # equal functions or strings.
  def test_the_dictionary_is_as_the_specification_asks
    _, target = export_and_receive(ExporterTestHelpers.labelled_pprof_bytes)
    dictionary = field(decoded_request(target.requests.fetch(0)), "dictionary")
    %w[mapping_table location_table function_table attribute_table stack_table].each do |table|
      assert_equal({}, dictionary.fetch(table).first, "#{table}[0] is the zero value")
    end
    assert_equal "", dictionary.fetch("string_table").first
    zero_link = dictionary.fetch("link_table").first
    assert_equal ["\0".b * 16, "\0".b * 8], [field(zero_link, "trace_id"), field(zero_link, "span_id")]
    strings = dictionary.fetch("string_table")
    assert_equal strings.uniq.size, strings.size, "a string twice"
    functions = dictionary.fetch("function_table").map { |function| function.to_a.sort }
    assert_equal functions.uniq.size, functions.size, "a function twice"
  end

  def test_one_profile_per_sample_type_with_the_pprofs_times
    pprof = ExporterTestHelpers.labelled_pprof_bytes
    _, target = export_and_receive(pprof)
    message = decoded_request(target.requests.fetch(0))
    strings = field(message, "dictionary").fetch("string_table")
    profiles = field(message.fetch("resource_profiles").first, "scope_profiles").fetch("profiles")
    decoded = Sonde::Pprof.decode(pprof)
    names = profiles.map do |profile|
      type = field(profile, "sample_type")
      [strings[field(type, "type_strindex")], strings[field(type, "unit_strindex")]]
    end
    assert_equal decoded.sample_types, names
    profiles.each do |profile|
      assert_equal [decoded.time_nanos, decoded.duration_nanos, decoded.period],
                   [field(profile, "time_unix_nano"), field(profile, "duration_nano"), field(profile, "period")]
      assert_equal 16, field(profile, "profile_id", "").bytesize
    end
    ids = profiles.map { |profile| field(profile, "profile_id", "") }
    assert_equal ids.uniq.size, ids.size, "each profile has its own id"
  end

  # The same samples as the pprof, read back through the dictionary: per
  # sample type, each (stack of function name, file and line; attributes;
  # link) with the same summed value and the same moments (timestamp and
  # value), the moment no attribute.
  def test_round_trip_gives_the_pprofs_samples
    [ExporterTestHelpers.labelled_pprof_bytes, self.class.traced_pprof].each do |pprof|
      _, target = export_and_receive(pprof)
      message = decoded_request(target.requests.fetch(0))
      decoded = Sonde::Pprof.decode(pprof)
      decoded.sample_types.each_with_index do |(type, _unit), index|
        expected = expected_samples(decoded, index)
        refute_empty expected, type if %w[cpu-time wall-time].include?(type)
        assert_equal expected, received_samples(message, type), "samples of #{type}"
      end
      # The traced profile was recorded with a timeline: its moments go too.
      next unless pprof.equal?(self.class.traced_pprof)

      assert(decoded.samples.any? { |sample| sample.labels.key?("end_timestamp_ns") })
      assert(received_samples(message, "cpu-time").values.any? { |_, timed| !timed.empty? })
    end
  end

  def test_a_sample_in_a_span_links_to_it
    _, target = export_and_receive(self.class.traced_pprof)
    message = decoded_request(target.requests.fetch(0))
    samples = received_totals(message, "cpu-time")
    in_span = samples.keys.select { |_, _, link| link }
    refute_empty in_span
    in_span.each do |_, attributes, link|
      assert_equal [TRACE_ID, SPAN_ID], link
      assert_equal "UsersController#show", attributes["endpoint"]
      refute attributes.key?("trace_id")
      refute attributes.key?("span_id")
    end
    assert(samples.keys.any? { |_, _, link| link.nil? }, "samples outside the span have no link")
  end

  def test_a_url_that_names_the_profiles_path_is_used_as_it_is
    _, target = export_and_receive(ExporterTestHelpers.pprof_bytes, url_path: "/otlp/v1development/profiles")
    assert_equal "/otlp/v1development/profiles", target.requests.fetch(0).path
    _, target = export_and_receive(ExporterTestHelpers.pprof_bytes, url_path: "/otlp")
    assert_equal "/otlp/v1development/profiles", target.requests.fetch(0).path
  end

  # OTLP/HTTP: 429, 502, 503 and 504 are worth another attempt; 500 and
  # 400 are not.
  def test_retries_only_what_otlp_says_to_retry
    { 503 => 3, 429 => 3, 500 => 1, 400 => 1 }.each do |status, attempts|
      otlp, target = export_and_receive(ExporterTestHelpers.pprof_bytes, status: status)
      assert_equal attempts, target.requests.size, "HTTP #{status}"
      assert_equal 1, otlp.stats[:failed], "HTTP #{status}: #{otlp.stats.inspect}"
    end
  end

  def test_a_partial_success_that_rejects_the_profile_is_a_failure
    target = server(status: 200)
    # ExportProfilesServiceResponse{partial_success{rejected_profiles: 2, error_message: "no"}}
    target.success_body = "\x0a\x06\x08\x02\x12\x02no".b
    otlp = exporter("otlp:#{target.url}")
    _, err = capture_subprocess_io do
      otlp.export(profile)
      assert otlp.shutdown(timeout: 5)
    end
    assert_equal 1, otlp.stats[:failed], otlp.stats.inspect
    assert_equal 1, target.requests.size, "not retried"
    assert_match(/rejected 2 profile\(s\): no/, otlp.stats[:last_error])
    assert_match(/the otlp exporter failed/, err)
  end

  # Continuous mode end to end: every period of a running process reaches
  # the receiver, the last one at exit, each with the process's CPU on the
  # method that burned it.
  def test_a_continuous_run_sends_each_period
    target = server(status: 200)
    script = <<~RUBY
      #{SondeTestHelper::BURN_SCRIPT}
      Sonde.start(continuous: true, export: "otlp:#{target.url}", every: 1, service: "otlp-shop", rate: 200)
      burn(1.6)
    RUBY
    _out, err, status = Open3.capture3(RbConfig.ruby, "-I#{SondeTestHelper::LIB}", "-rsonde", "-e", script)
    assert status.success?, err
    assert_equal "", err
    requests = target.requests
    assert_operator requests.size, :>=, 2, "a period each second and the last at exit"
    burned = requests.sum do |request|
      message = decoded_request(request)
      received_totals(message, "cpu-time").sum { |(frames, _, _), value| frames.any? { |name, _, _| name == "Object#burn" } ? value : 0 }
    end
    # Each period holds the CPU burned in it: together, the 1.6 s burned.
    assert_in_delta 1.6, burned / 1e9, 0.25
  end

  def test_bad_urls_are_refused_at_parse
    error = assert_raises(Sonde::ArgumentError) { Sonde::Exporters.parse("otlp:ftp://host:4318", service: "x") }
    assert_match(/scheme must be http or https/, error.message)
    assert_match(/otlp:URL/, error.message)
  end

  private

  # {[frames, attributes, link] => [untimed sum, [[timestamp, value], ...] in time order]}
  def expected_samples(decoded, index)
    observed = decoded.samples.each_with_object({}) do |sample, sums|
      value = sample.values.fetch(index)
      next if value.zero?

      labels = sample.labels.transform_keys { |name| { "thread id" => "thread.id", "thread name" => "thread.name" }.fetch(name, name) }
      at = labels.delete("end_timestamp_ns")
      link = nil
      if labels.key?("trace_id") && labels.key?("span_id")
        link = [labels.delete("trace_id"), labels.delete("span_id")]
      end
      frames = decoded.frames(sample).map { |function, line| [function.name, function.filename, line] }
      entry = (sums[[frames, labels, link]] ||= [0, []])
      at ? entry[1] << [at, value] : entry[0] += value
    end
    observed.each_value { |_, timed| timed.sort! }
  end

  # The same shape, from the request: a Sample with timestamps has one
  # value per timestamp, one without has one value; every timestamp within
  # its Profile's time span.
  def received_samples(message, type)
    dictionary = field(message, "dictionary")
    strings = dictionary.fetch("string_table")
    profiles = field(message.fetch("resource_profiles").first, "scope_profiles").fetch("profiles")
    profile = profiles.find { |p| strings[field(field(p, "sample_type"), "type_strindex")] == type }
    return {} unless profile

    start = field(profile, "time_unix_nano")
    span = (start...start + field(profile, "duration_nano"))
    observed = profile.fetch("samples", []).each_with_object({}) do |sample, sums|
      values = sample.fetch("values")
      timestamps = sample.fetch("timestamps_unix_nano", [])
      entry = (sums[[frames_of(dictionary, field(sample, "stack_index")), attributes_of(dictionary, sample),
                     link_of(dictionary, field(sample, "link_index"))]] ||= [0, []])
      if timestamps.empty?
        assert_equal 1, values.size
        entry[0] += values.first
      else
        assert_equal timestamps.size, values.size, "one value per timestamp"
        assert timestamps.all? { |at| span.cover?(at) }, "timestamps within the profile's span"
        entry[1].concat(timestamps.zip(values))
      end
    end
    observed.each_value { |_, timed| timed.sort! }
  end

  # {[frames, attributes, link] => total value}, moments or not.
  def received_totals(message, type)
    received_samples(message, type).transform_values { |untimed, timed| untimed + timed.sum(&:last) }
  end

  def frames_of(dictionary, stack_index)
    strings = dictionary.fetch("string_table")
    stack = dictionary.fetch("stack_table").fetch(stack_index)
    stack.fetch("location_indices", []).map do |location_index|
      location = dictionary.fetch("location_table").fetch(location_index)
      line = location.fetch("lines").first
      function = dictionary.fetch("function_table").fetch(field(line, "function_index"))
      [strings[field(function, "name_strindex")], strings[field(function, "filename_strindex")], field(line, "line")]
    end
  end

  def attributes_of(dictionary, sample)
    strings = dictionary.fetch("string_table")
    sample.fetch("attribute_indices", []).to_h do |index|
      attribute = dictionary.fetch("attribute_table").fetch(index)
      value = field(attribute, "value")
      [strings[field(attribute, "key_strindex")],
       value.key?("int_value") ? field(value, "int_value") : field(value, "string_value", "").force_encoding(Encoding::UTF_8)]
    end
  end

  def link_of(dictionary, index)
    return nil if index.zero?

    link = dictionary.fetch("link_table").fetch(index)
    [field(link, "trace_id").unpack1("H*"), field(link, "span_id").unpack1("H*")]
  end
end
