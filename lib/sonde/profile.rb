# frozen_string_literal: true

require_relative "errors"
require_relative "output_file"

module Sonde
  # One finished profile: the gzip'd pprof bytes and what is known about the
  # run that made them.
  class Profile
    # The gzip-compressed pprof (perftools.profiles.Profile) bytes.
    attr_reader :pprof
    # When sampling started (Time) and how long it ran (seconds, Float).
    attr_reader :start_time, :duration
    # Sonde.stats as they were when the profile was taken.
    attr_reader :stats

    def initialize(pprof:, start_time:, duration:, stats:)
      @pprof = pprof
      @start_time = start_time
      @duration = duration
      @stats = stats
      freeze
    end

    # Writes the profile to path: a regular file (or a new one) atomically,
    # a device, FIFO or symlink's target through it (Sonde::OutputFile), so
    # a reader never sees half a profile and /dev/null stays a device.
    # Returns path.
    def write(path)
      path = path.to_s
      Profile.check_writable!(path)
      OutputFile.write(path, pprof)
    rescue SystemCallError => e
      raise Sonde::Error, "cannot write the profile to #{path}: #{e.message.sub(/ @ .*/, "")}"
    end

    # The decoded profile (Sonde::Pprof::Profile), for reports and tests.
    def decode
      require_relative "pprof"
      Sonde::Pprof.decode(pprof)
    end

    # Raises Sonde::ArgumentError unless a file can be written at path: its
    # directory exists and is writable, and path is not a directory. Called
    # at start, so a bad path fails before a long run, not after.
    def self.check_writable!(path)
      path = path.to_s
      raise Sonde::ArgumentError, "output path is empty" if path.empty?
      raise Sonde::ArgumentError, "output path #{path} is a directory; give a file name" if File.directory?(path)

      how, target = begin
        OutputFile.destination(path)
      rescue SystemCallError => e
        raise Sonde::ArgumentError, "cannot write #{path}: #{e.message.sub(/ @ .*/, "")}"
      end
      return check_writable_in_place!(path) if how == :in_place
      return path if how == :descriptor # one of this process's own: its write says if it is not writable

      check_replaceable!(path, target)
    end

    # A device or FIFO is written through, never created: opening it here
    # would block on a FIFO with no reader yet.
    def self.check_writable_in_place!(path)
      raise Sonde::ArgumentError, "cannot write #{path}: it is not writable" unless File.writable?(path)

      path
    end

    # target: the regular file (or new path) path leads to.
    def self.check_replaceable!(path, target)
      directory = File.dirname(File.expand_path(target))
      raise Sonde::ArgumentError, "cannot write #{path}: directory #{directory} does not exist" unless File.directory?(directory)
      raise Sonde::ArgumentError, "cannot write #{path}: directory #{directory} is not writable" unless File.writable?(directory)
      if File.exist?(target) && !File.writable?(target)
        raise Sonde::ArgumentError, "cannot write #{path}: the file exists and is not writable"
      end
      begin
        probe_directory(directory)
      rescue SystemCallError => e
        raise Sonde::ArgumentError, "cannot write #{path}: cannot create a file in #{directory} (#{e.message.sub(/ @ .*/, "")})"
      end

      path
    end

    # File.writable? asks access(2), which says yes to root for a read-only
    # directory and for /proc or /sys: creating (and removing) a file is the
    # only sure test. Raises SystemCallError when it cannot be done.
    def self.probe_directory(directory)
      probe = File.join(directory, ".sonde-probe-#{Process.pid}-#{Thread.current.object_id}")
      File.open(probe, File::WRONLY | File::CREAT | File::EXCL) { nil }
      File.unlink(probe)
    end
  end
end
