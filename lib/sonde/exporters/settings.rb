# frozen_string_literal: true

require_relative "../errors"

module Sonde
  module Exporters
    # The settings every exporter of one Exporters.parse call shares,
    # validated at the boundary: a mistake is reported with the option's
    # name, the bad value and what is accepted, before any exporter exists.
    # Immutable, so the exporter threads read it without a lock.
    class Settings
      DEFAULTS = { service: nil, keep: 10, timeout: 10, queue_size: 4, max_attempts: 3, auth: nil, tenant: nil }.freeze
      KEEP_RANGE = (1..100_000).freeze
      QUEUE_SIZE_RANGE = (1..1000).freeze
      MAX_ATTEMPTS_RANGE = (1..10).freeze
      # Seconds; a network timeout above ten minutes is a typo, not a wish.
      MAX_TIMEOUT = 600
      AUTH_KINDS = %i[basic token].freeze
      # Used when no service is given and the program name says nothing.
      FALLBACK_SERVICE = "ruby"

      attr_reader :service, :keep, :timeout, :queue_size, :max_attempts, :auth, :tenant

      def initialize(**settings)
        unknown = settings.keys - DEFAULTS.keys
        unless unknown.empty?
          raise Sonde::ArgumentError,
                "unknown exporter option#{"s" if unknown.size > 1} #{unknown.map(&:inspect).join(", ")}; " \
                "accepted: #{DEFAULTS.keys.map(&:inspect).join(", ")}"
        end

        values = DEFAULTS.merge(settings)
        @service = validate_service(values[:service])
        @keep = integer_in(:keep, values[:keep], KEEP_RANGE, "files kept by the directory exporter")
        @timeout = validate_timeout(values[:timeout])
        @queue_size = integer_in(:queue_size, values[:queue_size], QUEUE_SIZE_RANGE, "profiles waiting per exporter")
        @max_attempts = integer_in(:max_attempts, values[:max_attempts], MAX_ATTEMPTS_RANGE, "tries per profile")
        @auth = validate_auth(values[:auth])
        @tenant = validate_header_value(:tenant, values[:tenant])
        freeze
      end

      # How long one profile may take over all its attempts, backoff included:
      # each attempt may use the timeout, and the backoff between attempts is
      # cut short so that the last one starts within this budget.
      def retry_budget
        timeout * max_attempts
      end

      # The service name reduced to characters that are safe in a file name.
      def file_safe_service
        service.gsub(/[^A-Za-z0-9._-]/, "_")
      end

      def self.describe(value)
        "#{value.inspect} (#{value.class})"
      end

      private

      def validate_service(value)
        value = default_service if value.nil?
        return value if value.is_a?(String) && !value.strip.empty? && !value.match?(/[[:cntrl:]]/)

        raise Sonde::ArgumentError,
              "service must be a non-empty String without control characters, got #{Settings.describe(value)}"
      end

      def default_service
        name = File.basename($PROGRAM_NAME.to_s, ".rb")
        name.empty? || name == "-e" ? FALLBACK_SERVICE : name
      end

      def integer_in(name, value, range, unit)
        return value if value.is_a?(Integer) && range.cover?(value)

        raise Sonde::ArgumentError,
              "#{name} must be an Integer from #{range.min} to #{range.max} (#{unit}), got #{Settings.describe(value)}"
      end

      def validate_timeout(value)
        if value.is_a?(Numeric) && value.real? && value.positive? && value <= MAX_TIMEOUT
          return value.is_a?(Integer) ? value : value.to_f
        end

        raise Sonde::ArgumentError,
              "timeout must be a number of seconds above 0 and at most #{MAX_TIMEOUT}, got #{Settings.describe(value)}"
      end

      def validate_auth(value)
        return nil if value.nil?

        accepted = 'accepted: {basic: "user:password"} or {token: "..."}'
        unless value.is_a?(Hash) && value.size == 1 && AUTH_KINDS.include?(value.keys.first)
          raise Sonde::ArgumentError, "auth must be a Hash with one key, got #{Settings.describe(value)}; #{accepted}"
        end

        kind, secret = value.first
        valid = secret.is_a?(String) && !secret.empty? && !secret.match?(/[[:cntrl:]]/)
        valid &&= secret.include?(":") if kind == :basic
        # The secret itself is never echoed back: error messages end up in logs.
        raise Sonde::ArgumentError, "auth #{kind.inspect} is not acceptable (#{secret.class}); #{accepted}" unless valid

        { kind => secret }.freeze
      end

      def validate_header_value(name, value)
        return nil if value.nil?
        return value.dup.freeze if value.is_a?(String) && !value.empty? && !value.match?(/[[:cntrl:]]/)

        raise Sonde::ArgumentError,
              "#{name} must be a non-empty String without control characters, got #{Settings.describe(value)}"
      end
    end
  end
end
