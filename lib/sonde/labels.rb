# frozen_string_literal: true

require_relative "errors"
require_relative "setting"
require_relative "native"

module Sonde
  # Labels: key/value pairs that the samples taken while they are set
  # carry, as pprof string labels (which endpoint, which job, which
  # tenant). Sonde.with_labels and Sonde.labels are their face.
  #
  # Per fiber: the current labels live in fiber-locals (Thread.current[]),
  # so a fiber scheduler or Falcon cannot leak one request's labels into
  # another's. Each distinct set of labels is interned once into an id;
  # the native core keeps, per thread, the id of the set its current fiber
  # runs under (a thread-local the signal handler reads; fiber switches
  # update it), so a sample with labels records an integer and allocates
  # nothing. At export the encoder names the ids from #table.
  #
  # Threads: with/current run on application threads; interning takes
  # @lock (a Hash lookup once the set is known).
  module Labels
    # Fiber-local key: the current set's id (the native core reads it too:
    # labels.c); nil for none.
    FIBER_KEY = :__sonde_label_set
    # Bounds: labels per sample (the native core checks its own bound is
    # at least this at load), bytes per key and value, and distinct sets
    # per process (cardinality: a set per user id would grow without end).
    MAX_LABELS = 16
    MAX_KEY_BYTES = 64
    MAX_VALUE_BYTES = 256
    MAX_SETS = 100_000
    EMPTY = {}.freeze
    # The label names Sonde's integrations set: the request's or job's
    # endpoint (Sonde::Middleware, the Rails controllers, Sinatra routes,
    # jobs), and a job's class and queue (Sonde::JobLabels). Everything that
    # writes or renames these labels spells them here.
    ENDPOINT = "endpoint"
    JOB = "job"
    QUEUE = "queue"

    @lock = Mutex.new
    @ids = {}
    # The same frozen Hash given again (the middleware's, per endpoint)
    # finds its id without hashing its contents.
    @ids_by_identity = {}.compare_by_identity
    IDENTITY_CACHE_MAX = 10_000
    # id -> frozen [key, value, key, value, ...] (the encoder's), and id ->
    # the frozen Hash (Sonde.labels'); id 0 is "no labels".
    @table = [nil]
    @hashes = [EMPTY]
    @overflow_warned = false

    # Checked labels by a key (a route, a controller action, a job class),
    # for the integrations that label every request or job: each key's
    # labels are built and checked once, for up to +limit+ keys (past that,
    # on every call), and found by identity in #with_checked afterwards.
    # The block builds the labels for a key; nil, or labels that cannot be
    # set (a name over 256 bytes), give nil: the caller runs unlabelled.
    class CheckedCache
      def initialize(limit)
        @limit = limit
        @cache = {}
      end

      def fetch(key)
        @cache.fetch(key) do
          labels = begin
            built = yield
            built && Labels.check(built)
          rescue Sonde::ArgumentError
            nil
          end
          @cache[key.frozen? ? key : key.dup.freeze] = labels if @cache.size < @limit
          labels
        end
      end
    end

    class << self
      # The table the encoder names label set ids from (Native.flush/stop).
      attr_reader :table

      # Runs the block with labels added to the current ones (inner wins);
      # the previous labels come back when it ends, however it ends.
      def with(labels, &block)
        with_checked(check(labels), &block)
      end

      # with, for labels that went through #check (a frozen Hash of frozen
      # Strings): the middleware checks each endpoint's once.
      def with_checked(labels)
        previous = enter_checked(labels)
        begin
          yield
        ensure
          leave(previous)
        end
      end

      # with_checked for integrations that cannot wrap a block (a block
      # costs every request's stack two frames): sets the labels, returns
      # what #leave puts back.
      def enter_checked(labels)
        previous = Thread.current[FIBER_KEY]
        base = previous ? @hashes[previous] : EMPTY
        merged = base.empty? ? labels : base.merge(labels).freeze
        if merged.size > MAX_LABELS
          raise Sonde::ArgumentError,
                "at most #{MAX_LABELS} labels at once, with those already set (#{merged.size} asked)"
        end

        switch_to(intern(merged))
        previous
      end

      def leave(previous)
        switch_to(previous)
      end

      # The labels of the current fiber (a frozen Hash of String => String).
      def current
        id = Thread.current[FIBER_KEY]
        id ? @hashes[id] : EMPTY
      end

      # labels as with takes them (String names and values, frozen), or
      # Sonde::ArgumentError saying which is wrong and what is accepted.
      def check(labels)
        normalize(labels).freeze
      end

      private

      def switch_to(id)
        Thread.current[FIBER_KEY] = id
        # Until the core is loaded (Sonde never started) only the
        # fiber-local changes: the first pass reads it.
        Native.label_set_changed(id || 0) if Native.loaded?
      end

      # The set's id, 0 (no labels recorded) when empty or past MAX_SETS.
      def intern(labels)
        return 0 if labels.empty?

        @ids_by_identity[labels] || @lock.synchronize do
          id = @ids.fetch(labels) do
            next overflow if @table.size > MAX_SETS

            @table << labels.flat_map { |key, value| [key, value] }.freeze
            @hashes << labels
            @ids[labels] = @table.size - 1
          end
          @ids_by_identity[labels] = id if id.positive? && @ids_by_identity.size < IDENTITY_CACHE_MAX
          id
        end
      end

      def overflow
        warn_overflow
        0
      end

      def warn_overflow
        return if @overflow_warned

        @overflow_warned = true
        warn "sonde: more than #{MAX_SETS} distinct label sets; samples under new ones carry no labels " \
             "(a label whose value is unbounded, such as a user id, makes a new set per value)"
      end

      def normalize(labels)
        unless labels.is_a?(Hash)
          raise Sonde::ArgumentError, "labels must be a Hash of name => value, got #{Setting.shown(labels)}"
        end

        normalized = labels.to_h do |key, value|
          [text(key, "label name", MAX_KEY_BYTES, key), text(value, "label value", MAX_VALUE_BYTES, key)]
        end
        reserved = normalized.keys & reserved_names
        unless reserved.empty?
          raise Sonde::ArgumentError, "label name #{reserved.first.inspect} is Sonde's own; choose another " \
                                      "(Sonde's: #{reserved_names.map(&:inspect).join(", ")})"
        end
        if normalized.size > MAX_LABELS
          raise Sonde::ArgumentError, "at most #{MAX_LABELS} labels at once (#{normalized.size} asked)"
        end
        normalized
      end

      # A String or Symbol of valid UTF-8, 1..max bytes, no control
      # characters (no NUL: the encoder takes C strings).
      def text(value, what, max_bytes, key)
        string = value.is_a?(Symbol) ? value.to_s : value
        valid = string.is_a?(String) && string.valid_encoding? && !string.empty? &&
                string.bytesize <= max_bytes && !string.match?(/[[:cntrl:]]/)
        return string.dup.freeze if valid

        about = what == "label value" ? " (of #{Setting.shown(key)})" : ""
        raise Sonde::ArgumentError, "#{what}#{about} must be a String or Symbol of 1 to #{max_bytes} bytes " \
                                    "(valid UTF-8, no control characters), got #{Setting.shown(value)}"
      end

      # The label names Sonde's own samples carry, when the core can load.
      def reserved_names
        @reserved_names ||= Native.load ? Native::PROFILE_NAMES.fetch(:labels).values : []
      end
    end
  end
end
