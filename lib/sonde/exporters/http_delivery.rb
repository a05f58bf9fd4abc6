# frozen_string_literal: true

require "uri"
require_relative "base"
require_relative "registry"
require_relative "../version"

module Sonde
  module Exporters
    # One HTTP POST with Net::HTTP, and what its outcome means for retrying:
    # 2xx is delivered; 5xx, 429 and network errors raise RetryableError (or
    # the network error itself); any other status raises PermanentError.
    # Mixed into the HTTP exporters; runs on their background threads.
    module HTTPDelivery
      URL_SCHEMES = %w[http https].freeze
      # Status codes that ask the client to come back later.
      TOO_MANY_REQUESTS = 429
      SERVER_ERRORS = (500..599).freeze
      # How much of an error response's body goes into stats[:last_error].
      ERROR_BODY_EXCERPT = 200

      # The class side of an HTTP exporter (extended by each): its target is
      # a base URL, checked when the entry is read; nothing to prepare.
      module Target
        def target_name
          "URL"
        end

        def target_key
          :url
        end

        # URI of text, or TargetError saying what is wrong with it. A query
        # cannot be given: "?" starts the entry's options.
        def check_target(text)
          uri = begin
            URI.parse(text)
          rescue URI::InvalidURIError => e
            raise TargetError, "not a URL (#{e.message})"
          end
          unless URL_SCHEMES.include?(uri.scheme&.downcase)
            raise TargetError, "the URL's scheme must be http or https, got #{uri.scheme.inspect}"
          end
          raise TargetError, "the URL has no host" if uri.host.nil? || uri.host.empty?
          raise TargetError, "the URL must not have a fragment" if uri.fragment

          uri
        end

        def prepare_target(uri)
          uri
        end
      end

      # Net::HTTP (and what it loads: net/protocol, resolv, io/wait) is
      # loaded here, when a run makes the exporter on the thread that starts
      # Sonde, not at load (Options reads the registry at every start) nor
      # at the first post on the exporter's thread. A require on that thread
      # runs beside the application's own boot: under -rsonde/auto, a Rails
      # app booting in Sidekiq on Ruby 3.4, on a loaded machine, died 1 time
      # in 12 with a LoadError for a file it has
      # (action_view/dependency_tracker/ruby_tracker) while the exporter
      # thread was loading net/http.
      def initialize(settings)
        require "net/http"
        super
      end

      private

      # Posts body to uri (a URI::HTTP, query included). Every Net::HTTP
      # timeout is settings.timeout. Proxies from the environment are not
      # used: the Datadog agent is local, and a proxy for Pyroscope would be
      # a setting of its own.
      def post(uri, body, headers)
        http = Net::HTTP.new(uri.host, uri.port, nil)
        http.use_ssl = uri.scheme == "https"
        http.open_timeout = http.read_timeout = http.write_timeout = settings.timeout
        http.ssl_timeout = settings.timeout if http.use_ssl?
        request = Net::HTTP::Post.new(uri.request_uri)
        headers.each { |name, value| request[name] = value }
        request["User-Agent"] = "sonde/#{Sonde::VERSION}"
        request.body = body
        check_response(http.start { |connection| connection.request(request) }, uri)
      end

      def check_response(response, uri)
        code = response.code.to_i
        return response if (200..299).cover?(code)

        message = "HTTP #{response.code} from #{display_url(uri)}: #{response.body.to_s[0, ERROR_BODY_EXCERPT].strip}"
        raise RetryableError, message if retryable_status?(code)

        raise PermanentError, message
      end

      # Whether an error status is worth another attempt (an exporter whose
      # protocol says otherwise overrides it).
      def retryable_status?(code)
        code == TOO_MANY_REQUESTS || SERVER_ERRORS.cover?(code)
      end

      # The URL without credentials or query, fit for messages and logs.
      def display_url(uri)
        "#{uri.scheme}://#{uri.host}:#{uri.port}#{uri.path}"
      end

      # Authorization and tenant headers from the settings and the URL's
      # user:password, if any (settings win).
      def auth_headers(base_uri)
        headers = {}
        if settings.token
          headers["Authorization"] = "Bearer #{settings.token}"
        elsif (basic = settings.basic_auth || userinfo(base_uri))
          headers["Authorization"] = "Basic #{[basic].pack("m0")}"
        end
        headers["X-Scope-OrgID"] = settings.tenant if settings.tenant
        headers
      end

      def userinfo(uri)
        return nil unless uri.user

        "#{URI.decode_www_form_component(uri.user)}:#{URI.decode_www_form_component(uri.password.to_s)}"
      end

      # base_uri's path with suffix appended ("/pyroscope" + "/ingest").
      def endpoint(base_uri, suffix, query = nil)
        uri = base_uri.dup
        uri.user = nil
        uri.path = "#{base_uri.path.chomp("/")}#{suffix}"
        uri.query = query
        uri
      end
    end
  end
end
