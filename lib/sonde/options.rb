# frozen_string_literal: true

require_relative "errors"
require_relative "setting"
require_relative "version"

module Sonde
  # Every setting of Sonde.start, resolved and validated at the boundary.
  #
  # Each setting can be given as a keyword or as an environment variable
  # (SONDE_*); a keyword wins over the variable, the variable over the
  # default. A bad value is reported with the setting's name (and the
  # variable's, when it came from one), the value and what is accepted,
  # before anything native is touched. #sources says where each value came
  # from (Sonde.configuration shows it). SETTINGS is the one table of them:
  # each row carries its check and the sentence that describes it.
  class Options
    RATE_RANGE = (1..5000).freeze
    MAX_FRAMES_RANGE = (1..10_000).freeze
    # Percent of wall time sampling may take; above 0, at most this.
    OVERHEAD_TARGET_MAX = 20
    # Allocations per allocation sample, on average (alloc: and heap:).
    ALLOC_INTERVAL_RANGE = (1..10_000_000).freeze
    DEFAULT_ALLOC_INTERVAL = 1024
    # Share of ticks during which allocations are listened to (alloc: and
    # heap:). A one-off profile (Sonde.profile, Sonde.start/stop, `sonde
    # record`, a capture that starts Sonde) listens to every tick: at a
    # share, a short one may listen to none and count no allocation.
    # Continuous mode, on for the process's life, listens to a share, which
    # keeps allocation sampling's cost low (docs/overhead.md).
    ALLOC_DUTY_MIN = 0.01
    DEFAULT_ALLOC_DUTY = 1
    CONTINUOUS_ALLOC_DUTY = 0.05
    # Seconds between flushes in continuous mode.
    EVERY_RANGE = (1..3600).freeze
    DEFAULT_EXPORT = "dir:sonde-profiles"
    # The service tag when none is given and the program's name says nothing.
    FALLBACK_SERVICE = "ruby"
    TEXT = "a non-empty String (valid UTF-8, no control characters)"

    # An export value is checked for its shape here; Exporters.specs checks
    # its entries (see #check_export).
    EXPORT_SHAPE = lambda do |value|
      entries = value.is_a?(Array) ? value : [value]
      shaped = !entries.empty? && entries.all? do |entry|
        (entry.is_a?(String) && entry.valid_encoding? && !entry.strip.empty?) || entry.is_a?(Hash)
      end
      shaped ? Options.deep_frozen(value) : Setting::REFUSED
    end

    SETTINGS = [
      Setting.new(name: :rate, default: 100, variable: "SONDE_RATE", text: :integer,
                  check: Setting::Checks.integer_in(RATE_RANGE),
                  expected: "rate must be an Integer from #{RATE_RANGE.min} to #{RATE_RANGE.max} (samples per second)"),
      Setting.new(name: :max_frames, default: 400, variable: "SONDE_MAX_FRAMES", text: :integer,
                  check: Setting::Checks.integer_in(MAX_FRAMES_RANGE),
                  expected: "max_frames must be an Integer from #{MAX_FRAMES_RANGE.min} to #{MAX_FRAMES_RANGE.max} " \
                            "(frames per stack)"),
      Setting.new(name: :signals, default: true, variable: "SONDE_NO_SIGNALS", text: :negated_boolean,
                  check: Setting::Checks.boolean, expected: "signals must be true or false"),
      Setting.new(name: :overhead_target, default: 1.0, variable: "SONDE_OVERHEAD_TARGET", text: :number,
                  check: Setting::Checks.number_in(0, OVERHEAD_TARGET_MAX),
                  expected: "overhead_target must be a number above 0 and at most #{OVERHEAD_TARGET_MAX} " \
                            "(percent of wall time)"),
      Setting.new(name: :gc, default: true, variable: "SONDE_GC", text: :boolean,
                  check: Setting::Checks.boolean, expected: "gc must be true or false"),
      Setting.new(name: :alloc, default: false, variable: "SONDE_ALLOC", text: :boolean,
                  check: Setting::Checks.boolean, expected: "alloc must be true or false"),
      Setting.new(name: :heap, default: false, variable: "SONDE_HEAP", text: :boolean,
                  check: Setting::Checks.boolean, expected: "heap must be true or false"),
      Setting.new(name: :alloc_interval, default: DEFAULT_ALLOC_INTERVAL, variable: "SONDE_ALLOC_INTERVAL",
                  text: :integer, check: Setting::Checks.integer_in(ALLOC_INTERVAL_RANGE),
                  expected: "alloc_interval must be an Integer from #{ALLOC_INTERVAL_RANGE.min} to " \
                            "#{ALLOC_INTERVAL_RANGE.max} (allocations per sample, on average)"),
      Setting.new(name: :alloc_duty, default: DEFAULT_ALLOC_DUTY, variable: "SONDE_ALLOC_DUTY", text: :number,
                  check: Setting::Checks.number_in(ALLOC_DUTY_MIN, 1),
                  expected: "alloc_duty must be a number from #{ALLOC_DUTY_MIN} to 1 " \
                            "(the share of ticks during which allocations are listened to)"),
      Setting.new(name: :timeline, default: true, variable: "SONDE_TIMELINE", text: :boolean,
                  check: Setting::Checks.boolean, expected: "timeline must be true or false"),
      Setting.new(name: :continuous, default: false, text: :boolean,
                  check: Setting::Checks.boolean, expected: "continuous must be true or false"),
      Setting.new(name: :every, default: 60, variable: "SONDE_EVERY", text: :number,
                  check: Setting::Checks.number_in(EVERY_RANGE.min, EVERY_RANGE.max),
                  expected: "every must be a number of seconds from #{EVERY_RANGE.min} to #{EVERY_RANGE.max}"),
      # The exporter kinds are the registry's (Exporters::Registry), read
      # only when a message needs them: a run that exports nothing loads no
      # exporter.
      Setting.new(name: :export, default: DEFAULT_EXPORT, variable: "SONDE_EXPORT", check: EXPORT_SHAPE,
                  expected: lambda {
                    require_relative "exporters"
                    "export must be #{Exporters.accepted}, or an Array of those"
                  }),
      Setting.new(name: :service, default: nil, variable: "SONDE_SERVICE", check: Setting::Checks.optional_text,
                  expected: "service must be #{TEXT}"),
      Setting.new(name: :env, default: nil, variable: "SONDE_ENV", check: Setting::Checks.optional_text,
                  expected: "env must be #{TEXT}"),
      Setting.new(name: :version, default: nil, variable: "SONDE_VERSION", check: Setting::Checks.optional_text,
                  expected: "version must be #{TEXT}"),
      Setting.new(name: :tags, default: {}.freeze, variable: "SONDE_TAGS", text: :tags, check: Setting::Checks.tags,
                  expected: "tags must be a Hash of String/Symbol => String (valid UTF-8, no NUL), " \
                            "or \"key:value,key:value\""),
    ].freeze
    BY_NAME = SETTINGS.to_h { |setting| [setting.name, setting] }.freeze
    DEFAULTS = SETTINGS.to_h { |setting| [setting.name, setting.default] }.freeze
    attr_reader(*SETTINGS.map(&:name), :sources)

    def initialize(environment: ENV, **keywords)
      Setting.refuse_unknown(keywords.keys, BY_NAME.keys, "option")

      @sources = {}
      SETTINGS.each do |setting|
        value, source = resolve(setting, keywords, environment)
        instance_variable_set(:"@#{setting.name}", value)
        @sources[setting.name] = source
      end
      @service ||= Options.default_service
      @alloc_duty = CONTINUOUS_ALLOC_DUTY if continuous && @sources[:alloc_duty] == "default"
      # A timeline is for looking at a run; an always-on process keeps only
      # the aggregate unless asked.
      @timeline = false if continuous && @sources[:timeline] == "default"
      check_heap_needs_allocations
      @export_specs = (continuous || @sources[:export] != "default") ? check_export : nil
      @sources.freeze
      freeze
    end

    # The export value's entries, read against the exporter registry
    # (Exporters::Spec). Read at start when the run exports (continuous) or
    # an export was given; the default's, not continuous, only when asked:
    # a run that exports nothing loads no exporter.
    def export_specs
      @export_specs || check_export
    end

    def to_h
      SETTINGS.to_h { |setting| [setting.name, public_send(setting.name)] }
    end

    # Whether allocations are sampled: heap: true samples them too (the
    # live heap is made of sampled allocations).
    def samples_allocations?
      alloc || heap
    end

    # The one argument Sonde::Native.start takes: settings of SETTINGS, as
    # the core reads them (alloc_interval 0 when allocations are off).
    def native_settings
      { rate: rate, max_frames: max_frames, signals: signals, overhead_target: overhead_target.to_f, gc: gc,
        alloc_interval: samples_allocations? ? alloc_interval : 0, heap: heap, alloc_duty: alloc_duty.to_f,
        timeline: timeline }.freeze
    end

    # The program's name, for the service tag when none is given.
    def self.default_service
      name = File.basename($PROGRAM_NAME.to_s, ".rb")
      name.empty? || name == "-e" ? FALLBACK_SERVICE : name
    end

    # value with every String, Array and Hash in it a frozen copy.
    def self.deep_frozen(value)
      case value
      when String then value.dup.freeze
      when Array then value.map { |item| deep_frozen(item) }.freeze
      when Hash then value.to_h { |key, item| [deep_frozen(key), deep_frozen(item)] }.freeze
      else value
      end
    end

    private

    # [the checked value, where it came from].
    def resolve(setting, keywords, environment)
      if keywords.key?(setting.name)
        value = keywords[setting.name]
        return [checked(setting, value) { "#{setting.expected}, got #{setting.describe(value)}" }, "keyword"]
      end

      raw = setting.variable && environment[setting.variable]
      return [setting.default, "default"] if raw.nil? || raw.empty?

      value = begin
        setting.from_text(raw)
      rescue ::ArgumentError => e
        # SONDE_NO_SIGNALS=2 is not about "signals must be true or false".
        reason = setting.text == :negated_boolean ? e.message : "#{setting.expected} (#{e.message})"
        raise Sonde::ArgumentError, "#{setting.variable}=#{Setting.shown(raw)}: #{reason}"
      end
      [checked(setting, value) { "#{setting.variable}=#{Setting.shown(raw)}: #{setting.expected}" }, setting.variable]
    end

    def checked(setting, value)
      checked = setting.check(value)
      raise Sonde::ArgumentError, yield if checked.equal?(Setting::REFUSED)

      checked
    end

    # heap: true with an explicit alloc: false asks for a live heap made of
    # allocation samples while refusing them: say so rather than pick one.
    def check_heap_needs_allocations
      return unless heap && !alloc && @sources[:alloc] != "default"

      raise Sonde::ArgumentError, "heap: true needs allocation sampling, but #{@sources[:alloc] == "keyword" ? "alloc: false" : "#{@sources[:alloc]}=0"} " \
                                  "turns it off; drop that setting (heap: true samples allocations by itself)"
    end

    # The export value's entries, read against the exporter registry: an
    # unknown kind or option, or a bad option value, is refused at the start
    # it was given to, continuous or not; only continuous mode builds the
    # exporters (and creates a dir: directory). Errors name the setting as
    # the user gave it.
    def check_export
      require_relative "exporters"
      source = @sources[:export]
      Exporters.specs(export, option_name: source.start_with?("SONDE_") ? source : "export")
    end
  end
end
