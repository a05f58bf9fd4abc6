# frozen_string_literal: true

require_relative "errors"
require_relative "setting"
require_relative "options"
require_relative "exporters/registry"
require_relative "exporters/settings"

module Sonde
  # One profile of continuous mode, as the exporters take it.
  #   pprof:      gzip'd pprof bytes (binary String), the tags already in it
  #               as comments
  #   start_time, end_time: Time
  #   tags:       Hash of String => String (service, env, version, host, pid,
  #               runtime_version, sonde_version and the user's tags)
  ExportedProfile = Struct.new(:pprof, :start_time, :end_time, :tags, keyword_init: true)

  # Where continuous mode sends its profiles. An export value is one entry
  # or several: a String "kind:TARGET?name=value&name=value" (comma-separated
  # for several; "%2C" for a comma inside a value) or a Hash
  # {kind: :pyroscope, url: "...", tenant: "a"}, or an Array of those.
  # Exporters.specs reads and checks it without touching anything (Options
  # calls it at every start); Exporters.parse builds the exporters (creating
  # a dir: directory). Each exporter delivers on its own background thread
  # (see Exporters::Base), so parse and #export are the only parts that run
  # on application threads.
  module Exporters
    # Each exporter's file (and what it needs: fileutils, json, time, uri,
    # socket) loads when its kind is first named (Registry.fetch) or its
    # class first referenced.
    autoload :Base, File.expand_path("exporters/base", __dir__)
    autoload :RetryableError, File.expand_path("exporters/base", __dir__)
    autoload :PermanentError, File.expand_path("exporters/base", __dir__)
    autoload :HTTPDelivery, File.expand_path("exporters/http_delivery", __dir__)
    autoload :Multipart, File.expand_path("exporters/multipart", __dir__)
    autoload :Directory, File.expand_path("exporters/directory", __dir__)
    autoload :Pyroscope, File.expand_path("exporters/pyroscope", __dir__)
    autoload :Datadog, File.expand_path("exporters/datadog", __dir__)
    autoload :Otlp, File.expand_path("exporters/otlp", __dir__)

    # One export entry, read and checked: the exporter class, its target and
    # its options (Settings rows), and the entry as error messages show it
    # (secrets hidden).
    Spec = Struct.new(:exporter_class, :target, :options, :shown, keyword_init: true)

    module_function

    # What an export value may be, for error messages.
    def accepted
      "one or more of #{Registry.forms}, comma-separated, each optionally followed by " \
        "?name=value&... (its options: docs/production.md), or a Hash such as {kind: :dir, path: \"profiles\", keep: 20}"
    end

    # The Specs of value. Raises Sonde::ArgumentError naming option_name (the
    # variable or option the value came from), the entry and what is
    # accepted. nil and blank Strings stand for no exporter.
    def specs(value, option_name: "SONDE_EXPORT")
      entries = value.is_a?(Array) ? value : [value]
      entries.flat_map { |entry| specs_of(entry, option_name) }
    end

    # The exporters of value, sharing service and, where they take them, the
    # defaults (Settings rows; an entry's own options win). A dir: directory
    # is created here when missing, so an unwritable one fails now rather
    # than at the first profile.
    def parse(value, option_name: "SONDE_EXPORT", service: Options.default_service, **defaults)
      from_specs(specs(value, option_name: option_name), option_name: option_name, service: service, **defaults)
    end

    # The exporters of specs read earlier (Options#export_specs).
    def from_specs(specs, option_name:, service:, **defaults)
      Settings.new(service: service, **defaults) # checks the defaults, whichever exporter takes them
      specs.map { |spec| build(spec, service, defaults, option_name) }
    end

    def build(spec, service, defaults, option_name)
      exporter_class = spec.exporter_class
      target = begin
        exporter_class.prepare_target(spec.target)
      rescue TargetError => e
        reject(option_name, spec.shown, e.message)
      end
      taken = defaults.slice(*option_names(exporter_class)).merge(spec.options)
      exporter_class.new(target, Settings.new(service: service, **taken))
    end

    def option_names(exporter_class)
      exporter_class.option_names + Settings::COMMON
    end

    def specs_of(entry, option_name)
      case entry
      when nil then []
      when String
        return [] if entry.strip.empty?

        parts = entry.split(",", -1).map(&:strip)
        reject(option_name, shown_text(entry), "an empty entry (two commas in a row, or one at an end)") if
          parts.any?(&:empty?)
        parts.map { |part| spec_of_text(part, option_name) }
      when Hash then [spec_of_hash(entry, option_name)]
      else
        raise Sonde::ArgumentError, "#{option_name} must be a String, a Hash or an Array of those, " \
                                    "got #{Setting.shown(entry)} (#{entry.class}); accepted: #{accepted}"
      end
    end

    # "kind:TARGET?name=value&...": the target ends at the first "?".
    def spec_of_text(part, option_name)
      shown = shown_text(part)
      reject(option_name, shown, "not valid UTF-8") unless part.valid_encoding?
      kind, separator, rest = part.partition(":")
      exporter_class = separator.empty? ? nil : Registry.fetch(kind)
      reject(option_name, shown, "unknown exporter #{kind.inspect}") unless exporter_class
      target_text, _, query = rest.partition("?")
      pairs = query_pairs(query) || reject(option_name, shown, "its options must be name=value&name=value, " \
                                                               "with %XX for a byte that would end the value")
      options = options_from(exporter_class, pairs, shown, option_name) { |row, text| value_of_text(row, text) }
      Spec.new(exporter_class: exporter_class, target: checked_target(exporter_class, target_text, shown, option_name),
               options: options, shown: shown)
    end

    # "keep=3&token=a%2Cb" -> [["keep", "3"], ["token", "a,b"]], or nil. Only
    # %XX is decoded, not "+" (a token may hold one).
    def query_pairs(query)
      return [] if query.empty?

      query.split("&", -1).map do |pair|
        name, separator, value = pair.partition("=")
        return nil if name.empty? || separator.empty?

        value = value.b.gsub(/%\h\h/n) { |escape| escape[1, 2].hex.chr }.force_encoding(Encoding::UTF_8)
        return nil unless value.valid_encoding?

        [name, value]
      end
    end

    # {kind: :pyroscope, url: "http://...", tenant: "a"} (String keys too).
    def spec_of_hash(hash, option_name)
      hash = hash.transform_keys { |key| key.is_a?(String) ? key.to_sym : key }
      shown = shown_hash(hash)
      exporter_class = Registry.fetch(hash[:kind]) if hash[:kind].is_a?(String) || hash[:kind].is_a?(Symbol)
      reject(option_name, shown, "kind: must name an exporter (#{Registry.kinds.join(", ")})") unless exporter_class
      target_key = exporter_class.target_key
      target_text = hash[target_key]
      unless target_text.is_a?(String)
        reject(option_name, shown, "#{target_key}: must be a String (the #{exporter_class.kind} exporter's target)")
      end
      pairs = hash.reject { |key, _| key == :kind || key == target_key }.map { |key, value| [key.to_s, value] }
      options = options_from(exporter_class, pairs, shown, option_name) { |_row, value| value }
      Spec.new(exporter_class: exporter_class, target: checked_target(exporter_class, target_text, shown, option_name),
               options: options, shown: shown)
    end

    # [[name, raw value], ...] -> {name => checked value}; value_of turns a
    # raw value into what the row checks.
    def options_from(exporter_class, pairs, shown, option_name)
      names = option_names(exporter_class)
      pairs.each_with_object({}) do |(name, raw), options|
        row = Settings::BY_NAME[name.to_sym] if names.include?(name.to_sym)
        unless row
          reject(option_name, shown, "unknown option #{name.inspect} for #{exporter_class.kind}: " \
                                     "its options are #{names.join(", ")}")
        end
        reject(option_name, shown, "#{name} is given twice") if options.key?(row.name)
        begin
          options[row.name] = Settings.checked(row, yield(row, raw))
        rescue Sonde::ArgumentError => e
          reject(option_name, shown, e.message)
        end
      end.freeze
    end

    def value_of_text(row, text)
      row.from_text(text)
    rescue ::ArgumentError
      raise Sonde::ArgumentError, "#{row.expected}, got #{row.describe(text)}"
    end

    def checked_target(exporter_class, text, shown, option_name)
      exporter_class.check_target(text)
    rescue TargetError => e
      reject(option_name, shown, e.message)
    end

    # The entry without any user:password of a URL or secret option's value:
    # error messages end up in logs.
    def shown_text(entry)
      secrets = Settings::ROWS.select(&:secret?).map(&:name).join("|")
      entry.to_s.scrub.sub(%r{//[^/@]*@}, "//***@").gsub(/\b(#{secrets})=[^&,]*/, '\1=***').inspect
    end

    def shown_hash(hash)
      hidden = hash.to_h do |key, value|
        row = Settings::BY_NAME[key]
        value = "***" if row&.secret?
        value = shown_text(value)[1..-2] if value.is_a?(String) && !row&.secret?
        [key, value]
      end
      Setting.shown(hidden)
    end

    # "export: "dir:" is not accepted: ...", or for a variable, as every
    # variable's error reads, "SONDE_EXPORT="dir:": not accepted: ...".
    def reject(option_name, shown, reason)
      where = if option_name.start_with?("SONDE_")
                "#{option_name}=#{shown}: not accepted"
              else
                "#{option_name}: #{shown} is not accepted"
              end
      raise Sonde::ArgumentError, "#{where}: #{reason}; accepted: #{accepted}"
    end
  end
end
