# frozen_string_literal: true

module Sonde
  # What the Ruby processes under `sonde record` tell it, so that its last
  # message says what happened rather than guessing from files: each
  # process notes that it started profiling, where it wrote its profile or
  # why it could not, and that it daemonized. The notes are lines appended
  # to one file that `sonde record` creates (SONDE_RECORD_NOTES names it):
  # "<pid>\t<event>\t<detail>..." (tab-separated), each appended with one write(2), so the
  # lines of concurrent processes never mix. A note that cannot be written
  # is dropped: it must never stop the program or its profile.
  module RecordNotes
    VARIABLE = "SONDE_RECORD_NOTES"
    EVENTS = %w[started wrote write_failed daemonizing daemonized daemon_failed].freeze

    # One note, as `sonde record` reads it back.
    Note = Struct.new(:pid, :event, :details, keyword_init: true)

    module_function

    # Appends a note of this process, when running under `sonde record`.
    def add(event, *details)
      path = ENV[VARIABLE]
      return unless path && !path.empty?

      fields = [Process.pid.to_s, event, *details.map { |detail| detail.to_s.b.tr("\t\n", "  ") }]
      line = "#{fields.map(&:b).join("\t")}\n"
      File.open(path, File::WRONLY | File::APPEND, binmode: true) { |file| file.write(line) }
    rescue SystemCallError, IOError, EncodingError
      nil
    end

    # The notes in the file at path, in the order they were written; their
    # details are bytes (a path is compared as bytes).
    def read(path)
      File.binread(path).each_line.filter_map do |line|
        pid, event, *details = line.chomp.split("\t")
        next unless EVENTS.include?(event) && pid.match?(/\A\d+\z/)

        Note.new(pid: Integer(pid, 10), event: event, details: details)
      end
    rescue SystemCallError
      []
    end
  end
end
