# frozen_string_literal: true

require_relative "errors"
require_relative "version"

module Sonde
  # Every setting of Sonde.start, resolved and validated at the boundary.
  #
  # Each setting can be given as a keyword or as an environment variable
  # (SONDE_*); a keyword wins over the variable, the variable over the
  # default. A bad value is reported with the setting's name (and the
  # variable's, when it came from one), the value and what is accepted,
  # before anything native is touched. #sources says where each value came
  # from (Sonde.configuration shows it).
  class Options
    Setting = Struct.new(:name, :default, :variable, :kind, keyword_init: true)

    RATE_RANGE = (1..5000).freeze
    MAX_FRAMES_RANGE = (1..10_000).freeze
    # Percent of wall time sampling may take; above 0, at most this.
    OVERHEAD_TARGET_MAX = 20
    # Seconds between flushes in continuous mode.
    EVERY_RANGE = (1..3600).freeze
    DEFAULT_EXPORT = "dir:sonde-profiles"
    TRUE_WORDS = %w[1 true yes on].freeze
    FALSE_WORDS = %w[0 false no off].freeze
    # A bad value is echoed in the error message, cut to this many characters.
    MAX_SHOWN = 120

    SETTINGS = [
      Setting.new(name: :rate, default: 100, variable: "SONDE_RATE", kind: :integer),
      Setting.new(name: :max_frames, default: 400, variable: "SONDE_MAX_FRAMES", kind: :integer),
      Setting.new(name: :signals, default: true, variable: "SONDE_NO_SIGNALS", kind: :negated_boolean),
      Setting.new(name: :overhead_target, default: 1.0, variable: "SONDE_OVERHEAD_TARGET", kind: :number),
      Setting.new(name: :gc, default: true, variable: "SONDE_GC", kind: :boolean),
      Setting.new(name: :continuous, default: false, variable: nil, kind: :boolean),
      Setting.new(name: :every, default: 60, variable: "SONDE_EVERY", kind: :number),
      Setting.new(name: :export, default: DEFAULT_EXPORT, variable: "SONDE_EXPORT", kind: :string),
      Setting.new(name: :service, default: nil, variable: "SONDE_SERVICE", kind: :string),
      Setting.new(name: :env, default: nil, variable: "SONDE_ENV", kind: :string),
      Setting.new(name: :version, default: nil, variable: "SONDE_VERSION", kind: :string),
      Setting.new(name: :tags, default: {}.freeze, variable: "SONDE_TAGS", kind: :tags),
    ].freeze
    BY_NAME = SETTINGS.to_h { |setting| [setting.name, setting] }.freeze
    DEFAULTS = SETTINGS.to_h { |setting| [setting.name, setting.default] }.freeze

    attr_reader(*SETTINGS.map(&:name), :sources)

    def initialize(environment: ENV, **keywords)
      unknown = keywords.keys - BY_NAME.keys
      unless unknown.empty?
        raise Sonde::ArgumentError,
              "unknown option#{"s" if unknown.size > 1} #{unknown.map(&:inspect).join(", ")}; " \
              "accepted: #{BY_NAME.keys.map(&:inspect).join(", ")}"
      end

      @sources = {}
      @raw_environment = {}
      SETTINGS.each do |setting|
        value, source = pick(setting, keywords, environment)
        instance_variable_set(:"@#{setting.name}", validate(setting.name, value, source))
        @sources[setting.name] = source
      end
      @service ||= Options.default_service
      @sources.freeze
      remove_instance_variable(:@raw_environment)
      freeze
    end

    def to_h
      SETTINGS.to_h { |setting| [setting.name, public_send(setting.name)] }
    end

    # The arguments Sonde::Native.start takes, in its order.
    def native_arguments
      [rate, max_frames, signals, overhead_target.to_f, gc]
    end

    # The program's name, for the service tag when none is given.
    def self.default_service
      name = File.basename($PROGRAM_NAME.to_s, ".rb")
      name.empty? || name == "-e" ? "ruby" : name
    end

    private

    def pick(setting, keywords, environment)
      return [keywords[setting.name], "keyword"] if keywords.key?(setting.name)

      raw = setting.variable && environment[setting.variable]
      return [setting.default, "default"] if raw.nil? || raw.empty?

      @raw_environment[setting.name] = raw
      [from_environment(setting, raw), setting.variable]
    end

    # Environment values are strings; turn them into what the keyword takes.
    def from_environment(setting, raw)
      text = raw.strip
      case setting.kind
      when :integer then Integer(text, 10)
      when :number then Options.parse_float(text)
      when :boolean then boolean_word(setting, text)
      when :negated_boolean then !boolean_word(setting, text)
      when :tags then Options.parse_tags(text, setting.variable)
      else text
      end
    rescue ::ArgumentError
      raise Sonde::ArgumentError, "#{setting.variable}=#{Options.shown(raw)}: #{expected(setting.name)}"
    end

    def boolean_word(setting, text)
      return true if TRUE_WORDS.include?(text.downcase)
      return false if FALSE_WORDS.include?(text.downcase)

      raise Sonde::ArgumentError,
            "#{setting.variable}=#{Options.shown(text)}: expected one of #{(TRUE_WORDS + FALSE_WORDS).join(", ")}"
    end

    def validate(name, value, source)
      case name
      when :rate then integer_in(name, value, RATE_RANGE, source)
      when :max_frames then integer_in(name, value, MAX_FRAMES_RANGE, source)
      when :overhead_target then number_in(name, value, 0, OVERHEAD_TARGET_MAX, source)
      when :every then number_in(name, value, EVERY_RANGE.min, EVERY_RANGE.max, source)
      when :signals, :gc, :continuous then boolean(name, value, source)
      when :export then validate_export(value, source)
      when :service, :env, :version then optional_string(name, value, source)
      when :tags then validate_tags(value, source)
      end
    end

    def fail_with(name, value, source)
      where = if source.start_with?("SONDE_")
                "#{source}=#{Options.shown(@raw_environment.fetch(name, value).to_s)}"
              else
                "#{name}: #{describe(value)}"
              end
      raise Sonde::ArgumentError, "#{where}: #{expected(name)}"
    end

    def expected(name)
      case name
      when :rate then "rate must be an Integer from #{RATE_RANGE.min} to #{RATE_RANGE.max} (samples per second)"
      when :max_frames
        "max_frames must be an Integer from #{MAX_FRAMES_RANGE.min} to #{MAX_FRAMES_RANGE.max} (frames per stack)"
      when :overhead_target
        "overhead_target must be a number above 0 and at most #{OVERHEAD_TARGET_MAX} (percent of wall time)"
      when :every then "every must be a number of seconds from #{EVERY_RANGE.min} to #{EVERY_RANGE.max}"
      when :signals, :gc, :continuous then "#{name} must be true or false"
      when :export then "export must be one or more of dir:PATH, pyroscope:URL, datadog:URL, comma-separated"
      when :service, :env, :version then "#{name} must be a non-empty String (valid UTF-8, no control characters)"
      when :tags then "tags must be a Hash of String/Symbol => String (valid UTF-8), or \"key:value,key:value\""
      end
    end

    def describe(value)
      "#{Options.shown(value)} (#{value.class})"
    end

    # value.inspect, cut to MAX_SHOWN characters: one line, whatever the value.
    def self.shown(value)
      text = begin
        value.inspect.to_s
      rescue StandardError => e
        "#<#{value.class} whose inspect raised #{e.class}>"
      end
      text.length > MAX_SHOWN ? "#{text[0, MAX_SHOWN]}...(#{text.length} characters)" : text
    end

    # Float(text) without Ruby's "Float 1e999 out of range" warning (the
    # value, Infinity, is then refused with the usual message).
    def self.parse_float(text)
      verbose = $VERBOSE
      $VERBOSE = nil
      Float(text)
    ensure
      $VERBOSE = verbose
    end

    # Text that can go into a tag, a file name or an HTTP header: a String
    # of valid UTF-8 (or ASCII) with something besides spaces, and no
    # control characters.
    def self.clean_text?(value)
      value.is_a?(String) && value.valid_encoding? && !value.strip.empty? && !value.match?(/[[:cntrl:]]/)
    end

    # An explicit keyword gets "rate: 0 (Integer): rate must be ..."; the
    # old wording "rate must be ..., got 0 (Integer)" reads better alone.
    def integer_in(name, value, range, source)
      return value if value.is_a?(Integer) && range.cover?(value)

      keyword_error(name, value, source)
    end

    def number_in(name, value, low, high, source)
      if value.is_a?(Numeric) && !value.is_a?(Complex) && value.positive? && value >= low && value <= high
        return value
      end

      keyword_error(name, value, source)
    end

    def boolean(name, value, source)
      return value if [true, false].include?(value)

      keyword_error(name, value, source)
    end

    def optional_string(name, value, source)
      return nil if value.nil?
      return value.dup.freeze if Options.clean_text?(value)

      keyword_error(name, value, source)
    end

    def validate_export(value, source)
      specs = value.is_a?(Array) ? value : [value]
      # split with -1 keeps empty entries ("dir:a," has one), refused here
      # with this option's name rather than later by the exporters.
      valid = specs.all? do |spec|
        parts = spec.is_a?(String) && spec.valid_encoding? ? spec.split(",", -1) : []
        !parts.empty? && parts.all? { |part| part.match?(/\A(dir|pyroscope|datadog):\S+\z/) }
      end
      return specs.join(",").freeze if valid && !specs.empty?

      keyword_error(:export, value, source)
    end

    def validate_tags(value, source)
      if value.is_a?(Hash) && value.all? { |k, v| tag_key?(k) && v.is_a?(String) && v.valid_encoding? }
        return value.to_h { |k, v| [k.to_s.freeze, v.dup.freeze] }.freeze
      end

      keyword_error(:tags, value, source)
    end

    def tag_key?(key)
      (key.is_a?(String) || key.is_a?(Symbol)) && key.to_s.valid_encoding?
    end

    def keyword_error(name, value, source)
      fail_with(name, value, source) if source.start_with?("SONDE_")
      raise Sonde::ArgumentError, "#{expected(name)}, got #{describe(value)}"
    end

    # "team:web,region:eu" -> {"team" => "web", "region" => "eu"}. An empty
    # pair (",", "a:b,,c:d", "a:b,") is refused, as SONDE_EXPORT refuses one.
    def self.parse_tags(text, variable)
      text.split(",", -1).to_h do |pair|
        key, value = pair.split(":", 2).map(&:strip)
        if key.to_s.empty? || value.to_s.empty?
          raise Sonde::ArgumentError, "#{variable}=#{Options.shown(text)}: tags must be \"key:value,key:value\" " \
                                      "(#{pair.inspect} is not key:value)"
        end
        [key, value]
      end
    end
  end
end
