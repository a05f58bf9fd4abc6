# frozen_string_literal: true

require_relative "../errors"
require_relative "../setting"

module Sonde
  module Exporters
    # One exporter's settings, validated at the boundary: a mistake is
    # reported with the setting's name, the bad value and what is accepted,
    # before any exporter exists. Each is a row of ROWS (its check and its
    # message in one place); an exporter takes the rows it names
    # (option_names) plus COMMON. Immutable, so the exporter threads read it
    # without a lock.
    class Settings
      # Seconds; a network timeout above ten minutes is a typo, not a wish.
      MAX_TIMEOUT = 600
      ROWS = [
        Setting.new(name: :keep, default: 10, text: :integer, check: Setting::Checks.integer_in(1..100_000),
                    expected: "keep must be an Integer from 1 to 100000 (profiles this process keeps)"),
        Setting.new(name: :max_bytes, default: nil, text: :size,
                    check: Setting::Checks.optional_integer_in(1..(2**62)),
                    expected: "max_bytes must be a positive Integer of bytes (in text, K, M or G may follow: " \
                              "64M), the most the service's profiles may take in the directory"),
        Setting.new(name: :timeout, default: 10, text: :number,
                    check: lambda { |value|
                      checked = Setting::Checks.number_in(0, MAX_TIMEOUT).call(value)
                      checked.is_a?(Rational) ? checked.to_f : checked
                    },
                    expected: "timeout must be a number of seconds above 0 and at most #{MAX_TIMEOUT}"),
        Setting.new(name: :queue_size, default: 4, text: :integer, check: Setting::Checks.integer_in(1..1000),
                    expected: "queue_size must be an Integer from 1 to 1000 (profiles waiting per exporter)"),
        Setting.new(name: :max_attempts, default: 3, text: :integer, check: Setting::Checks.integer_in(1..10),
                    expected: "max_attempts must be an Integer from 1 to 10 (tries per profile)"),
        Setting.new(name: :token, default: nil, secret: true, check: Setting::Checks.optional_text,
                    expected: "token must be a non-empty String without control characters (sent as " \
                              "Authorization: Bearer)"),
        Setting.new(name: :basic_auth, default: nil, secret: true,
                    check: Setting::Checks.optional_text_matching(/\A[^:]+:/),
                    expected: "basic_auth must be \"user:password\" (a String without control characters)"),
        Setting.new(name: :tenant, default: nil, check: Setting::Checks.optional_text,
                    expected: "tenant must be a non-empty String without control characters (sent as X-Scope-OrgID)"),
      ].freeze
      BY_NAME = ROWS.to_h { |row| [row.name, row] }.freeze
      # What every exporter takes: its queue and its retries.
      COMMON = %i[queue_size max_attempts].freeze

      attr_reader :service, *BY_NAME.keys

      # service: the service tag (Options resolves the default); the rest are
      # rows of ROWS. Raises Sonde::ArgumentError for an unknown name or a
      # bad value.
      def initialize(service:, **values)
        Setting.refuse_unknown(values.keys, BY_NAME.keys, "exporter option")
        unless Setting.clean_text?(service)
          raise Sonde::ArgumentError, "service must be a non-empty String without control characters, " \
                                      "got #{Setting.shown(service)} (#{service.class})"
        end

        @service = service.dup.freeze
        ROWS.each do |row|
          value = values.fetch(row.name, row.default)
          instance_variable_set(:"@#{row.name}", Settings.checked(row, value))
        end
        if @token && @basic_auth
          raise Sonde::ArgumentError, "token and basic_auth cannot both be given: one Authorization header"
        end

        freeze
      end

      # The row's value for value, or Sonde::ArgumentError naming the row,
      # the value (unless secret) and what is accepted.
      def self.checked(row, value)
        checked = row.check(value)
        return checked unless checked.equal?(Setting::REFUSED)

        raise Sonde::ArgumentError, "#{row.expected}, got #{row.describe(value)}"
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
    end
  end
end
