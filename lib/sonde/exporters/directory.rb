# frozen_string_literal: true

require "fileutils"
require "securerandom"
require_relative "base"
require_relative "pprof_comments"

module Sonde
  module Exporters
    # Writes each profile to DIR/<service>-<pid>-<start>.pprof (start in UTC,
    # %Y%m%dT%H%M%SZ; "-2", "-3"... before ".pprof" when a name is taken
    # within the same second) and keeps the newest `keep` files of this
    # service, whatever process wrote them. A file is written under a hidden
    # temporary name in the same directory and renamed into place, so a
    # reader never sees a partial profile. The profile's tags are written
    # into it as pprof comments ("service=web"; see PprofComments). Runs on
    # its own thread ("sonde-export-directory"), see Base; disk errors are
    # retried like network errors, since a full disk may free up.
    class Directory < Base
      EXTENSION = ".pprof"
      TIME_FORMAT = "%Y%m%dT%H%M%SZ"
      # The temporary file is hidden (a leading ".") and randomly named, so
      # neither a "*.pprof" reader nor a leftover of a crash gets in the way.
      TEMPORARY_RANDOM_BYTES = 6

      attr_reader :directory

      def initialize(directory, settings)
        super(settings)
        @directory = directory
        @prefix = "#{settings.file_safe_service}-"
        # Only names this exporter could have written, of this service:
        # another service's "app-worker-..." never matches "app".
        @own_file = /\A#{Regexp.escape(@prefix)}\d+-\d{8}T\d{6}Z(?:-\d+)?#{Regexp.escape(EXTENSION)}\z/
      end

      def kind
        "directory"
      end

      private

      # The file is all that is kept, so the tags go into it (as comments).
      def deliver(exported_profile)
        bytes = PprofComments.append(exported_profile.pprof, PprofComments.from_tags(exported_profile.tags))
        write_atomically(bytes, exported_profile.start_time)
        remove_old_files
      rescue SystemCallError => e
        raise RetryableError, "cannot write a profile in #{directory}: #{e.message}"
      end

      def write_atomically(bytes, start_time)
        stem = "#{@prefix}#{Process.pid}-#{start_time.utc.strftime(TIME_FORMAT)}"
        temporary = File.join(directory, ".#{stem}.#{SecureRandom.hex(TEMPORARY_RANDOM_BYTES)}.tmp")
        File.open(temporary, File::WRONLY | File::CREAT | File::EXCL | File::BINARY) do |file|
          file.write(bytes)
          file.fsync # the rename must not reach the disk before the data
        end
        File.rename(temporary, free_path(stem))
      ensure
        FileUtils.rm_f(temporary) if temporary
      end

      # The pid in the name keeps other processes' files apart, and this
      # exporter's one thread is the only writer of this pid's names, so a
      # name found free here stays free until the rename.
      def free_path(stem)
        path = File.join(directory, "#{stem}#{EXTENSION}")
        counter = 1
        while File.exist?(path)
          counter += 1
          path = File.join(directory, "#{stem}-#{counter}#{EXTENSION}")
        end
        path
      end

      def remove_old_files
        files = Dir.children(directory).select { |name| @own_file.match?(name) }
        return if files.size <= settings.keep

        stamped = files.filter_map do |name|
          path = File.join(directory, name)
          [File.mtime(path), name, path]
        rescue Errno::ENOENT
          nil # another process's exporter removed it meanwhile
        end
        stamped.sort.reverse.drop(settings.keep).each { |_mtime, _name, path| FileUtils.rm_f(path) }
      end
    end
  end
end
