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
  #
  # With OpenTelemetry or Datadog tracing loaded, the request also runs in
  # the trace context of the span active when it reaches this middleware
  # (Sonde::TraceContext): put it after the tracer's middleware (in Rails
  # the controller labels read the span again inside every middleware).
  # trace_context: false turns that off.
  class Middleware
    # Characters kept from the first segment; longer ones are cut.
    MAX_SEGMENT = 64
    # Endpoints whose labels are kept checked; past that, each request's
    # are checked again (an app with that many first segments is unusual).
    CACHED_ENDPOINTS = 1000

    def initialize(app, endpoint: nil, labels: {}, trace_context: true)
      unless endpoint.nil? || endpoint.respond_to?(:call)
        raise Sonde::ArgumentError, "endpoint: must respond to call(env), got #{Setting.shown(endpoint)}"
      end
      unless [true, false].include?(trace_context)
        raise Sonde::ArgumentError, "trace_context: must be true or false, got #{Setting.shown(trace_context)}"
      end

      @app = app
      @trace_context = trace_context
      @endpoint = endpoint
      @labels = Labels.check(labels) # refused now, with the usual message
      @cache = {}
      @cache_size = 0
      @custom = {}
    end

    # One frame on the request's stack: no blocks.
    def call(env)
      trace = @trace_context ? TraceContext.enter_current_span : TraceContext::UNCHANGED
      begin
        labels = request_labels(env)
        # A label we could not set: the request runs unlabelled.
        return @app.call(env) unless labels

        previous = Labels.enter_checked(labels)
        begin
          @app.call(env)
        ensure
          Labels.leave(previous)
        end
      ensure
        TraceContext.leave(trace)
      end
    end

    # "GET /users", or the endpoint: callable's answer.
    def endpoint_of(env)
      custom = @endpoint&.call(env)
      return custom if custom.is_a?(String) && !custom.empty?

      "#{env["REQUEST_METHOD"] || "GET"} /#{clean_segment(env["PATH_INFO"].to_s[FIRST_SEGMENT, 1].to_s)}"
    end

    private

    # The path's first segment; anything but printable ASCII becomes "?".
    FIRST_SEGMENT = %r{\A/*([^/]+)}.freeze

    def clean_segment(segment)
      segment[0, MAX_SEGMENT].b.gsub(/[^\x21-\x7e]/n, "?")
    end

    # Checked once per endpoint (up to CACHED_ENDPOINTS of them), keyed by
    # the method and the raw first segment: the same frozen Hash each time,
    # which Labels finds by identity, and no String built per request.
    def request_labels(env)
      return custom_labels(endpoint_of(env)) if @endpoint

      method = env["REQUEST_METHOD"] || "GET"
      segment = env["PATH_INFO"].to_s[FIRST_SEGMENT, 1].to_s
      by_segment = @cache[method] ||= {}
      by_segment[segment] || begin
        labels = checked_labels("#{method} /#{clean_segment(segment)}")
        by_segment[segment.frozen? ? segment : segment.dup.freeze] = labels if labels && @cache_size < CACHED_ENDPOINTS
        @cache_size += 1
        labels
      end
    end

    # The endpoint: callable's names, checked once each, up to
    # CACHED_ENDPOINTS of them.
    def custom_labels(endpoint)
      @custom.fetch(endpoint) do
        labels = checked_labels(endpoint)
        @custom[endpoint.frozen? ? endpoint : endpoint.dup.freeze] = labels if @custom.size < CACHED_ENDPOINTS
        labels
      end
    end

    def checked_labels(endpoint)
      Labels.check(@labels.merge(Labels::ENDPOINT => endpoint))
    rescue Sonde::ArgumentError
      nil
    end
  end
end
