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

      module_function

      # Reads each file and merges them into one profile (Pprof::Merge: the
      # same sample types required, equal samples summed), one file at a
      # time: memory follows the merged profile, not the number of files.
      def read_all(files)
        Pprof::Merge.each_merged(files) { |i| read(files[i], several: true) }
      rescue Pprof::Merge::IncompatibleError => e
        raise Error, e.message
      end

      # several: the command takes several files (report, flamegraph), so a
      # directory's profiles can be given as a glob.
      def read(file, several: false)
        Pprof.read(file)
      rescue Errno::ENOENT
        raise Error, "#{file}: no such file"
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
