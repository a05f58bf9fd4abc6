# frozen_string_literal: true

require "sonde/pprof"
require "sonde/pprof/merge"

module Sonde
  module CLI
    # Reads the pprof file a command was given. Every way it can fail (no such
    # file, a directory, unreadable, empty, truncated, not gzip, not pprof)
    # becomes one Error whose message names the file and what is wrong, so
    # each command prints one line and never a backtrace.
    module ProfileInput
      # message: "FILE: what is wrong"
      class Error < StandardError; end
      # The file is not there.
      class NoSuchFile < Error; end

      module_function

      # Reads each file and merges them into one profile (Pprof::Merge: the
      # same sample types required, equal samples summed), one file at a
      # time: memory follows the merged profile, not the number of files.
      #
      # Of several files, one there when the command started but gone by
      # the time it is read is left out, and on_gone is called with its
      # name: a directory exporter keeps only its newest files (`keep`), so
      # on a live directory a glob lists a file that the exporter then
      # removes (seen by hand: a Puma fleet writing every 5 s, one of 30
      # files gone a second later). A file missing from the start is an
      # error (a mistyped name), and so is every file gone.
      def read_all(files, on_gone: nil)
        missing = files.find { |file| !File.exist?(File.path(file)) }
        raise NoSuchFile, "#{missing}: no such file" if missing

        merged = Pprof::Merge.each_merged(files) do |i|
          read(files[i], several: true)
        rescue NoSuchFile
          raise if files.size == 1 || on_gone.nil?

          on_gone.call(files[i])
          nil
        end
        merged || raise(Error, "none of the #{files.size} files is there any more (each was removed after it was listed)")
      rescue Pprof::Merge::IncompatibleError => e
        raise Error, e.message
      end

      # The warning for a file left out by read_all.
      def gone_warning(file)
        "#{file}: gone since it was listed, left out (a directory exporter removes its oldest files as it writes new ones: `keep`)"
      end

      # several: the command takes several files (report, flamegraph), so a
      # directory's profiles can be given as a glob.
      def read(file, several: false)
        Pprof.read(file)
      rescue Errno::ENOENT
        raise NoSuchFile, "#{file}: no such file"
      rescue Errno::EISDIR
        # A directory exporter's folder is what a user has at hand.
        raise Error, "#{file}: is a directory" unless several

        raise Error, "#{file}: is a directory (for the profiles in it, give #{File.join(file, "*.pprof")})"
      rescue Errno::EACCES
        raise Error, "#{file}: permission denied"
      rescue SystemCallError => e
        raise Error, "#{file}: #{e.message}"
      rescue Pprof::DecodeError => e
        raise Error, "#{file}: #{e.message}"
      rescue Sonde::ArgumentError => e # a SONDE_READ_MAX_* variable that is not a number
        raise Error, e.message
      end
    end
  end
end
