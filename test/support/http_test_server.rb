# frozen_string_literal: true

require "io/wait"
require "socket"
require "uri"

# A small HTTP/1.1 server for the exporter tests, on 127.0.0.1 and a port the
# kernel picks. It records every request (method, path, query, headers, body)
# and answers with the status it is told (200, 202, 500, ...), or never
# answers (:hang) until #release or #stop. One thread accepts, one thread per
# connection reads and answers; all of them end on #stop, and on their own
# after MAX_LIFETIME seconds, so a test that forgets #stop leaves nothing
# running.
class HttpTestServer
  Request = Struct.new(:method, :path, :query, :headers, :body, keyword_init: true) do
    # Query parameters as a Hash (last value wins).
    def params
      URI.decode_www_form(query.to_s).to_h
    end

    # The multipart/form-data parts by name; raises when the body is not
    # well-formed multipart (what a real intake would refuse).
    def parts
      HttpTestServer.parse_multipart(headers["content-type"], body).to_h { |part| [part.name, part] }
    end
  end

  Part = Struct.new(:name, :filename, :content_type, :body, keyword_init: true)

  # The server stops accepting after this many seconds whatever happens.
  MAX_LIFETIME = 60
  # A hanging connection is answered after this long at most.
  MAX_HANG = 30
  # Reading a request gives up after this long without data.
  READ_TIMEOUT = 5
  # How often the accept loop checks whether it must stop.
  ACCEPT_POLL = 0.05

  attr_accessor :status
  # What a 2xx answer carries ("{}" unless set: an OTLP test sets protobuf).
  attr_accessor :success_body

  def initialize(status: 200)
    @status = status
    @server = TCPServer.new("127.0.0.1", 0)
    @lock = Mutex.new
    @changed = ConditionVariable.new
    @requests = []
    @handlers = []
    @released = false
    @stopped = false
    @deadline = monotonic_now + MAX_LIFETIME
    @acceptor = Thread.new { accept_loop }
    @acceptor.report_on_exception = false
  end

  def port
    @server.addr[1]
  end

  def url
    "http://127.0.0.1:#{port}"
  end

  def requests
    @lock.synchronize { @requests.dup }
  end

  # Waits until count requests have arrived; returns whether they did.
  def wait_for_requests(count, timeout: 5)
    deadline = monotonic_now + timeout
    @lock.synchronize do
      while @requests.size < count
        left = deadline - monotonic_now
        return false if left <= 0

        @changed.wait(@lock, left)
      end
    end
    true
  end

  # Answers the hanging connections (and later :hang requests) with 200.
  def release
    @lock.synchronize do
      @released = true
      @changed.broadcast
    end
  end

  def stop
    @lock.synchronize do
      @stopped = true
      @changed.broadcast
    end
    @acceptor.join(1)
    @server.close unless @server.closed?
    @lock.synchronize { @handlers.dup }.each { |thread| thread.join(1) || thread.kill }
  end

  # Parses a multipart/form-data body strictly: CRLF line ends, every part
  # with a form-data Content-Disposition, the closing delimiter present.
  def self.parse_multipart(content_type, body)
    boundary = content_type.to_s[/\Amultipart\/form-data;\s*boundary=("?)([^";]+)\1\z/i, 2]
    raise ArgumentError, "not multipart/form-data: #{content_type.inspect}" unless boundary

    delimiter = "--#{boundary}"
    body = body.b
    raise ArgumentError, "body does not start with the boundary" unless body.start_with?("#{delimiter}\r\n")

    closing = body.index("\r\n#{delimiter}--")
    raise ArgumentError, "no closing boundary" unless closing

    body[delimiter.size + 2...closing].split("\r\n#{delimiter}\r\n", -1).map { |raw| parse_part(raw) }
  end

  def self.parse_part(raw)
    head, separator, data = raw.partition("\r\n\r\n")
    raise ArgumentError, "part without a blank line after its headers" if separator.empty?

    headers = head.split("\r\n").to_h do |line|
      name, value = line.split(":", 2)
      [name.downcase, value.to_s.strip]
    end
    disposition = headers.fetch("content-disposition") { raise ArgumentError, "part without Content-Disposition" }
    raise ArgumentError, "not form-data: #{disposition}" unless disposition.start_with?("form-data")

    Part.new(name: disposition[/\bname="([^"]*)"/, 1], filename: disposition[/\bfilename="([^"]*)"/, 1],
             content_type: headers["content-type"], body: data)
  end

  private

  def accept_loop
    until @lock.synchronize { @stopped } || monotonic_now > @deadline
      next unless @server.wait_readable(ACCEPT_POLL)

      socket = @server.accept_nonblock(exception: false)
      next if socket == :wait_readable

      handler = Thread.new { handle(socket) }
      handler.report_on_exception = false
      @lock.synchronize { @handlers << handler }
    end
  end

  def handle(socket)
    request = read_request(socket)
    return unless request

    status = @lock.synchronize do
      @requests << request
      @changed.broadcast
      @status
    end
    status = wait_for_release if status == :hang
    respond(socket, status) if status
  rescue IOError, SystemCallError
    nil # the client gave up (a timeout test): nothing to answer
  ensure
    socket.close unless socket.closed?
  end

  # Only a whole request is recorded: a client that goes away part-way (a
  # worker killed while it uploads, a client's own timeout) leaves a request
  # line without its version, headers without their blank line or a body
  # shorter than its Content-Length, and the connection is closed unanswered.
  def read_request(socket)
    request_line = read_line(socket)
    return nil unless request_line

    method, target, version = request_line.split(" ", 3)
    return nil unless version&.start_with?("HTTP/")

    headers = read_headers(socket)
    return nil unless headers

    body = read_body(socket, headers)
    return nil unless body

    path, query = target.split("?", 2)
    Request.new(method: method, path: path, query: query, headers: headers, body: body)
  end

  # The header fields, or nil when the connection ended before the blank line.
  def read_headers(socket)
    headers = {}
    loop do
      line = read_line(socket)
      return nil unless line
      return headers if line.empty?

      name, value = line.split(":", 2)
      headers[name.downcase] = value.to_s.strip
    end
  end

  def read_body(socket, headers)
    raise ArgumentError, "chunked bodies are not expected from the exporters" if headers["transfer-encoding"]

    length = headers.fetch("content-length", "0").to_i
    body = String.new(encoding: Encoding::BINARY)
    while body.size < length
      return nil unless socket.wait_readable(READ_TIMEOUT)

      chunk = socket.readpartial(length - body.size)
      body << chunk
    end
    body
  end

  # A line without its CRLF, or nil when the connection ended before it.
  def read_line(socket)
    return nil unless socket.wait_readable(READ_TIMEOUT)

    line = socket.gets("\r\n")
    line&.end_with?("\r\n") ? line.chomp("\r\n") : nil
  end

  # Returns 200 once released, nil once stopped (the connection is then
  # closed without an answer).
  def wait_for_release
    deadline = monotonic_now + MAX_HANG
    @lock.synchronize do
      until @released || @stopped
        left = deadline - monotonic_now
        break if left <= 0

        @changed.wait(@lock, left)
      end
      @released ? 200 : nil
    end
  end

  def respond(socket, status)
    body = status < 300 ? (success_body || "{}").b : "error #{status}"
    socket.write("HTTP/1.1 #{status} X\r\nContent-Type: text/plain\r\nContent-Length: #{body.bytesize}\r\n" \
                 "Connection: close\r\n\r\n#{body}")
  end

  def monotonic_now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
