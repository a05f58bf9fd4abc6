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
  # - A path that names one of this process's descriptors (/dev/stdout,
  #   /dev/fd/3) is written through that descriptor, where its next bytes
  #   would go: `-o /dev/stdout > out` neither overwrites nor replaces out.
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
    # /proc/<pid>/fd/N (and a thread's /proc/<pid>/task/<tid>/fd/N), as
    # realpath spells /proc/self/fd/N.
    OWN_DESCRIPTOR = %r{\A/proc/(\d+)(?:/task/\d+)?/fd/(\d+)\z}.freeze
    # As the kernel's limit on symlinks followed in one lookup (ELOOP).
    MAX_LINK_HOPS = 40

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
      when :descriptor then write_to_descriptor(target, bytes, &block)
      end
      path
    end

    # Moves the file at from to path, by the rules of #write: a rename when
    # path is a regular file or new, else a copy into it (from is removed).
    def move(from, path)
      how, target = destination(path.to_s)
      case how
      when :replace then File.rename(from, target)
      when :in_place then write_in_place(target, File.binread(from))
      when :descriptor then write_to_descriptor(target, File.binread(from))
      end
      File.unlink(from) unless how == :replace
    end

    # Whether path is written in place (a device, a FIFO, a /proc link, or a
    # symlink to one) rather than replaced; false for a path that cannot be
    # examined (the write then says why).
    def writes_in_place?(path)
      destination(path.to_s).first != :replace
    rescue SystemCallError
      false
    end

    # [:replace, the regular file (or new path) to rename over],
    # [:in_place, the path to open and write], or [:descriptor, N] for a
    # path that names this process's own descriptor N (/dev/stdout,
    # /dev/fd/N, /proc/self/fd/N): written through that descriptor. Raises
    # Errno::EISDIR for a directory.
    def destination(path)
      descriptor = own_descriptor(path)
      return [:descriptor, descriptor] if descriptor

      stat = lstat(path)
      return [:replace, path] if stat.nil? || stat.file?
      raise Errno::EISDIR, path if stat.directory?
      return [:in_place, path] unless stat.symlink?

      target = link_target(path)
      target ? [:replace, target] : [:in_place, path]
    end

    # The descriptor N when path leads, through its links, to
    # /proc/<this pid>/fd/N. Opening such a path would make a new open file
    # at offset 0 and, for a file, the rename rule would replace it:
    # `sonde record -o /dev/stdout -- cmd > out` would overwrite what cmd
    # printed, or swap out the shell's file. Written through the inherited
    # descriptor, the bytes go where stdout's next bytes would go.
    def own_descriptor(path)
      current = File.expand_path(path)
      MAX_LINK_HOPS.times do
        current = File.join(File.realpath(File.dirname(current)), File.basename(current))
        match = OWN_DESCRIPTOR.match(current)
        return Integer(match[2], 10) if match && Integer(match[1], 10) == Process.pid

        stat = lstat(current)
        return nil unless stat&.symlink?

        current = File.expand_path(File.readlink(current), File.dirname(current))
      end
      nil
    rescue SystemCallError
      nil
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

    # Through the descriptor itself, left open: not truncated, appended at
    # its offset (or, with O_APPEND, its end). What $stdout or $stderr
    # buffered for it goes first.
    def write_to_descriptor(descriptor, bytes, &block)
      [$stdout, $stderr].each { |io| io.flush if !io.closed? && io.fileno == descriptor }
      io = IO.for_fd(descriptor, "wb", autoclose: false)
      fill(io, bytes, &block)
      io.flush
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
