# frozen_string_literal: true

require_relative "base"
require_relative "http_delivery"
require_relative "multipart"

module Sonde
  module Exporters
    # Sends each profile to Grafana Pyroscope (or Phlare) through its HTTP
    # ingest API:
    #
    #   POST <base>/ingest?name=<service>{k=v,...}&from=<unix s>&until=<unix s>&format=pprof&spyName=sonde
    #   Content-Type: multipart/form-data, one part "profile" (profile.pprof)
    #
    # with Authorization (Basic or Bearer) and X-Scope-OrgID (tenant) when
    # configured. No sampleRate: for format=pprof the server takes the
    # period and units from the profile itself. Runs on its own thread
    # ("sonde-export-pyroscope"), see Base.
    class Pyroscope < Base
      include HTTPDelivery
      extend HTTPDelivery::Target

      def self.kind
        "pyroscope"
      end

      def self.option_names
        %i[timeout token basic_auth tenant]
      end

      PATH = "/ingest"
      FORM_FIELD = "profile"
      FILENAME = "profile.pprof"
      # The Ruby integration Grafana ships (the pyroscope gem, built on rbspy)
      # sends spyName=rbspy. The server rewrites every function name of an
      # rbspy (or pyspy) profile to "file:-1 - name", because rbspy's profiles
      # carry no usable lines; Sonde's carry file and line per location, so it
      # names itself and the profile is stored as it is.
      SPY_NAME = "sonde"
      # Pyroscope label names are Prometheus label names; a profile with any
      # other is refused whole, so other characters become "_".
      INVALID_LABEL_NAME_CHARACTERS = /[^A-Za-z0-9_]/.freeze
      # These would end the tag list or the value in "name{k=v,...}".
      INVALID_LABEL_VALUE_CHARACTERS = /[{}=,]/.freeze

      def initialize(base_uri, settings)
        super(settings)
        @base_uri = base_uri
      end

      # The `name` query value: service{label=value,...}, labels sorted.
      def application_name(exported_profile)
        labels = (exported_profile.tags || {}).reject { |key, _| key.to_s == "service" }.map do |key, value|
          name = key.to_s.gsub(INVALID_LABEL_NAME_CHARACTERS, "_")
          name = "_#{name}" if name.match?(/\A\d/)
          "#{name}=#{value.to_s.gsub(INVALID_LABEL_VALUE_CHARACTERS, "_")}"
        end
        "#{settings.service.gsub(/[{}]/, "_")}{#{labels.sort.join(",")}}"
      end

      private

      def deliver(exported_profile)
        query = URI.encode_www_form(
          name: application_name(exported_profile),
          from: exported_profile.start_time.to_i,
          until: exported_profile.end_time.to_i,
          format: "pprof",
          spyName: SPY_NAME
        )
        form = Multipart.new.add_file(FORM_FIELD, filename: FILENAME, content_type: "application/octet-stream",
                                                  data: exported_profile.pprof)
        headers = auth_headers(@base_uri).merge("Content-Type" => form.content_type)
        post(endpoint(@base_uri, PATH, query), form.body, headers)
      end
    end

    Registry.register(Pyroscope)
  end
end
