# frozen_string_literal: true

require_relative "../record"
require_relative "../record_notes"
require_relative "../output_file"

module Sonde
  module CLI
    # What `sonde record` says once its command has ended, from the notes
    # its Ruby processes left (Sonde::RecordNotes): the profile written, or
    # why there is none: a write that failed (and its error), a process that
    # daemonized (and where its profile will go), a Ruby process that still
    # runs after the command ended (a shell killed under it). Only when no
    # Ruby process ever started profiling does it say that none ran.
    class RecordOutcome
      # A daemon notes its pid right after the fork: wait this long for it.
      DAEMON_NOTE_SECONDS = 1.0
      DAEMON_NOTE_POLL = 0.02

      # output: the absolute path of FILE; shown: FILE as the user gave it.
      def initialize(output:, shown:, notes_path:)
        @output = output
        @shown = shown
        @notes_path = notes_path
      end

      # Returns [main profile written?, lines to print]. When the command's
      # process wrote nothing but exactly one other Ruby process did (a shell
      # in between), that profile becomes FILE.
      def call
        notes = read_notes
        written = paths_of(notes, "wrote").select { |path| File.exist?(path) || path == @output.b }.uniq
        others = written - [@output.b]
        if !written.include?(@output.b) && others.size == 1 && !accounted_for_elsewhere?(notes)
          OutputFile.move(others.first, @output)
          written = [@output.b]
          others = []
        end
        lines = []
        main = written.include?(@output.b)
        lines << main_line(notes) unless main
        lines.concat(others.map { |path| "sonde: wrote #{path} (another Ruby process)" })
        lines.concat(other_failures(notes))
        [main, lines.compact]
      end

      private

      def read_notes
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + DAEMON_NOTE_SECONDS
        loop do
          notes = RecordNotes.read(@notes_path)
          return notes if daemons_settled?(notes) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

          sleep(DAEMON_NOTE_POLL)
        end
      end

      def daemons_settled?(notes)
        started = notes.count { |note| note.event == "daemonizing" }
        settled = notes.count { |note| %w[daemonized daemon_failed].include?(note.event) }
        settled >= started
      end

      def paths_of(notes, event)
        notes.select { |note| note.event == event }.map { |note| note.details.first.to_s }
      end

      # FILE's process failed to write it or daemonized: another process's
      # profile must not take its name.
      def accounted_for_elsewhere?(notes)
        notes.any? do |note|
          (%w[write_failed daemonizing].include?(note.event) && note.details.first == @output.b) ||
            (note.event == "daemonized" && note.details[1] == @output.b)
        end
      end

      def main_line(notes)
        failure = notes.reverse.find { |note| note.event == "write_failed" && note.details.first == @output.b }
        return "sonde: no profile was written to #{@shown}: process #{failure.pid} could not write it: " \
               "#{failure.details[1]}" if failure

        daemon = notes.reverse.find { |note| note.event == "daemonized" && note.details[1] == @output.b }
        return "sonde: no profile at #{@shown} yet: process #{daemon.details[0]} daemonized (Process.daemon); " \
               "the daemon, process #{daemon.pid}, runs on and writes #{@shown} when it exits" if daemon

        # The daemon's own note did not come in time (a loaded machine).
        leaving = notes.reverse.find { |note| note.event == "daemonizing" && note.details.first == @output.b }
        return "sonde: no profile at #{@shown} yet: process #{leaving.pid} daemonized (Process.daemon); " \
               "the daemon runs on and writes #{@shown} when it exits" if leaving && !daemon_failed?(notes, leaving)

        running = still_running(notes)
        unless running.empty?
          return "sonde: no profile at #{@shown} yet: the command ended, but its Ruby " +
                 running.map { |note| "process #{note.pid} still runs (it writes #{note.details.first} when it exits)" }
                        .join("; ")
        end

        "sonde: no profile was written to #{@shown}: the command ran no Ruby process that Sonde could profile"
      end

      def daemon_failed?(notes, leaving)
        notes.any? { |note| note.event == "daemon_failed" && note.pid == leaving.pid }
      end

      # Failures to write the other processes' files.
      def other_failures(notes)
        notes.select { |note| note.event == "write_failed" && note.details.first != @output.b }.map do |note|
          "sonde: process #{note.pid} could not write #{note.details.first}: #{note.details[1]}"
        end
      end

      # The last "started" note of each process that has noted nothing since
      # and is still alive.
      def still_running(notes)
        last = {}
        notes.each { |note| last[note.pid] = note }
        last.values.select { |note| note.event == "started" && alive?(note.pid) }
      end

      # A zombie (a process that ended and whose parent has not reaped it)
      # is not running.
      def alive?(pid)
        Process.kill(0, pid)
        state = File.read("/proc/#{pid}/stat")[/\) (\S)/, 1]
        state != "Z"
      rescue Errno::ESRCH
        false
      rescue Errno::EPERM, Errno::ENOENT
        true
      end
    end
  end
end
