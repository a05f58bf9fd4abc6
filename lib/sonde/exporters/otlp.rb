# frozen_string_literal: true

require "zlib"
require_relative "base"
require_relative "http_delivery"
require_relative "../otlp/profiles_request"
require_relative "../pprof"
require_relative "../version"

module Sonde
  module Exporters
    # Sends each profile as OpenTelemetry's profiles signal, over OTLP/HTTP:
    #
    #   POST <base>/v1development/profiles
    #   Content-Type: application/x-protobuf, Content-Encoding: gzip
    #   body: an ExportProfilesServiceRequest (Otlp::ProfilesRequest)
    #
    # to an OpenTelemetry Collector (its OTLP receiver, port 4318) or a
    # backend that takes OTLP profiles (Grafana Pyroscope, Elastic). A base
    # URL whose path already ends in /v1development/profiles is used as it
    # is. Per the OTLP/HTTP specification, 429, 502, 503 and 504 are retried
    # and any other error status is not; a 200 whose body says some profiles
    # were rejected counts as failed, with the receiver's message. Runs on
    # its own thread ("sonde-export-otlp"), see Base.
    class Otlp < Base
      include HTTPDelivery
      extend HTTPDelivery::Target

      def self.kind
        "otlp"
      end

      def self.option_names
        %i[timeout token basic_auth tenant]
      end

      PATH = "/v1development/profiles"
      CONTENT_TYPE = "application/x-protobuf"
      RETRYABLE_STATUSES = [429, 502, 503, 504].freeze
      SCOPE_NAME = "sonde"
      # Sonde's tags under OpenTelemetry's resource attribute names; the
      # rest keep their names.
      RESOURCE_NAMES = { "service" => "service.name", "host" => "host.name", "pid" => "process.pid",
                         "env" => "deployment.environment.name", "version" => "service.version" }.freeze
      INTEGER_RESOURCE_ATTRIBUTES = %w[process.pid].freeze
      # ExportProfilesServiceResponse.partial_success (field 1), and in it
      # rejected_profiles (1) and error_message (2).
      RESPONSE_PARTIAL_SUCCESS = 1
      PARTIAL_REJECTED = 1
      PARTIAL_MESSAGE = 2

      def initialize(base_uri, settings)
        super(settings)
        @base_uri = base_uri
        @encoded = nil # [profile, its request body]: a retry reuses it
      end

      # {"service.name" => ..., "process.pid" => 4242, ...} for one profile.
      def resource_attributes(exported_profile)
        tags = { "service" => settings.service }.merge((exported_profile.tags || {}).transform_keys(&:to_s))
        attributes = tags.to_h do |key, value|
          name = RESOURCE_NAMES.fetch(key, key)
          [name, INTEGER_RESOURCE_ATTRIBUTES.include?(name) && value.to_s.match?(/\A\d+\z/) ? Integer(value) : value.to_s]
        end
        attributes.merge("process.runtime.name" => "ruby", "process.runtime.version" => RUBY_VERSION,
                         "telemetry.sdk.name" => SCOPE_NAME, "telemetry.sdk.version" => Sonde::VERSION)
      end

      # The uncompressed ExportProfilesServiceRequest for one profile.
      def request_body(exported_profile)
        Sonde::Otlp::ProfilesRequest.new(Pprof.decode(exported_profile.pprof),
                                         resource_attributes: resource_attributes(exported_profile),
                                         scope_name: SCOPE_NAME, scope_version: Sonde::VERSION).to_s
      end

      private

      def deliver(exported_profile)
        headers = auth_headers(@base_uri).merge("Content-Type" => CONTENT_TYPE, "Content-Encoding" => "gzip")
        response = post(profiles_uri, compressed_body(exported_profile), headers)
        check_partial_success(response)
      end

      def profiles_uri
        @base_uri.path.chomp("/").end_with?(PATH) ? endpoint(@base_uri, "") : endpoint(@base_uri, PATH)
      end

      # Runs on the exporter's thread. A profile that cannot be decoded
      # raises (a failure, counted: Sonde's own profiles always decode).
      def compressed_body(exported_profile)
        return @encoded.last if @encoded&.first.equal?(exported_profile)

        body = Zlib.gzip(request_body(exported_profile))
        @encoded = [exported_profile, body]
        body
      end

      def retryable_status?(code)
        RETRYABLE_STATUSES.include?(code)
      end

      def check_partial_success(response)
        rejected, message = partial_success(response.body.to_s.b)
        return unless rejected.positive?

        raise PermanentError, "the receiver rejected #{rejected} profile(s): #{message}"
      end

      # [rejected_profiles, error_message] of a protobuf response; [0, ""]
      # when the body is empty or not one.
      def partial_success(body)
        reader = Pprof::WireReader.new(body)
        rejected = 0
        message = +""
        reader.each_field(0, body.bytesize) do |number, type, start, stop|
          next unless number == RESPONSE_PARTIAL_SUCCESS && type == Pprof::WireReader::LEN

          reader.each_field(start, stop) do |inner, inner_type, value, inner_stop|
            rejected = value if inner == PARTIAL_REJECTED && inner_type == Pprof::WireReader::VARINT
            message = reader.string(value, inner_stop) if inner == PARTIAL_MESSAGE && inner_type == Pprof::WireReader::LEN
          end
        end
        [rejected, message]
      rescue Pprof::DecodeError
        [0, ""]
      end
    end

    Registry.register(Otlp)
  end
end
