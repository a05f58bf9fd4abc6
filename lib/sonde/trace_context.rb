# frozen_string_literal: true

require_relative "errors"
require_relative "setting"
require_relative "native"

module Sonde
  # The tracing span the code runs in: samples taken meanwhile carry its
  # ids as the labels trace_id, span_id and local_root_span_id (hex, as
  # tracers print them), so a profile links to traces: Pyroscope's span
  # profiles read span_id, and the Datadog exporter hands Datadog the
  # numeric "span id" and "local root span id" its endpoint profiling reads.
  #
  #   Sonde.with_trace_context(trace_id: 0x4bf9..., span_id: 0x00f0...) { work }
  #   Sonde::TraceContext.with_current_span { work }   # the span OpenTelemetry or Datadog has active now
  #
  # Sonde::Middleware, the Rails controller labels, ActiveJob and Sidekiq
  # integrations call with_current_span for each request and job.
  #
  # Unlike labels, span ids are not interned (a set per request would fill
  # the label table): the context is packed into 32 bytes kept in a
  # fiber-local, which the native core copies into each sample (labels.c).
  # Per fiber, as labels are. Nothing here raises into the application but
  # a bad argument to with.
  module TraceContext
    # Fiber-local key of the packed context (the native core reads it too).
    FIBER_KEY = :__sonde_trace_context
    # trace id's upper and lower 64 bits, span id, local root span id, as
    # native-endian unsigned 64-bit integers (trace_context.h).
    PACKING = "Q4"
    PACKED_BYTES = 32
    MAX_SPAN_ID = (1 << 64) - 1
    MAX_TRACE_ID = (1 << 128) - 1
    HEX = /\A\h+\z/.freeze

    # What enter_current_span gives when it changed nothing.
    UNCHANGED = Object.new.freeze

    class << self
      # Runs the block in this span (the previous context comes back when it
      # ends, however it ends). Ids are Integers or hex Strings: span ids of
      # 64 bits, non-zero; the trace id of up to 128 bits (optional);
      # local_root_span_id (the first span of the trace in this process,
      # Datadog's link to the trace) defaults to span_id.
      def with(span_id:, trace_id: nil, local_root_span_id: nil, &block)
        span = id(span_id, "span_id", MAX_SPAN_ID, 16)
        root = local_root_span_id.nil? ? span : id(local_root_span_id, "local_root_span_id", MAX_SPAN_ID, 16)
        trace = trace_id.nil? ? 0 : id(trace_id, "trace_id", MAX_TRACE_ID, 32, allow_zero: true)
        with_packed(pack(trace, span, root), &block)
      end

      # Runs the block in the span OpenTelemetry or Datadog tracing has
      # active now, when either is loaded and has one; else just runs it.
      def with_current_span(&block)
        packed = from_tracers
        packed ? with_packed(packed, &block) : yield
      end

      # with_current_span for integrations that cannot wrap a block (a
      # block costs every request's stack two frames): enters the span,
      # returns what #leave puts back (UNCHANGED when there was none).
      def enter_current_span
        packed = from_tracers
        return UNCHANGED unless packed

        previous = Thread.current[FIBER_KEY]
        switch_to(packed)
        previous
      end

      def leave(previous)
        switch_to(previous) unless UNCHANGED.equal?(previous)
      end

      # The current fiber's context: {trace_id:, span_id:, local_root_span_id:}
      # as hex Strings (trace_id nil when none was given), or nil.
      def current
        packed = Thread.current[FIBER_KEY]
        return nil unless packed

        high, low, span, root = packed.unpack(PACKING)
        trace = (high << 64) | low
        { trace_id: trace.zero? ? nil : format("%032x", trace), span_id: format("%016x", span),
          local_root_span_id: format("%016x", root) }
      end

      # The active span of a tracer the app loaded, packed; nil when there
      # is none. OpenTelemetry first, then Datadog. A tracer that raises is
      # taken as having no span: profiling must not break a request.
      def from_tracers
        from_opentelemetry || from_datadog
      rescue StandardError
        nil
      end

      private

      def with_packed(packed)
        previous = Thread.current[FIBER_KEY]
        switch_to(packed)
        begin
          yield
        ensure
          switch_to(previous)
        end
      end

      def switch_to(packed)
        Thread.current[FIBER_KEY] = packed
        Native.trace_context_changed(packed) if Native.loaded?
      end

      def pack(trace, span, root)
        [trace >> 64, trace & MAX_SPAN_ID, span, root].pack(PACKING).freeze
      end

      # OpenTelemetry's API: the current span's context, when valid. It
      # keeps no local root: the span active at the start of a request is
      # the request's server span, its own local root.
      def from_opentelemetry
        return nil unless defined?(::OpenTelemetry::Trace) && ::OpenTelemetry::Trace.respond_to?(:current_span)

        context = ::OpenTelemetry::Trace.current_span.context
        return nil unless context.valid?

        high, low = context.trace_id.unpack("Q>2")
        span = context.span_id.unpack1("Q>")
        [high, low, span, span].pack(PACKING).freeze
      end

      # Datadog's tracing (the datadog gem, 2.x; ddtrace 1.x has the same
      # Datadog::Tracing API): the active span, and the root span of its
      # trace as the local root, read as Datadog's own profiler reads it.
      def from_datadog
        return nil unless defined?(::Datadog::Tracing) && ::Datadog::Tracing.respond_to?(:active_span)

        span = ::Datadog::Tracing.active_span
        return nil unless span && span.id.is_a?(Integer) && span.id.positive?

        trace = ::Datadog::Tracing.active_trace
        root = trace.respond_to?(:root_span, true) ? trace.__send__(:root_span)&.id : nil
        root = span.id unless root.is_a?(Integer) && root.positive?
        trace_id = span.trace_id.is_a?(Integer) ? span.trace_id & MAX_TRACE_ID : 0
        pack(trace_id, span.id & MAX_SPAN_ID, root & MAX_SPAN_ID)
      end

      def id(value, name, max, hex_digits, allow_zero: false)
        number = value.is_a?(String) && value.match?(HEX) && value.size <= hex_digits ? value.to_i(16) : value
        valid = number.is_a?(Integer) && number <= max && (allow_zero ? number >= 0 : number.positive?)
        return number if valid

        raise Sonde::ArgumentError, "#{name} must be an Integer from #{allow_zero ? 0 : 1} to 2**#{max.bit_length} - 1, " \
                                    "or a String of 1 to #{hex_digits} hex digits, got #{Setting.shown(value)}"
      end
    end
  end
end
