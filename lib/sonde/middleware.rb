# frozen_string_literal: true

require_relative "../sonde"

module Sonde
  # Rack middleware: every request runs under the label `endpoint`, so a
  # profile splits by endpoint (`sonde report --by label:endpoint`,
  # `go tool pprof -tagfocus=endpoint=...`).
  #
  #   use Sonde::Middleware                                   # config.ru
  #   use Sonde::Middleware, endpoint: ->(env) { env["my.route"] }, labels: { service_tier: "web" }
  #
  # The endpoint is the request method and the path's first segment
  # ("GET /users" for /users/42/edit), never the raw path: ids in paths
  # would make a label set per request. endpoint: a callable env -> String
  # (or nil for the default) names it instead; labels: more fixed labels.
  # The labels hold for the whole request on its thread and fiber, nested
  # Sonde.with_labels calls in the app add to them or override them (a
  # controller's around_action can set a finer endpoint). Costs a label
  # switch per request whether or not Sonde runs, and raises nothing of its
  # own into the request: a bad endpoint (not a String) is left unlabelled.
  class Middleware
    # Characters kept from the first segment; longer ones are cut.
    MAX_SEGMENT = 64

    def initialize(app, endpoint: nil, labels: {})
      unless endpoint.nil? || endpoint.respond_to?(:call)
        raise Sonde::ArgumentError, "endpoint: must respond to call(env), got #{Setting.shown(endpoint)}"
      end

      @app = app
      @endpoint = endpoint
      @labels = Labels.check(labels) # refused now, with the usual message
    end

    def call(env)
      labels = request_labels(env)
      return @app.call(env) unless labels # a label we could not set: the request runs unlabelled

      Labels.with(labels) { @app.call(env) }
    end

    # "GET /users", or the endpoint: callable's answer.
    def endpoint_of(env)
      custom = @endpoint&.call(env)
      return custom if custom.is_a?(String) && !custom.empty?

      segment = env["PATH_INFO"].to_s.split("/").find { |part| !part.empty? }
      segment = segment ? segment[0, MAX_SEGMENT].b.gsub(/[^\x21-\x7e]/n, "?") : ""
      "#{env["REQUEST_METHOD"] || "GET"} /#{segment}"
    end

    private

    def request_labels(env)
      Labels.check(@labels.merge("endpoint" => endpoint_of(env)))
    rescue Sonde::ArgumentError
      nil
    end
  end
end
