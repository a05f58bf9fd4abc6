# frozen_string_literal: true

require_relative "support/test_helper"

# Every option as a keyword and as a SONDE_* variable; each bad value named.
class ConfigurationTest < Minitest::Test
  include SondeTestHelper

  def options(environment = {}, **keywords)
    Sonde::Options.new(environment: environment, **keywords)
  end

  def test_defaults
    defaults = options
    assert_equal 100, defaults.rate
    assert_equal 400, defaults.max_frames
    assert_equal true, defaults.signals
    assert_equal 1.0, defaults.overhead_target
    assert_equal true, defaults.gc
    assert_equal false, defaults.continuous
    assert_equal 60, defaults.every
    assert_equal "dir:sonde-profiles", defaults.export
    assert_equal({}, defaults.tags)
    assert_equal [false, false, 1024, 1], [defaults.alloc, defaults.heap, defaults.alloc_interval, defaults.alloc_duty]
    assert_equal 0, defaults.native_settings[:alloc_interval], "allocations are not sampled by default"
    assert(defaults.sources.values.all?("default"))
  end

  def test_allocation_settings_reach_the_native_side
    assert_equal [256, false], options({ "SONDE_ALLOC" => "1", "SONDE_ALLOC_INTERVAL" => "256" })
      .native_settings.values_at(:alloc_interval, :heap)
    # heap: samples allocations by itself.
    assert_equal [1024, true], options(heap: true).native_settings.values_at(:alloc_interval, :heap)
    assert_equal [1024, true], options({ "SONDE_HEAP" => "yes" }).native_settings.values_at(:alloc_interval, :heap)
    assert_equal 0, options(alloc_interval: 5).native_settings[:alloc_interval], "an interval alone turns nothing on"
    # A one-off profile listens at every tick; continuous mode to one tick in 20.
    assert_equal 1.0, options(alloc: true).native_settings[:alloc_duty]
    continuous = options(alloc: true, continuous: true)
    assert_equal [0.05, "default"], [continuous.native_settings[:alloc_duty], continuous.sources[:alloc_duty]]
    assert_equal 0.5, options(alloc: true, continuous: true, alloc_duty: 0.5).alloc_duty, "a duty given wins"
    assert_equal 0.5, options({ "SONDE_ALLOC_DUTY" => "0.5" }, alloc: true, continuous: true).alloc_duty
    assert_equal 1.0, options(alloc: true, alloc_duty: 1).native_settings[:alloc_duty], "a Float for the native side"
    assert_equal 0.25, options({ "SONDE_ALLOC_DUTY" => "0.25" }, heap: true).native_settings[:alloc_duty]
  end

  def test_heap_with_allocations_turned_off_is_refused_saying_why
    error = assert_raises(Sonde::ArgumentError) { options(heap: true, alloc: false) }
    assert_match(/heap: true needs allocation sampling, but alloc: false turns it off/, error.message)
    error = assert_raises(Sonde::ArgumentError) { options({ "SONDE_ALLOC" => "0" }, heap: true) }
    assert_match(/but SONDE_ALLOC=0 turns it off/, error.message)
  end

  def test_every_variable_is_read_and_its_source_remembered
    environment = {
      "SONDE_RATE" => "250", "SONDE_MAX_FRAMES" => "64", "SONDE_OVERHEAD_TARGET" => "2.5", "SONDE_GC" => "false",
      "SONDE_NO_SIGNALS" => "1", "SONDE_EVERY" => "30", "SONDE_EXPORT" => "dir:/tmp/p,pyroscope:http://127.0.0.1:4040",
      "SONDE_SERVICE" => "web", "SONDE_ENV" => "staging", "SONDE_VERSION" => "1.2.3", "SONDE_TAGS" => "team:core, region:eu"
    }
    resolved = options(environment)
    assert_equal [250, 64, 2.5, false, false, 30.0], [resolved.rate, resolved.max_frames, resolved.overhead_target,
                                                     resolved.gc, resolved.signals, resolved.every]
    assert_equal "dir:/tmp/p,pyroscope:http://127.0.0.1:4040", resolved.export
    assert_equal %w[web staging 1.2.3], [resolved.service, resolved.env, resolved.version]
    assert_equal({ "team" => "core", "region" => "eu" }, resolved.tags)
    assert_equal "SONDE_RATE", resolved.sources[:rate]
    assert_equal "SONDE_NO_SIGNALS", resolved.sources[:signals]
    assert_equal "default", resolved.sources[:continuous]
  end

  def test_a_keyword_wins_over_the_environment
    resolved = options({ "SONDE_RATE" => "250" }, rate: 10)
    assert_equal 10, resolved.rate
    assert_equal "keyword", resolved.sources[:rate]
  end

  def test_garbage_in_each_variable_is_named_with_what_is_accepted
    {
      "SONDE_RATE" => ["fast", /SONDE_RATE="fast": rate must be an Integer from 1 to 5000/],
      "SONDE_MAX_FRAMES" => ["-3", /SONDE_MAX_FRAMES="-3": max_frames must be an Integer from 1 to 10000/],
      "SONDE_OVERHEAD_TARGET" => ["50", /SONDE_OVERHEAD_TARGET="50": overhead_target must be a number above 0 and at most 20/],
      "SONDE_GC" => ["maybe", /SONDE_GC="maybe": gc must be true or false \(expected one of 1, true, yes, on, 0, false, no, off\)/],
      "SONDE_NO_SIGNALS" => ["2", /SONDE_NO_SIGNALS="2": expected one of/],
      "SONDE_ALLOC" => ["lots", /SONDE_ALLOC="lots": alloc must be true or false/],
      "SONDE_HEAP" => ["2", /SONDE_HEAP="2": heap must be true or false/],
      "SONDE_ALLOC_INTERVAL" => ["0", /SONDE_ALLOC_INTERVAL="0": alloc_interval must be an Integer from 1 to 10000000 \(allocations per sample, on average\)/],
      "SONDE_ALLOC_DUTY" => ["0", /SONDE_ALLOC_DUTY="0": alloc_duty must be a number from 0.01 to 1 \(the share of ticks during which allocations are listened to\)/],
      "SONDE_EVERY" => ["0", /SONDE_EVERY="0": every must be a number of seconds from 1 to 3600/],
      "SONDE_EXPORT" => ["ftp://x", /SONDE_EXPORT="ftp:\/\/x": not accepted: unknown exporter "ftp"; accepted: one or more of dir:PATH, pyroscope:URL, datadog:URL/],
      "SONDE_TAGS" => ["team", /SONDE_TAGS="team": tags must be .*"key:value,key:value" \("team" is not key:value\)/],
    }.each do |variable, (value, message)|
      error = assert_raises(Sonde::ArgumentError, variable) { options({ variable => value }) }
      assert_match message, error.message, variable
    end
  end

  def test_bad_keywords_are_named
    {
      { every: 0 } => /every must be a number of seconds from 1 to 3600, got 0/,
      { export: "s3:bucket" } => /\Aexport: "s3:bucket" is not accepted: unknown exporter "s3"; accepted: one or more of dir:PATH/,
      { export: [] } => /export must be one or more of dir:PATH/,
      { service: "" } => /service must be a non-empty String/,
      { tags: { "a" => 1 } } => /tags must be a Hash of String\/Symbol => String/,
      { continuous: "yes" } => /continuous must be true or false/,
      { gc: nil } => /gc must be true or false/,
      { alloc: 1 } => /alloc must be true or false, got 1/,
      { alloc_interval: 1.5 } => /alloc_interval must be an Integer from 1 to 10000000 .*, got 1.5/,
      { alloc_interval: 0 } => /alloc_interval must be an Integer from 1 to 10000000 .*, got 0/,
      { alloc_duty: 0 } => /alloc_duty must be a number from 0.01 to 1 .*, got 0/,
      { alloc_duty: 2 } => /alloc_duty must be a number from 0.01 to 1 .*, got 2/,
      { alloc_duty: "0.5" } => /alloc_duty must be a number from 0.01 to 1 .*, got "0.5"/,
    }.each do |keywords, message|
      error = assert_raises(Sonde::ArgumentError, keywords.inspect) { options(**keywords) }
      assert_match message, error.message
    end
  end

  def test_sonde_configuration_shows_values_and_sources
    stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY, env: { "SONDE_RATE" => "50" })
      Sonde.start(max_frames: 100)
      puts JSON.generate(Sonde.configuration)
      Sonde.stop
    RUBY
    assert_succeeded status, stderr
    configuration = JSON.parse(stdout)
    assert_equal({ "value" => 50, "source" => "SONDE_RATE" }, configuration["rate"])
    assert_equal({ "value" => 100, "source" => "keyword" }, configuration["max_frames"])
    assert_equal({ "value" => true, "source" => "default" }, configuration["gc"])
  end

  def test_garbage_in_the_environment_fails_at_start_and_not_later
    _stdout, stderr, status = run_ruby("-rsonde", "-e", "Sonde.start", env: { "SONDE_RATE" => "lots" })
    refute status.success?
    assert_match(/SONDE_RATE="lots": rate must be an Integer/, stderr)
  end

  # Options#native_settings is the one list of what Native.start reads:
  # each key a setting of SETTINGS, and the same keys the core looks up
  # (ext/sonde/profiler.c; muted_thread is a capture's, not a setting).
  def test_the_core_reads_the_settings_native_settings_gives
    given = options.native_settings.keys
    assert_empty given - Sonde::Options::BY_NAME.keys, "native settings that are not settings"
    source = File.read(File.join(ROOT, "ext", "sonde", "profiler.c"))
    read = source.scan(/\b(?:boolean_)?setting\(settings_hash, "(\w+)"\)/).flatten.map(&:to_sym)
    assert_equal given.sort, read.sort
  end
end
