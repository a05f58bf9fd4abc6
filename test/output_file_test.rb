# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "stress/pprof_forge"
require "fileutils"
require "stringio"
require "sonde/cli"
require "sonde/output_file"

# Writers never replace what is not a regular file (issue 23, item 2): a
# FIFO's reader gets the bytes, a symlink stays a link with the bytes in its
# target, a character device stays a device; a regular file or a new path
# is replaced atomically, and a temporary file left by a killed writer is
# removed by the next write to the same path. Each writer is tried: Sonde's
# helper, Profile#write, `sonde flamegraph -o`, `sonde convert -o`,
# Sonde.profile(out:) and `sonde record -o` (the last two in children,
# since they sample).
class OutputFileTest < Minitest::Test
  include SondeTestHelper

  # /dev/null's numbers: a copy made with mknod is a device of our own.
  NULL_DEVICE = "c 1 3"

  def setup
    @dir = Dir.mktmpdir("sonde-output")
    @pprof = File.join(@dir, "in.pprof")
    File.binwrite(@pprof, PprofForge::Builder.standard.gzip)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # --- the helper --------------------------------------------------------------

  def test_a_fifo_gets_the_bytes_and_stays_a_fifo
    fifo = make_fifo("out.pprof")
    read = read_fifo_in_thread(fifo)
    Sonde::OutputFile.write(fifo, "profile bytes".b)
    assert_equal "profile bytes".b, read.value
    assert File.pipe?(fifo)
  end

  def test_a_symlink_stays_a_link_and_its_target_gets_the_bytes
    target = File.join(@dir, "target.pprof")
    File.binwrite(target, "old")
    link = File.join(@dir, "link.pprof")
    File.symlink(target, link)
    Sonde::OutputFile.write(link, "new".b)
    assert File.symlink?(link), "the link was replaced"
    assert_equal "new", File.binread(target)
    assert_empty Dir.children(@dir).grep(/\.tmp\z/)
  end

  def test_a_dangling_symlink_gets_its_target_created
    target = File.join(@dir, "later.pprof")
    link = File.join(@dir, "link.pprof")
    File.symlink(target, link)
    Sonde::OutputFile.write(link, "bytes".b)
    assert File.symlink?(link)
    assert_equal "bytes", File.binread(target)
  end

  def test_a_character_device_stays_a_device
    device = make_null_device("null")
    Sonde::OutputFile.write(device, "x" * 100_000)
    assert File.chardev?(device), "the device was replaced by a #{File.ftype(device)}"
  end

  def test_a_regular_file_is_replaced_whole
    path = File.join(@dir, "out.pprof")
    File.binwrite(path, "a much longer old content")
    inode = File.stat(path).ino
    Sonde::OutputFile.write(path, "new".b)
    assert_equal "new", File.binread(path)
    refute_equal inode, File.stat(path).ino, "renamed into place, not rewritten"
  end

  def test_a_killed_writers_temporary_file_is_removed_by_the_next_write
    path = File.join(@dir, "out.pprof")
    dead = dead_pid
    stale = "#{path}.#{dead}.tmp"
    live = "#{path}.#{Process.ppid}.tmp" # a writer still running keeps its file
    other = "#{path}.backup.#{dead}.tmp" # not a temporary file of this path
    [stale, live, other].each { |file| File.binwrite(file, "half") }
    Sonde::OutputFile.write(path, "whole".b)
    refute File.exist?(stale), "the dead writer's temporary file is left"
    assert File.exist?(live), "a running writer's temporary file was removed"
    assert File.exist?(other)
    assert_equal "whole", File.binread(path)
  end

  # A symlink at this process's own temporary name is removed, not
  # followed: its target keeps what it had.
  def test_a_symlink_at_the_temporary_name_is_not_followed
    path = File.join(@dir, "out.pprof")
    victim = File.join(@dir, "victim")
    File.binwrite(victim, "keep me")
    File.symlink(victim, "#{path}.#{Process.pid}.tmp")
    Sonde::OutputFile.write(path, "profile".b)
    assert_equal "keep me", File.binread(victim)
    assert_equal "profile", File.binread(path)
    refute File.exist?("#{path}.#{Process.pid}.tmp")
  end

  def test_a_failed_write_leaves_no_temporary_file
    path = File.join(@dir, "out.pprof")
    assert_raises(IOError) { Sonde::OutputFile.write(path) { |_io| raise IOError, "disk gone" } }
    assert_empty Dir.children(@dir) - ["in.pprof"]
  end

  # --- each writer ---------------------------------------------------------------

  def test_profile_write_keeps_a_fifo_a_link_and_a_device
    profile = Sonde::Profile.new(pprof: File.binread(@pprof), start_time: Time.now, duration: 1.0, stats: {})
    each_special_path do |path|
      profile.write(path)
    end
  end

  def test_flamegraph_and_convert_keep_a_fifo_a_link_and_a_device
    each_special_path do |path|
      assert_equal 0, Sonde::CLI.run(["flamegraph", @pprof, "-o", path], out: StringIO.new, err: StringIO.new)
    end
    each_special_path do |path|
      assert_equal 0, Sonde::CLI.run(["convert", @pprof, "--to", "collapsed", "-o", path],
                                     out: StringIO.new, err: StringIO.new)
    end
  end

  def test_sonde_profile_out_keeps_a_fifo_a_link_and_a_device
    each_special_path do |path|
      _out, err, status = run_ruby("-rsonde", "-e", "Sonde.profile(out: ARGV[0]) { 1 + 1 }", path)
      assert status.success?, err
    end
  end

  def test_sonde_record_delivers_to_a_fifo_a_link_and_a_device
    each_special_path do |path|
      _out, err, status = run_sonde("record", "-o", path, "--", RbConfig.ruby, "-e", "1 + 1")
      assert status.success?, err
      assert_includes err, "sonde: wrote #{path}"
    end
  end

  # --- this process's own descriptors (/dev/stdout) ----------------------------

  # /dev/stdout is a link to /proc/self/fd/1: opened, it would be a new open
  # file at offset 0 (overwriting what stdout already wrote to a file), and
  # by the rename rule its file would be swapped out under the shell.
  def test_dev_stdout_is_written_through_the_descriptor_where_its_next_bytes_go
    out = File.join(@dir, "stdout.txt")
    File.binwrite(out, "kept\n")
    script = <<~RUBY
      require "sonde/output_file"
      print "before "
      Sonde::OutputFile.write("/dev/stdout", "PROFILE")
      Sonde::OutputFile.write("/dev/fd/1", "+FD")
      puts " after"
    RUBY
    File.open(out, "a") do |file|
      err, status = run_with_stdout(file, RbConfig.ruby, "-I#{LIB}", "-e", script)
      assert status.success?, err
    end
    assert_equal "kept\nbefore PROFILE+FD after\n", File.binread(out)
  end

  def test_sonde_record_to_dev_stdout_keeps_the_commands_output_and_its_children_write_elsewhere
    out = File.join(@dir, "record.out")
    command = [RbConfig.ruby, "-e", "puts 'hello'; $stdout.flush; Process.wait(fork { 1 + 1 })"]
    err = File.open(out, "w") do |file|
      err, status = run_with_stdout(file, RbConfig.ruby, "-I#{LIB}", EXE, "record", "-o", "/dev/stdout", "--", *command)
      assert status.success?, err
      err
    end
    bytes = File.binread(out)
    assert bytes.start_with?("hello\n"), bytes[0, 40].inspect
    profile = Sonde::Pprof.decode(bytes.delete_prefix("hello\n"))
    refute_empty profile.sample_types
    child = err[%r{sonde: wrote (\S+) \(another Ruby process\)}, 1]
    assert child, err
    assert_match(/\A#{Regexp.escape(File.join(Dir.tmpdir, "sonde-stdout."))}\d+\.pprof\z/, child)
    assert File.file?(child), "the child's profile is a file of its own"
    File.unlink(child)
    refute File.exist?("/dev/stdout.#{child[/(\d+)\.pprof\z/, 1]}"), "nothing is created in /dev"
  end

  def test_format_html_refuses_an_output_it_cannot_read_back
    _out, err, status = run_sonde("record", "-o", "/dev/stdout", "--format", "html", "--", RbConfig.ruby, "-e", "1")
    assert_equal 2, status.exitstatus
    assert_equal "sonde record: --format html needs -o FILE to be a regular file or a new path (the page is drawn " \
                 "from it); /dev/stdout is not (a device, a FIFO or a link to one)\n", err
  end

  private

  # [stderr, status] of a command whose stdout is file.
  def run_with_stdout(file, *command)
    err_read, err_write = IO.pipe
    pid = Process.spawn(*command, out: file, err: err_write)
    err_write.close
    err = err_read.read
    [err, Process.wait2(pid).last]
  ensure
    err_read&.close
  end

  # Yields a FIFO (with a reader), a symlink and a character device in turn,
  # and checks after each write that it is still what it was and that the
  # bytes arrived.
  def each_special_path
    fifo = make_fifo("out.fifo")
    read = read_fifo_in_thread(fifo)
    yield fifo
    assert File.pipe?(fifo), "the FIFO was replaced by a #{File.ftype(fifo)}"
    refute_empty read.value, "the FIFO's reader got nothing"

    target = File.join(@dir, "target.out")
    link = File.join(@dir, "out.link")
    File.symlink(target, link)
    yield link
    assert File.symlink?(link), "the link was replaced by a #{File.ftype(link)}"
    refute_empty File.binread(target)

    device = make_null_device("out.null")
    yield device
    assert File.chardev?(device), "the device was replaced by a #{File.ftype(device)}"
  ensure
    [fifo, link, target, device].compact.each { |path| FileUtils.rm_f(path) }
  end

  def make_fifo(name)
    path = File.join(@dir, name)
    File.mkfifo(path)
    path
  end

  # The thread's value is what it read, once the writer closed the FIFO.
  def read_fifo_in_thread(path)
    Thread.new { File.binread(path) }.tap { |thread| thread.report_on_exception = false }
  end

  def make_null_device(name)
    skip "mknod needs root" unless Process.uid.zero?
    path = File.join(@dir, name)
    assert system("mknod", path, *NULL_DEVICE.split), "mknod failed"
    path
  end

  def dead_pid
    pid = Process.spawn(RbConfig.ruby, "-e", "0")
    Process.wait(pid)
    pid
  end
end
