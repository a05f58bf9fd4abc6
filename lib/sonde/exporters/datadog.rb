# frozen_string_literal: true

require "json"
require "time"
require_relative "base"
require_relative "http_delivery"
require_relative "multipart"
require_relative "../labels"
require_relative "../pprof/label_renamer"
require_relative "../profile_names"
require_relative "../version"

module Sonde
  module Exporters
    # Sends each profile to a Datadog agent, which forwards it to Datadog's
    # profiling intake, in the form dd-trace-rb uses (through libdatadog):
    #
    #   POST <agent>/profiling/v1/input
    #   Content-Type: multipart/form-data
    #     part "event" (event.json, application/json):
    #       {"attachments":["rubyprofile.pprof"],"tags_profiler":"k:v,...",
    #        "start":ISO8601,"end":ISO8601,"family":"ruby","version":"4"}
    #     part "rubyprofile.pprof" (rubyprofile.pprof): the gzip'd pprof
    #   DD-EVP-ORIGIN: sonde, DD-EVP-ORIGIN-VERSION: <Sonde::VERSION>
    #
    # The agent adds the API key. Runs on its own thread
    # ("sonde-export-datadog"), see Base.
    class Datadog < Base
      include HTTPDelivery
      extend HTTPDelivery::Target

      def self.kind
        "datadog"
      end

      def self.option_names
        %i[timeout]
      end

      PATH = "/profiling/v1/input"
      # The attachment name dd-trace-rb gives its pprof.
      PPROF_FILENAME = "rubyprofile.pprof"
      EVENT_FIELD = "event"
      EVENT_FILENAME = "event.json"
      # Version of the intake's event format, not of anything of ours.
      INTAKE_VERSION = "4"
      FAMILY = "ruby"
      # The intake keeps a library's name and version from these headers; the
      # profile comes from Sonde, so Sonde is named, not dd-trace-rb.
      ORIGIN = "sonde"
      # Datadog's names for tags Sonde names otherwise.
      TAG_NAMES = { "pid" => "process_id" }.freeze
      # Datadog's names for sample labels: its endpoint profiling groups
      # samples by "trace endpoint" (what Sonde::Middleware and the job
      # integrations label "endpoint") and links them to traces by "local
      # root span id" and "span id", numbers (Sonde writes hex strings,
      # ProfileNames' :span_id and :local_root_span_id). Thread labels
      # already have its names.
      LABEL_NAMES = { Labels::ENDPOINT => "trace endpoint" }.freeze
      SPAN_LABEL_NAMES = { span_id: "span id", local_root_span_id: "local root span id" }.freeze
      # What dd-trace-rb tags every Ruby profile with, so the UI knows the language.
      LANGUAGE_TAGS = { "language" => "ruby", "runtime" => "ruby" }.freeze
      # "," separates tags and ":" a tag's name from its value.
      INVALID_TAG_NAME_CHARACTERS = /[,:\s]/.freeze
      INVALID_TAG_VALUE_CHARACTERS = /[,\s]/.freeze

      def initialize(base_uri, settings)
        super(settings)
        @base_uri = base_uri
        span_labels = SPAN_LABEL_NAMES.to_h { |name, theirs| [ProfileNames.label(name), theirs] }
        @label_renamer = Pprof::LabelRenamer.new(LABEL_NAMES.merge(span_labels), numeric: span_labels.keys)
        @renamed = nil # [profile, its pprof with Datadog's label names]: a retry reuses it
      end

      # The event.json document for one profile.
      def event(exported_profile)
        {
          attachments: [PPROF_FILENAME],
          tags_profiler: tags_profiler(exported_profile.tags || {}),
          start: exported_profile.start_time.utc.iso8601(9),
          end: exported_profile.end_time.utc.iso8601(9),
          family: FAMILY,
          version: INTAKE_VERSION
        }
      end

      private

      def deliver(exported_profile)
        form = Multipart.new
        form.add_file(EVENT_FIELD, filename: EVENT_FILENAME, content_type: "application/json",
                                   data: JSON.generate(event(exported_profile)))
        form.add_file(PPROF_FILENAME, filename: PPROF_FILENAME, content_type: "application/octet-stream",
                                      data: datadog_pprof(exported_profile))
        headers = {
          "Content-Type" => form.content_type,
          "DD-EVP-ORIGIN" => ORIGIN,
          "DD-EVP-ORIGIN-VERSION" => Sonde::VERSION
        }
        post(endpoint(@base_uri, PATH), form.body, headers)
      end

      # Runs on the exporter's thread. A profile the renamer cannot read
      # (none of Sonde's should be) goes out with Sonde's label names.
      def datadog_pprof(exported_profile)
        return @renamed.last if @renamed&.first.equal?(exported_profile)

        pprof = begin
          @label_renamer.call(exported_profile.pprof)
        rescue Pprof::DecodeError
          exported_profile.pprof
        end
        @renamed = [exported_profile, pprof]
        pprof
      end

      def tags_profiler(tags)
        tags = { "service" => settings.service }.merge(LANGUAGE_TAGS).merge(tags.transform_keys(&:to_s))
        tags.map do |key, value|
          name = TAG_NAMES.fetch(key, key).gsub(INVALID_TAG_NAME_CHARACTERS, "_")
          "#{name}:#{value.to_s.gsub(INVALID_TAG_VALUE_CHARACTERS, "_")}"
        end.join(",")
      end
    end

    Registry.register(Datadog)
  end
end
