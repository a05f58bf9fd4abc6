# frozen_string_literal: true

require "securerandom"
require_relative "protobuf_writer"

module Sonde
  module Otlp
    # One OTLP ExportProfilesServiceRequest, built from a decoded pprof
    # (Sonde::Pprof::Profile): one resource (the service and the profile's
    # tags), one scope (Sonde), and one Profile per pprof sample type, all
    # sharing one ProfilesDictionary. The messages and field numbers are
    # opentelemetry-proto v1.11.0's (opentelemetry/proto/profiles/
    # v1development/profiles.proto and collector/profiles/v1development/
    # profiles_service.proto), written from that specification.
    #
    # What maps to what:
    # - a pprof function, location and stack each become one dictionary
    #   entry; index 0 of every table is its zero value, as the
    #   specification asks;
    # - a sample's labels become attributes, "thread id" and "thread name"
    #   under OpenTelemetry's names (thread.id, thread.name); its trace_id
    #   and span_id labels become the sample's link (the span it ran in);
    # - a sample goes into the Profile of each sample type it has a value
    #   for (0 is no sample there), samples of one identity (stack,
    #   attributes, link) summed into one value; with a timeline, the
    #   identity's moments (the end_timestamp_ns label) are its Sample's
    #   timestamps_unix_nano, one value per timestamp.
    class ProfilesRequest
      # ExportProfilesServiceRequest
      REQUEST_RESOURCE_PROFILES = 1
      REQUEST_DICTIONARY = 2
      # ResourceProfiles and ScopeProfiles
      RESOURCE_PROFILES_RESOURCE = 1
      RESOURCE_PROFILES_SCOPE_PROFILES = 2
      SCOPE_PROFILES_SCOPE = 1
      SCOPE_PROFILES_PROFILES = 2
      # Resource, KeyValue, AnyValue, InstrumentationScope (common/v1)
      RESOURCE_ATTRIBUTES = 1
      KEY_VALUE_KEY = 1
      KEY_VALUE_VALUE = 2
      ANY_VALUE_STRING = 1
      ANY_VALUE_INT = 3
      SCOPE_NAME = 1
      SCOPE_VERSION = 2
      # ProfilesDictionary
      DICTIONARY_MAPPINGS = 1
      DICTIONARY_LOCATIONS = 2
      DICTIONARY_FUNCTIONS = 3
      DICTIONARY_LINKS = 4
      DICTIONARY_STRINGS = 5
      DICTIONARY_ATTRIBUTES = 6
      DICTIONARY_STACKS = 7
      # Profile
      PROFILE_SAMPLE_TYPE = 1
      PROFILE_SAMPLES = 2
      PROFILE_TIME_UNIX_NANO = 3
      PROFILE_DURATION_NANO = 4
      PROFILE_PERIOD_TYPE = 5
      PROFILE_PERIOD = 6
      PROFILE_ID = 7
      # ValueType
      VALUE_TYPE_TYPE = 1
      VALUE_TYPE_UNIT = 2
      # Sample
      SAMPLE_STACK_INDEX = 1
      SAMPLE_ATTRIBUTE_INDICES = 2
      SAMPLE_LINK_INDEX = 3
      SAMPLE_VALUES = 4
      SAMPLE_TIMESTAMPS_UNIX_NANO = 5
      # Stack, Location, Line, Function, Link, KeyValueAndUnit
      STACK_LOCATION_INDICES = 1
      LOCATION_LINES = 3
      LINE_FUNCTION_INDEX = 1
      LINE_LINE = 2
      FUNCTION_NAME = 1
      FUNCTION_SYSTEM_NAME = 2
      FUNCTION_FILENAME = 3
      FUNCTION_START_LINE = 4
      LINK_TRACE_ID = 1
      LINK_SPAN_ID = 2
      ATTRIBUTE_KEY = 1
      ATTRIBUTE_VALUE = 2

      # Sonde's label names that OpenTelemetry's semantic conventions name
      # otherwise.
      ATTRIBUTE_NAMES = { "thread id" => "thread.id", "thread name" => "thread.name" }.freeze
      # The labels that make a sample's link (Sonde's trace context labels,
      # ext/sonde/profile_names.h), and their lengths in hex digits.
      TRACE_ID_LABEL = "trace_id"
      SPAN_ID_LABEL = "span_id"
      # A sample's moment (timeline: true): its timestamp, not an attribute.
      TIMESTAMP_LABEL = "end_timestamp_ns"
      TRACE_ID_HEX_DIGITS = 32
      SPAN_ID_HEX_DIGITS = 16
      # The zero Link the specification asks for: ids of the right lengths,
      # all zero bytes.
      ZERO_LINK = ["\0".b * (TRACE_ID_HEX_DIGITS / 2), "\0".b * (SPAN_ID_HEX_DIGITS / 2)].freeze
      PROFILE_ID_BYTES = 16

      # profile: a Sonde::Pprof::Profile. resource_attributes: Hash of
      # String => String or Integer. scope_name, scope_version: Strings.
      def initialize(profile, resource_attributes:, scope_name:, scope_version:)
        @profile = profile
        @resource_attributes = resource_attributes
        @scope_name = scope_name
        @scope_version = scope_version
        @strings = { "" => 0 }
        @attributes = { nil => 0 }
        @links = { ZERO_LINK => 0 }
        @stacks = { [] => 0 }
        @function_indexes = {}
        @location_indexes = {}
      end

      # The request's bytes (not compressed).
      def to_s
        index_functions_and_locations
        profiles = @profile.sample_types.each_index.map { |type_index| profile_message(type_index) }
        request = ProtobufWriter.new
        request.message(REQUEST_RESOURCE_PROFILES) do |resource_profiles|
          resource_profiles.message(RESOURCE_PROFILES_RESOURCE) { |resource| write_resource(resource) }
          resource_profiles.message(RESOURCE_PROFILES_SCOPE_PROFILES) do |scope_profiles|
            scope_profiles.message(SCOPE_PROFILES_SCOPE) do |scope|
              scope.string(SCOPE_NAME, @scope_name).string(SCOPE_VERSION, @scope_version)
            end
            profiles.each { |bytes| scope_profiles.bytes(SCOPE_PROFILES_PROFILES, bytes) }
          end
        end
        request.message(REQUEST_DICTIONARY) { |dictionary| write_dictionary(dictionary) }
        request.to_s
      end

      private

      def string_index(text)
        @strings[text] ||= @strings.size
      end

      def index_functions_and_locations
        @profile.functions.each_key { |id| @function_indexes[id] = @function_indexes.size + 1 }
        @profile.locations.each_key { |id| @location_indexes[id] = @location_indexes.size + 1 }
      end

      def write_resource(resource)
        @resource_attributes.each do |key, value|
          resource.message(RESOURCE_ATTRIBUTES) do |key_value|
            key_value.string(KEY_VALUE_KEY, key)
            key_value.message(KEY_VALUE_VALUE) { |any| write_any_value(any, value) }
          end
        end
      end

      # A oneof member is written even at its default, so that "" and 0
      # are values, not an unset AnyValue.
      def write_any_value(any, value)
        if value.is_a?(Integer)
          any.varint(ANY_VALUE_INT, value, present: true)
        else
          any.bytes(ANY_VALUE_STRING, value.to_s)
        end
      end

      def profile_message(type_index)
        type, unit = @profile.sample_types.fetch(type_index)
        profile = ProtobufWriter.new
        profile.message(PROFILE_SAMPLE_TYPE) { |value_type| write_value_type(value_type, type, unit) }
        samples_of(type_index).each do |(stack, attributes, link), observed|
          observations(observed).each do |values, timestamps|
            profile.message(PROFILE_SAMPLES) do |sample|
              sample.varint(SAMPLE_STACK_INDEX, stack)
                    .packed_varints(SAMPLE_ATTRIBUTE_INDICES, attributes)
                    .varint(SAMPLE_LINK_INDEX, link)
                    .packed_varints(SAMPLE_VALUES, values)
                    .packed_fixed64(SAMPLE_TIMESTAMPS_UNIX_NANO, timestamps)
            end
          end
        end
        profile.fixed64(PROFILE_TIME_UNIX_NANO, @profile.time_nanos)
        profile.varint(PROFILE_DURATION_NANO, @profile.duration_nanos)
        if @profile.period_type
          profile.message(PROFILE_PERIOD_TYPE) { |value_type| write_value_type(value_type, *@profile.period_type) }
          profile.varint(PROFILE_PERIOD, @profile.period)
        end
        profile.bytes(PROFILE_ID, SecureRandom.random_bytes(PROFILE_ID_BYTES))
        profile.to_s
      end

      def write_value_type(value_type, type, unit)
        value_type.varint(VALUE_TYPE_TYPE, string_index(type)).varint(VALUE_TYPE_UNIT, string_index(unit))
      end

      # {[stack index, attribute indices, link index] => [untimed sum, [[timestamp, value], ...]]}
      def samples_of(type_index)
        @profile.samples.each_with_object({}) do |sample, observed|
          value = sample.values.fetch(type_index)
          next if value.zero?

          entry = (observed[identity_of(sample)] ||= [0, []])
          at = sample.labels[TIMESTAMP_LABEL]
          if at.is_a?(Integer) && at.positive?
            entry[1] << [at, value]
          else
            entry[0] += value
          end
        end
      end

      # One identity's Samples as [values, timestamps] pairs: its moments
      # in time order, one value each, as the specification's per-timestamp
      # shape; what has no moment (the timeline's dropped entries, a profile
      # recorded without one) as one aggregated value beside them. The two
      # cannot share a Sample: values and timestamps must pair up.
      def observations(observed)
        untimed, timed = observed
        samples = []
        unless timed.empty?
          timed.sort_by!(&:first)
          samples << [timed.map(&:last), timed.map(&:first)]
        end
        samples << [[untimed], []] unless untimed.zero?
        samples
      end

      def identity_of(sample)
        @identities ||= {}.compare_by_identity
        @identities[sample] ||= begin
          labels = sample.labels
          link = link_of(labels)
          attributes = labels.filter_map do |name, value|
            next if name == TIMESTAMP_LABEL
            next if link && [TRACE_ID_LABEL, SPAN_ID_LABEL].include?(name)

            attribute_index(ATTRIBUTE_NAMES.fetch(name, name), value)
          end
          [stack_index(sample.location_ids), attributes.sort, link ? link_index(link) : 0]
        end
      end

      # [trace id bytes, span id bytes] from the sample's trace context
      # labels, or nil when it has none (or they are not ids).
      def link_of(labels)
        trace = labels[TRACE_ID_LABEL]
        span = labels[SPAN_ID_LABEL]
        return nil unless hex_id?(trace, TRACE_ID_HEX_DIGITS) && hex_id?(span, SPAN_ID_HEX_DIGITS)

        [[trace].pack("H*"), [span].pack("H*")]
      end

      def hex_id?(value, digits)
        value.is_a?(String) && value.size == digits && value.match?(/\A\h+\z/)
      end

      def stack_index(location_ids)
        @stacks[location_ids] ||= @stacks.size
      end

      def attribute_index(key, value)
        @attributes[[key, value]] ||= @attributes.size
      end

      def link_index(link)
        @links[link] ||= @links.size
      end

      # The tables, each with its zero value first. Strings are indexed
      # while the other tables are written, so they come last.
      def write_dictionary(dictionary)
        dictionary.message(DICTIONARY_MAPPINGS) { |_mapping| nil }
        dictionary.message(DICTIONARY_LOCATIONS) { |_location| nil }
        @profile.locations.each_value { |location| write_location(dictionary, location) }
        dictionary.message(DICTIONARY_FUNCTIONS) { |_function| nil }
        @profile.functions.each_value { |function| write_function(dictionary, function) }
        @links.each_key do |trace_id, span_id|
          dictionary.message(DICTIONARY_LINKS) { |link| link.bytes(LINK_TRACE_ID, trace_id).bytes(LINK_SPAN_ID, span_id) }
        end
        @attributes.each_key { |entry| write_attribute(dictionary, entry) }
        @stacks.each_key do |location_ids|
          dictionary.message(DICTIONARY_STACKS) do |stack|
            stack.packed_varints(STACK_LOCATION_INDICES, location_ids.map { |id| @location_indexes.fetch(id) })
          end
        end
        @strings.each_key { |text| dictionary.bytes(DICTIONARY_STRINGS, text) }
      end

      def write_location(dictionary, location)
        dictionary.message(DICTIONARY_LOCATIONS) do |entry|
          next if location.function_id.zero?

          entry.message(LOCATION_LINES) do |line|
            line.varint(LINE_FUNCTION_INDEX, @function_indexes.fetch(location.function_id))
                .varint(LINE_LINE, location.line)
          end
        end
      end

      def write_function(dictionary, function)
        name = string_index(function.name)
        dictionary.message(DICTIONARY_FUNCTIONS) do |entry|
          entry.varint(FUNCTION_NAME, name)
               .varint(FUNCTION_SYSTEM_NAME, name)
               .varint(FUNCTION_FILENAME, string_index(function.filename))
               .varint(FUNCTION_START_LINE, function.start_line)
        end
      end

      def write_attribute(dictionary, entry)
        dictionary.message(DICTIONARY_ATTRIBUTES) do |attribute|
          next unless entry

          key, value = entry
          attribute.varint(ATTRIBUTE_KEY, string_index(key))
          attribute.message(ATTRIBUTE_VALUE) { |any| write_any_value(any, value) }
        end
      end
    end
  end
end
