# frozen_string_literal: true

require "securerandom"

module Sonde
  module Exporters
    # Builds a multipart/form-data body (RFC 7578) in memory. Built by hand
    # rather than with Net::HTTP#set_form so that the body has a known
    # Content-Length and every part carries exactly the filename and
    # Content-Type the intakes look at. Pure: runs on whichever thread calls
    # it (the exporter threads).
    class Multipart
      Part = Struct.new(:name, :filename, :content_type, :data, keyword_init: true)
      CRLF = "\r\n"
      # Random bytes in the boundary; a collision with the content is then
      # out of reach in practice, and the parts are checked anyway.
      BOUNDARY_RANDOM_BYTES = 16

      attr_reader :boundary

      def initialize
        @boundary = "sonde-#{SecureRandom.hex(BOUNDARY_RANDOM_BYTES)}"
        @parts = []
      end

      def add_file(name, filename:, content_type:, data:)
        @parts << Part.new(name: name, filename: filename, content_type: content_type, data: data.b)
        self
      end

      def content_type
        "multipart/form-data; boundary=#{boundary}"
      end

      # The whole body, binary.
      def body
        delimiter = "--#{boundary}".b
        out = String.new(encoding: Encoding::BINARY)
        @parts.each do |part|
          raise ::ArgumentError, "multipart boundary occurs in part #{part.name}" if part.data.include?(delimiter)

          out << delimiter << CRLF
          out << %(Content-Disposition: form-data; name="#{quote(part.name)}"; filename="#{quote(part.filename)}") << CRLF
          out << "Content-Type: #{part.content_type}" << CRLF << CRLF
          out << part.data << CRLF
        end
        out << delimiter << "--" << CRLF
      end

      private

      # RFC 7578 4.2: a quoted name escapes its quote and line breaks.
      def quote(text)
        text.to_s.gsub('"', "%22").gsub("\r", "%0D").gsub("\n", "%0A").b
      end
    end
  end
end
