# frozen_string_literal: true

require "fileutils"
require "uri"
require_relative "errors"
require_relative "exporters/settings"
require_relative "exporters/base"
require_relative "exporters/directory"
require_relative "exporters/pyroscope"
require_relative "exporters/datadog"

module Sonde
  # One profile of continuous mode, as the exporters take it.
  #   pprof:      gzip'd pprof bytes (binary String)
  #   start_time, end_time: Time
  #   tags:       Hash of String => String (service, env, version, host, pid,
  #               runtime_version, sonde_version and the user's tags)
  ExportedProfile = Struct.new(:pprof, :start_time, :end_time, :tags, keyword_init: true)

  # Where continuous mode sends its profiles. Exporters.parse turns the
  # SONDE_EXPORT value (or the matching option) into exporter objects; each
  # delivers on its own background thread (see Exporters::Base), so parse and
  # #export are the only parts that run on application threads.
  module Exporters
    ACCEPTED = "one or more of dir:PATH, pyroscope:URL, datadog:URL, comma-separated " \
               "(URL: http:// or https://)"
    URL_SCHEMES = %w[http https].freeze

    module_function

    # Returns the exporters spec names (an Array, empty for nil or ""), all
    # sharing settings (see Settings). Raises Sonde::ArgumentError naming
    # option_name (the variable or option spec came from), the bad value and
    # what is accepted. A dir: directory is created here when missing, so an
    # unwritable one fails now rather than at the first profile.
    def parse(spec, option_name: "SONDE_EXPORT", **settings)
      settings = Settings.new(**settings)
      entries(spec, option_name).map { |entry| build(entry, settings, option_name) }
    end

    def entries(spec, option_name)
      specs = spec.is_a?(Array) ? spec : [spec]
      specs.flat_map do |one|
        next [] if one.nil?
        unless one.is_a?(String)
          raise Sonde::ArgumentError, "#{option_name} must be a String, got #{Settings.describe(one)}; accepted: #{ACCEPTED}"
        end
        next [] if one.strip.empty?

        parts = one.split(",", -1).map(&:strip)
        reject(option_name, one, "an empty entry (two commas in a row, or one at an end)") if parts.any?(&:empty?)
        parts
      end
    end

    def build(entry, settings, option_name)
      kind, _, target = entry.partition(":")
      case kind
      when "dir" then Directory.new(directory(target, entry, option_name), settings)
      when "pyroscope" then Pyroscope.new(base_url(target, entry, option_name), settings)
      when "datadog" then Datadog.new(base_url(target, entry, option_name), settings)
      else reject(option_name, entry, "unknown exporter #{kind.inspect}")
      end
    end

    def directory(path, entry, option_name)
      reject(option_name, entry, "the directory is missing") if path.strip.empty?
      path = File.expand_path(path)
      begin
        FileUtils.mkdir_p(path)
      rescue SystemCallError => e
        reject(option_name, entry, "cannot create directory #{path}: #{e.message}")
      end
      reject(option_name, entry, "#{path} is not writable") unless File.writable?(path)
      probe_directory(path, entry, option_name)
      path
    end

    # File.writable? says yes to root for a read-only directory or /sys.
    def probe_directory(path, entry, option_name)
      Profile.probe_directory(path)
    rescue SystemCallError => e
      reject(option_name, entry, "#{path} is not writable (#{e.message.sub(/ @ .*/, "")})")
    end

    def base_url(text, entry, option_name)
      uri = begin
        URI.parse(text)
      rescue URI::InvalidURIError => e
        reject(option_name, entry, "not a URL (#{e.message})")
      end
      unless URL_SCHEMES.include?(uri.scheme&.downcase)
        reject(option_name, entry, "the URL's scheme must be http or https, got #{uri.scheme.inspect}")
      end
      reject(option_name, entry, "the URL has no host") if uri.host.nil? || uri.host.empty?
      reject(option_name, entry, "the URL must not have a query or fragment") if uri.query || uri.fragment
      uri
    end

    # The entry is echoed without any user:password it may carry.
    def reject(option_name, entry, reason)
      shown = entry.sub(%r{//[^/@]*@}, "//***@")
      raise Sonde::ArgumentError, "#{option_name}: #{shown.inspect} is not accepted: #{reason}; accepted: #{ACCEPTED}"
    end
  end
end
