# frozen_string_literal: true

require_relative "errors"

module Sonde
  # One row of a settings table (Sonde.start's options, an exporter's
  # options): the name, the default, the environment variable that may give
  # it, how a value written as text is read (an environment variable, a
  # "?keep=3" in an export entry), and what is accepted, as one check and the
  # sentence that describes it. Options and Exporters::Settings are tables of
  # these, so a setting's rule and its error message live in one row.
  class Setting
    # What a check returns for a value it refuses (nil can be a good value).
    REFUSED = Object.new.freeze
    TRUE_WORDS = %w[1 true yes on].freeze
    FALSE_WORDS = %w[0 false no off].freeze
    # Multipliers of a size written as text ("64M").
    SIZE_SUFFIXES = { "" => 1, "K" => 1024, "M" => 1024**2, "G" => 1024**3 }.freeze
    # A bad value is echoed in error messages, cut to this many characters.
    MAX_SHOWN = 120

    attr_reader :name, :default, :variable, :text

    # text: how a value written as text becomes the value a keyword takes:
    # :integer, :number, :boolean, :negated_boolean (SONDE_NO_SIGNALS=1 means
    # signals: false), :size ("64M"), :tags ("k:v,k:v") or :string.
    # expected: "rate must be an Integer from 1 to 5000 (...)", or a callable
    # that returns it, for a sentence read from elsewhere (the exporter
    # registry) only when a message needs it.
    # check: value -> the value kept (frozen), or REFUSED.
    def initialize(name:, default:, expected:, check:, variable: nil, text: :string, secret: false)
      @name = name
      @default = default
      @expected = expected
      @check = check
      @variable = variable
      @text = text
      @secret = secret
      freeze
    end

    # The sentence that says what is accepted.
    def expected
      @expected.respond_to?(:call) ? @expected.call : @expected
    end

    # A secret (a token, a password) is never echoed in an error message:
    # messages end up in logs.
    def secret?
      @secret
    end

    # The value kept for value, or REFUSED.
    def check(value)
      @check.call(value)
    end

    # The value that text (an environment variable's, a query parameter's)
    # stands for. Raises ::ArgumentError when text does not read as one.
    def from_text(text)
      text = text.strip
      case @text
      when :integer then Integer(text, 10)
      when :number then Setting.parse_float(text)
      when :boolean then Setting.boolean_word(text)
      when :negated_boolean then !Setting.boolean_word(text)
      when :size then Setting.parse_size(text)
      when :tags then Setting.parse_tags(text)
      else text
      end
    end

    # "rate: 0 (Integer)"-style description of a value, secrets hidden.
    def describe(value)
      secret? ? "(hidden, #{value.class})" : "#{Setting.shown(value)} (#{value.class})"
    end

    class << self
      # Raises Sonde::ArgumentError naming the given names that are not
      # known ("unknown option :colour; accepted: :rate, ..."); what: "option",
      # "exporter option".
      def refuse_unknown(given, known, what)
        unknown = given - known
        return if unknown.empty?

        raise Sonde::ArgumentError, "unknown #{what}#{"s" if unknown.size > 1} #{unknown.map(&:inspect).join(", ")}; " \
                                    "accepted: #{known.map(&:inspect).join(", ")}"
      end

      # value.inspect, cut to MAX_SHOWN characters: one line, whatever the value.
      def shown(value)
        text = begin
          value.inspect.to_s
        rescue StandardError => e
          "#<#{value.class} whose inspect raised #{e.class}>"
        end
        text.length > MAX_SHOWN ? "#{text[0, MAX_SHOWN]}...(#{text.length} characters)" : text
      end

      # Float(text) without Ruby's "Float 1e999 out of range" warning (the
      # value, Infinity, is then refused by the check with the usual message).
      def parse_float(text)
        verbose = $VERBOSE
        $VERBOSE = nil
        Float(text)
      ensure
        $VERBOSE = verbose
      end

      def boolean_word(text)
        return true if TRUE_WORDS.include?(text.downcase)
        return false if FALSE_WORDS.include?(text.downcase)

        raise ::ArgumentError, "expected one of #{(TRUE_WORDS + FALSE_WORDS).join(", ")}"
      end

      # "1048576", "512K", "64M", "2G" (powers of 1024) -> bytes.
      def parse_size(text)
        match = /\A(\d+)([KMG]?)\z/i.match(text)
        raise ::ArgumentError, "expected bytes, or a number with K, M or G" unless match

        Integer(match[1], 10) * SIZE_SUFFIXES.fetch(match[2].upcase)
      end

      # "team:web,region:eu" -> {"team" => "web", "region" => "eu"}. An empty
      # pair (",", "a:b,,c:d", "a:b,") is refused.
      def parse_tags(text)
        text.split(",", -1).to_h do |pair|
          key, value = pair.split(":", 2).map(&:strip)
          raise ::ArgumentError, "#{pair.inspect} is not key:value" if key.to_s.empty? || value.to_s.empty?

          [key, value]
        end
      end

      # Text that can go into a tag, a file name or an HTTP header: a String
      # of valid UTF-8 (or ASCII) with something besides spaces, and no
      # control characters.
      def clean_text?(value)
        value.is_a?(String) && value.valid_encoding? && !value.strip.empty? && !value.match?(/[[:cntrl:]]/)
      end
    end

    # Checks that rows share; each returns a lambda for Setting.new(check:).
    module Checks
      module_function

      def integer_in(range)
        ->(value) { value.is_a?(Integer) && range.cover?(value) ? value : REFUSED }
      end

      # A real number above 0 (and at least low) and at most high; NaN and
      # Infinity are refused by the comparisons.
      def number_in(low, high)
        lambda do |value|
          real = value.is_a?(Numeric) && value.real?
          real && value.positive? && value >= low && value <= high ? value : REFUSED
        end
      end

      def boolean
        ->(value) { [true, false].include?(value) ? value : REFUSED }
      end

      # nil (not set) or clean text.
      def optional_text
        ->(value) { value.nil? ? nil : (Setting.clean_text?(value) ? value.dup.freeze : REFUSED) }
      end

      # nil, or clean text that matches pattern.
      def optional_text_matching(pattern)
        lambda do |value|
          next nil if value.nil?

          Setting.clean_text?(value) && value.match?(pattern) ? value.dup.freeze : REFUSED
        end
      end

      def optional_integer_in(range)
        ->(value) { value.nil? ? nil : integer_in(range).call(value) }
      end

      def tags
        lambda do |value|
          valid = value.is_a?(Hash) && value.all? do |key, text|
            # No NUL: tags become pprof comments, C strings.
            (key.is_a?(String) || key.is_a?(Symbol)) && key.to_s.valid_encoding? && !key.to_s.include?("\0") &&
              text.is_a?(String) && text.valid_encoding? && !text.include?("\0")
          end
          valid ? value.to_h { |key, text| [key.to_s.freeze, text.dup.freeze] }.freeze : REFUSED
        end
      end
    end
  end
end
