# frozen_string_literal: true

module Sonde
  # Where every writer of Sonde's output puts its bytes (Profile#write, so
  # Sonde.profile(out:) and `sonde record -o`; the dir: exporter; `sonde
  # flamegraph -o`, `sonde convert -o`). Two rules:
  #
  # - Bytes go out as bytes: files are opened in binary mode, so neither
  #   Encoding.default_internal (Rails sets UTF-8) nor default_external
  #   transcodes them (File::BINARY is 0 on Linux: it sets nothing).
  # - Only a regular file, or a path that does not exist yet, is replaced by
  #   a temporary file renamed over it (a reader never sees half of it). A
  #   device, a FIFO or a /proc link is opened and written in place, as
  #   `cat > path` would: renaming over /dev/null would replace /dev/null. A
  #   symlink stays a link: its target gets the bytes, by the same rules.
  #
  # The temporary file is PATH.<pid>.tmp; one left by a writer that was
  # killed (its pid no longer runs) is removed by the next write to PATH.
  module OutputFile
    # PATH.<pid>.tmp
    TEMPORARY_SUFFIX = /\.(\d+)\.tmp\z/.freeze
    # Above Linux's largest pid (PID_MAX_LIMIT): a name with a bigger number
    # is not one of Sonde's temporary files.
    PID_LIMIT = 1 << 22
    # O_EXCL: a temporary name is never opened through whatever is there
    # already (a symlink planted in a shared directory would be followed).
    OPEN_FLAGS = File::WRONLY | File::CREAT | File::EXCL
    WRITE_IN_PLACE = File::WRONLY

    module_function

    # Writes bytes (a String), or what the block writes to the IO it is
    # given, to path. sync: fsync before the rename. temporary: the name to
    # write before the rename (default PATH.<pid>.tmp). Returns path. Raises
    # SystemCallError when the file cannot be written; nothing is left
    # behind then but what a device or FIFO already took.
    def write(path, bytes = nil, sync: false, temporary: nil, &block)
      path = path.to_s
      how, target = destination(path)
      case how
      when :replace then replace(target, bytes, sync: sync, temporary: temporary, &block)
      when :in_place then write_in_place(target, bytes, &block)
      end
      path
    end

    # Moves the file at from to path, by the rules of #write: a rename when
    # path is a regular file or new, else a copy into it (from is removed).
    def move(from, path)
      how, target = destination(path.to_s)
      if how == :replace
        File.rename(from, target)
      else
        write_in_place(target, File.binread(from))
        File.unlink(from)
      end
    end

    # [:replace, the regular file (or new path) to rename over] or
    # [:in_place, the path to open and write]. Raises Errno::EISDIR for a
    # directory.
    def destination(path)
      stat = lstat(path)
      return [:replace, path] if stat.nil? || stat.file?
      raise Errno::EISDIR, path if stat.directory?
      return [:in_place, path] unless stat.symlink?

      target = link_target(path)
      target ? [:replace, target] : [:in_place, path]
    end

    # The regular file (or the missing file) a symlink leads to, or nil when
    # it leads to anything else: a device, a FIFO, or a /proc "magic" link
    # such as /dev/stdout -> /proc/self/fd/1, which only opening follows.
    def link_target(path)
      target = File.realdirpath(path)
      return nil if target.start_with?("/proc/")

      stat = lstat(target)
      target if stat.nil? || stat.file?
    rescue SystemCallError
      nil
    end

    # nil when nothing is there (or a parent is not a directory: the open
    # then says so).
    def lstat(path)
      File.lstat(path)
    rescue Errno::ENOENT, Errno::ENOTDIR
      nil
    end

    def replace(path, bytes, sync:, temporary:, &block)
      unless temporary
        remove_stale_temporaries(path)
        temporary = "#{path}.#{Process.pid}.tmp"
      end
      open_temporary(temporary) do |io|
        fill(io, bytes, &block)
        io.fsync if sync
      end
      File.rename(temporary, path)
    ensure
      remove_quietly(temporary) if temporary && File.exist?(temporary)
    end

    # A leftover of this pid (a pid the system reused, a write cut short)
    # is removed once, then the name must be free.
    def open_temporary(temporary, &block)
      File.open(temporary, OPEN_FLAGS, binmode: true, &block)
    rescue Errno::EEXIST
      File.unlink(temporary)
      File.open(temporary, OPEN_FLAGS, binmode: true, &block)
    end

    # O_TRUNC is left out: a FIFO and a device ignore it, and a regular file
    # reached through /proc (stdout redirected to a file) is truncated only
    # once it is known to be one.
    def write_in_place(path, bytes, &block)
      File.open(path, WRITE_IN_PLACE, binmode: true) do |io|
        io.truncate(0) if io.stat.file?
        fill(io, bytes, &block)
        io.flush
      end
    end

    def fill(io, bytes)
      if bytes
        io.write(bytes)
      else
        yield io
      end
    end

    # PATH.<pid>.tmp files beside path whose writer no longer runs.
    def remove_stale_temporaries(path)
      directory = File.dirname(path)
      prefix = "#{File.basename(path)}."
      Dir.each_child(directory) do |name|
        next unless name.start_with?(prefix)

        match = TEMPORARY_SUFFIX.match(name, prefix.length - 1)
        next unless match && match.begin(0) == prefix.length - 1

        pid = Integer(match[1], 10)
        next if pid == Process.pid || pid >= PID_LIMIT || pid.zero? || running?(pid)

        remove_quietly(File.join(directory, name))
      end
    rescue SystemCallError
      nil # an unreadable directory: the write itself says what is wrong
    end

    def running?(pid)
      Process.kill(0, pid)
      true
    rescue Errno::ESRCH
      false
    rescue Errno::EPERM
      true # another user's process
    end

    def remove_quietly(path)
      File.unlink(path)
    rescue SystemCallError
      nil
    end
  end
end
