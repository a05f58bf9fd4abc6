# frozen_string_literal: true

require "fileutils"
require "securerandom"
require_relative "../output_file"
require_relative "base"
require_relative "registry"

module Sonde
  module Exporters
    # Writes each profile to DIR/<service>-<pid>-<start>.pprof (start in UTC,
    # %Y%m%dT%H%M%SZ; "-2", "-3"... before ".pprof" when a name is taken
    # within the same second). Retention is per process: each process keeps
    # the newest `keep` files of its own pid, so the workers of a prefork
    # server (Puma, Unicorn) sharing one directory never delete each other's
    # profiles; `max_bytes`, when set, caps what the whole service's files
    # (every pid, the exited ones included) take, removing the oldest first
    # but never the file just written. A file is written under a hidden
    # temporary name in the same directory and renamed into place, so a
    # reader never sees a partial profile. The profile's tags are already in
    # it, as pprof comments ("service=web": the encoder writes them). Runs on
    # its own thread ("sonde-export-dir"), see Base; disk errors are
    # retried like network errors, since a full disk may free up.
    class Directory < Base
      EXTENSION = ".pprof"
      TIME_FORMAT = "%Y%m%dT%H%M%SZ"
      # The temporary file is hidden (a leading ".") and randomly named, so
      # neither a "*.pprof" reader nor a leftover of a crash gets in the way.
      TEMPORARY_RANDOM_BYTES = 6

      class << self
        def kind
          "dir"
        end

        def target_name
          "PATH"
        end

        def target_key
          :path
        end

        def option_names
          %i[keep max_bytes]
        end

        def check_target(path)
          raise TargetError, "the directory is missing" if path.strip.empty?

          path
        end

        # Creates the directory and proves it writable (File.writable? says
        # yes to root for a read-only directory or /sys).
        def prepare_target(path)
          path = File.expand_path(path)
          begin
            FileUtils.mkdir_p(path)
          rescue SystemCallError => e
            raise TargetError, "cannot create directory #{path}: #{e.message}"
          end
          raise TargetError, "#{path} is not writable" unless File.writable?(path)

          begin
            Profile.probe_directory(path)
          rescue SystemCallError => e
            raise TargetError, "#{path} is not writable (#{e.message.sub(/ @ .*/, "")})"
          end
          path
        end
      end

      attr_reader :directory

      def initialize(directory, settings)
        super(settings)
        @directory = directory
        @prefix = "#{settings.file_safe_service}-"
        # Only names this exporter could have written, of this service:
        # another service's "app-worker-..." never matches "app". The pid is
        # captured, for per-process retention.
        @own_file = /\A#{Regexp.escape(@prefix)}(\d+)-\d{8}T\d{6}Z(?:-\d+)?#{Regexp.escape(EXTENSION)}\z/
      end

      private

      def deliver(exported_profile)
        written = write_atomically(exported_profile.pprof, exported_profile.start_time)
        remove_old_files(written)
      rescue SystemCallError => e
        raise RetryableError, "cannot write a profile in #{directory}: #{e.message}"
      end

      # Returns the path written.
      def write_atomically(bytes, start_time)
        stem = "#{@prefix}#{Process.pid}-#{start_time.utc.strftime(TIME_FORMAT)}"
        temporary = File.join(directory, ".#{stem}.#{SecureRandom.hex(TEMPORARY_RANDOM_BYTES)}.tmp")
        # sync: the rename must not reach the disk before the data.
        OutputFile.write(free_path(stem), bytes, sync: true, temporary: temporary)
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

      # This process's files beyond `keep`, then, with max_bytes, the
      # service's oldest files until the rest fit (never the one just
      # written). Oldest by modification time, then name.
      def remove_old_files(written)
        files = service_files
        own = files.select { |file| file[:pid] == Process.pid }
        own.sort_by { |file| [file[:mtime], file[:name]] }.reverse.drop(settings.keep).each do |file|
          FileUtils.rm_f(file[:path])
          files.delete(file)
        end
        return unless settings.max_bytes

        total = files.sum { |file| file[:size] }
        files.sort_by { |file| [file[:mtime], file[:name]] }.each do |file|
          break if total <= settings.max_bytes
          next if file[:path] == written

          FileUtils.rm_f(file[:path])
          total -= file[:size]
        end
      end

      # {name:, path:, pid:, mtime:, size:} of each file of this service.
      def service_files
        Dir.children(directory).filter_map do |name|
          match = @own_file.match(name)
          next unless match

          path = File.join(directory, name)
          stat = File.stat(path)
          { name: name, path: path, pid: Integer(match[1], 10), mtime: stat.mtime, size: stat.size }
        rescue Errno::ENOENT
          nil # another process's exporter removed it meanwhile
        end
      end
    end

    Registry.register(Directory)
  end
end
