# frozen_string_literal: true

require "cgi"
require "digest"
require "socket"
require "zlib"
require_relative "../sonde"
# Loaded here, not on first use: two first requests at once would race
# for the autoload, and one of them found no Sonde::Continuous (500).
require_relative "continuous"
require_relative "pprof"
require_relative "profile_names"
# A capture starts Sonde on a request thread, often beside busy ones, so
# what a start loads (these files, and the native core: see initialize)
# loads with the endpoint, at boot. Each file read gives up the GVL, and a
# busy thread then keeps it for Ruby's 100 ms timeslice: loaded by the
# first capture, they started it 1.36 s late (3.1, one busy thread).
require_relative "session"
require_relative "trace_context"

module Sonde
  # A live profile over HTTP, by Go's conventions: a Rack app to mount.
  #
  #   mount Sonde::PprofApp.new(token: ENV["SONDE_PPROF_TOKEN"]) => "/debug/pprof"     # Rails routes
  #   map("/debug/pprof") { run Sonde::PprofApp.new(token: ENV["SONDE_PPROF_TOKEN"]) } # config.ru
  #
  #   go tool pprof "http://127.0.0.1:3000/debug/pprof/profile?seconds=10&token=..."
  #
  #   GET /            an index page
  #   GET /profile     a gzip'd pprof of the next `seconds` (default 30, 1..max_seconds);
  #                    sample= picks its default sample type: cpu (the default), wall,
  #                    alloc (alloc-samples) or heap (heap-live-size)
  #   GET /allocs      /profile with sample=alloc (Go's path for it)
  #   GET /heap        /profile with sample=heap (Go's path for it)
  #   GET /flamegraph  the flame graph page of the next `seconds` (sample=alloc or heap:
  #                    with allocation or heap views too)
  #
  # Security: nothing is served unless mounted. Every request needs the
  # token (query `token=` or `Authorization: Bearer`), compared in constant
  # time; with no token configured, only loopback requests are served, and
  # only when allow_loopback: true. Errors are one line of text: no path,
  # no backtrace.
  #
  # Sharing the sampler: when Sonde is not running, a capture starts it for
  # the seconds asked (at `rate`, default 100; with alloc: true for
  # sample=alloc, heap: true for sample=heap, at the default interval and
  # duty) and stops it. In continuous
  # mode the capture is a period of the continuous run: the flusher's
  # period is cut at the capture's start and end (and not inside it: the
  # flusher skips its ticks meanwhile), every part goes to the
  # exporters as usual, and the capture's part is also the answer (at the
  # run's rate). A run the application started itself without continuous
  # mode is its own: the capture refuses (409). One capture at a time per
  # process: a second gets 409, as Go's does. A continuous run that does
  # not sample allocations (or follow the heap) answers sample=alloc
  # (sample=heap) with 409 saying which option to start it with.
  class PprofApp
    DEFAULT_SECONDS = 30
    MAX_SECONDS = 300
    LOOPBACK = /\A(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)\z/.freeze
    # sample= value => the sample type it makes the default, and what a
    # capture must sample for it.
    SAMPLES = {
      "cpu" => { type: :cpu_time, needs: {} },
      "wall" => { type: :wall_time, needs: {} },
      "alloc" => { type: :alloc_samples, needs: { alloc: true } },
      "heap" => { type: :heap_live_size, needs: { heap: true } },
    }.freeze
    # Go's paths for the allocation and heap profiles.
    PATH_SAMPLES = { "/profile" => "cpu", "/allocs" => "alloc", "/heap" => "heap" }.freeze
    # Longer queries are refused before anything is read from them.
    MAX_QUERY_BYTES = 4096
    TOKEN_PARAMETER = /(?:\A|&)token=([^&]*)/.freeze
    BEARER = /\ABearer +(\S+)\s*\z/i.freeze
    NO_TOKEN = "this profiler endpoint has no token configured, so it serves nothing: give " \
               "Sonde::PprofApp.new a token: (at least 8 bytes, e.g. ENV[\"SONDE_PPROF_TOKEN\"] set), or " \
               "allow_loopback: true to serve loopback requests without one"
    # The sockets servers put in the env: a capture ends when its client
    # closes the connection (Puma's, Unicorn's).
    CLIENT_SOCKETS = %w[puma.socket unicorn.socket].freeze
    # pprof's Profile.default_sample_type (an index into the string table).
    DEFAULT_SAMPLE_TYPE_FIELD = 14
    STRING_TABLE_FIELD = 6

    # token: the secret every request must carry (nil: none, then only
    # loopback with allow_loopback). max_seconds: the longest capture.
    # rate: samples per second of captures that start Sonde.
    def initialize(token: nil, allow_loopback: false, max_seconds: 60, rate: 100)
      unless token.nil? || (token.is_a?(String) && token.bytesize >= 8)
        raise Sonde::ArgumentError, "token: must be a String of at least 8 bytes, or nil (only loopback, with " \
                                    "allow_loopback: true)"
      end
      unless max_seconds.is_a?(Integer) && (1..MAX_SECONDS).cover?(max_seconds)
        raise Sonde::ArgumentError,
              "max_seconds: must be an Integer from 1 to #{MAX_SECONDS}, got #{Setting.shown(max_seconds)}"
      end

      # The rate is checked as Sonde.start checks it, and only the rate: a
      # mistyped SONDE_* variable must not stop the application's boot here
      # (routes are drawn in every Rails process); the capture it would
      # spoil answers 409 naming it.
      Options.new(environment: {}, rate: rate)
      Native.load # never raises: a core that cannot load is reported by the capture
      @token_digest = token && Digest::SHA256.digest(token)
      @allow_loopback = allow_loopback ? true : false
      @max_seconds = max_seconds
      @rate = rate
      @capture_lock = Mutex.new
    end

    def call(env)
      return text(405, "only GET is served") unless env["REQUEST_METHOD"] == "GET"

      query = env["QUERY_STRING"].to_s
      return text(414, "the query is over #{MAX_QUERY_BYTES} bytes") if query.bytesize > MAX_QUERY_BYTES

      # The token first, from the raw query: a request without it costs a
      # scan, never a parse.
      token = given_token(env, query)
      denied = authorization_error(env, token)
      return denied if denied

      params = query_params(query)
      case env["PATH_INFO"].to_s.chomp("/")
      when "" then index(env, token)
      when "/profile", "/allocs", "/heap" then profile(params, PATH_SAMPLES.fetch(env["PATH_INFO"].to_s.chomp("/")), env)
      when "/flamegraph" then flamegraph(params, env)
      else text(404, "not found: the paths are /, /profile, /allocs, /heap and /flamegraph")
      end
    rescue StandardError => e
      text(500, "sonde: the capture failed (#{e.class})")
    end

    private

    # ?token= (the first), else Authorization's Bearer credentials (the
    # scheme is case-insensitive, as HTTP's are); nil when neither.
    def given_token(env, query)
      raw = query[TOKEN_PARAMETER, 1]
      return unescape(raw) if raw

      env["HTTP_AUTHORIZATION"].to_s[BEARER, 1]
    end

    def authorization_error(env, token)
      if @token_digest
        return nil if token && secure_equal?(Digest::SHA256.digest(token), @token_digest)

        message = token ? "wrong token" : "a token is needed: ?token=... or Authorization: Bearer ..."
        return [401, { "content-type" => "text/plain", "www-authenticate" => "Bearer" }, ["#{message}\n"]]
      end
      return nil if @allow_loopback && LOOPBACK.match?(env["REMOTE_ADDR"].to_s)

      text(403, NO_TOKEN)
    end

    # Both sides are SHA-256 digests: equal lengths, compared byte by byte
    # without an early exit.
    def secure_equal?(left, right)
      difference = 0
      left.bytes.zip(right.bytes) { |a, b| difference |= a ^ b }
      difference.zero?
    end

    # Its links carry the token it was opened with (a click sends no
    # Authorization header).
    def index(env, token)
      base = CGI.escapeHTML("#{env["SCRIPT_NAME"]}/")
      auth = token ? CGI.escapeHTML("&token=#{CGI.escape(token)}") : ""
      body = <<~HTML
        <!doctype html><html><head><meta charset="utf-8"><title>Sonde /debug/pprof</title></head><body>
        <h1>Sonde profiles of process #{Process.pid}</h1>
        <ul>
        <li><a href="#{base}profile?seconds=30#{auth}">profile</a>: a CPU profile (pprof) of the next 30 seconds;
        <code>seconds=</code> up to #{@max_seconds}, <code>sample=wall</code> for wall time</li>
        <li><a href="#{base}allocs?seconds=30#{auth}">allocs</a>: the allocations of the next 30 seconds (pprof)</li>
        <li><a href="#{base}heap?seconds=30#{auth}">heap</a>: the live heap at the end of the next 30 seconds (pprof)</li>
        <li><a href="#{base}flamegraph?seconds=10#{auth}">flamegraph</a>: the flame graph page of the next 10 seconds</li>
        </ul>
        <p><code>go tool pprof "http://HOST#{base}profile?seconds=30&amp;token=..."</code></p>
        </body></html>
      HTML
      [200, { "content-type" => "text/html; charset=utf-8" }, [body]]
    end

    def profile(params, path_sample, env)
      seconds = seconds_param(params)
      return seconds if seconds.is_a?(Array)

      sample = SAMPLES[params.fetch("sample", path_sample)]
      return text(400, "sample: must be #{SAMPLES.keys.join(", ")}") unless sample

      captured = capture(seconds, env, **sample[:needs])
      return captured if captured.is_a?(Array)

      bytes = captured.pprof
      type = sample[:type]
      bytes = PprofApp.with_default_sample_type(bytes, ProfileNames.sample_type(type)) unless type == :cpu_time
      [200, { "content-type" => "application/octet-stream",
              "content-disposition" => %(attachment; filename="profile-#{Process.pid}.pprof") }, [bytes]]
    end

    # sample=alloc or heap: the capture samples those too, and the page
    # offers their views beside time's.
    def flamegraph(params, env)
      seconds = seconds_param(params)
      return seconds if seconds.is_a?(Array)

      sample = SAMPLES[params.fetch("sample", "cpu")]
      return text(400, "sample: must be #{SAMPLES.keys.join(", ")}") unless sample

      captured = capture(seconds, env, **sample[:needs])
      return captured if captured.is_a?(Array)

      require_relative "flamegraph"
      html = Flamegraph.html(Pprof.decode(captured.pprof), title: "process #{Process.pid}, #{seconds} s")
      [200, { "content-type" => "text/html; charset=utf-8" }, [html]]
    end

    def seconds_param(params)
      given = params.fetch("seconds", DEFAULT_SECONDS.to_s)
      seconds = Integer(given, 10) if given.match?(/\A\d{1,6}\z/)
      return seconds if seconds && seconds >= 1 && seconds <= @max_seconds

      text(400, "seconds: must be a whole number from 1 to #{@max_seconds}")
    end

    # The Sonde::Profile of the next seconds, or a response saying why not.
    def capture(seconds, env, **needs)
      unless @capture_lock.try_lock
        return text(409, Continuous::CAPTURE_BUSY)
      end

      begin
        Sonde.session.capture(seconds, rate: @rate, cancelled: client_gone_check(env), **needs)
      rescue StateError => e
        text(409, e.message)
      rescue Sonde::ArgumentError => e
        # The environment's settings refuse what the capture needs (say
        # SONDE_ALLOC=0 for /heap): the message names the variable.
        text(409, "this capture cannot start Sonde: #{e.message}")
      ensure
        @capture_lock.unlock
      end
    end

    # A callable that says whether the request's client closed its
    # connection (a peek finds the end of the stream, or the socket
    # failed), or nil where the server gives no socket.
    def client_gone_check(env)
      socket = CLIENT_SOCKETS.lazy.map { |key| env[key] }.find { |io| io }
      socket = socket.to_io if socket.respond_to?(:to_io)
      return nil unless socket.is_a?(BasicSocket)

      lambda do
        peeked = socket.recv_nonblock(1, Socket::MSG_PEEK, exception: false)
        peeked.nil? || peeked == ""
      rescue IOError, SystemCallError
        true
      end
    end

    def text(status, message)
      [status, { "content-type" => "text/plain" }, ["#{message}\n"]]
    end

    def query_params(query)
      query.split("&").each_with_object({}) do |pair, params|
        name, value = pair.split("=", 2)
        next if name.nil? || name.empty?

        params[unescape(name)] = unescape(value.to_s)
      end
    end

    def unescape(text)
      text.tr("+", " ").b.gsub(/%\h\h/n) { |escape| escape[1, 2].hex.chr }.force_encoding(Encoding::UTF_8).scrub
    end

    class << self
      # The gzip'd pprof bytes with type_name as the default sample type
      # (a field appended to the message: the last value of a field wins).
      def with_default_sample_type(bytes, type_name)
        raw = Pprof::Gunzip.new(bytes.b, Pprof::MAX_DECOMPRESSED_BYTES).call
        index = 0
        found = nil
        Pprof::WireReader.new(raw).each_field(0, raw.bytesize) do |number, _type, value, stop|
          next unless number == STRING_TABLE_FIELD

          found ||= index if raw.byteslice(value, stop - value) == type_name
          index += 1
        end
        return bytes unless found

        Zlib.gzip(raw + varint(DEFAULT_SAMPLE_TYPE_FIELD << 3) + varint(found))
      end

      private

      def varint(value)
        out = String.new(encoding: Encoding::BINARY)
        while value >= 0x80
          out << ((value & 0x7f) | 0x80)
          value >>= 7
        end
        out << value
      end
    end
  end
end
