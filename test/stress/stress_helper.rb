# frozen_string_literal: true

# Shared by every test/stress/*_test.rb (run with `rake stress` or
# `rake stress:ci`; the default `rake test` leaves test/stress/ out).
#
# Sizes: each test picks its size with SondeStress.size(short, full):
# SONDE_STRESS=full (rake stress) runs the full sizes, anything else (rake
# stress:ci, or running one file by hand) the short ones.
#
# Profiled work runs in child processes (run_ruby / run_stress_workload),
# never in the test runner: signal handlers, threads and forks stay out of it.

require_relative "../support/test_helper"
require "fileutils"
require "json"
require "open3"
require "rbconfig"
require "socket"
require "timeout"

module SondeStress
  ROOT = File.expand_path("../..", __dir__)
  LIB = File.join(ROOT, "lib")
  SCRIPT_RUBY = File.join(ROOT, "script", "ruby")
  WORKLOADS = File.join(__dir__, "workloads")

  module_function

  # True under `rake stress` (SONDE_STRESS=full).
  def full?
    ENV["SONDE_STRESS"] == "full"
  end

  # The full size under SONDE_STRESS=full, the short one otherwise.
  def size(short, full)
    full? ? full : short
  end

  # Resident set size of a process in kilobytes (VmRSS of /proc/PID/status),
  # nil when the process is gone or /proc is not there.
  def rss_kb(pid = Process.pid)
    File.foreach("/proc/#{pid}/status") do |line|
      return line.split[1].to_i if line.start_with?("VmRSS:")
    end
    nil
  rescue Errno::ENOENT, Errno::ESRCH
    nil
  end

  # Monotonic seconds.
  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # A loopback TCP port that nothing listens on (bound then closed).
  def closed_port
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    server.close
    port
  end

  # Runs `ruby -Ilib ARGS...` in a child process with a timeout (seconds);
  # returns [stdout, stderr, Process::Status]. On timeout the child gets
  # SIGKILL and Timeout::Error is raised with what it printed so far.
  def run_ruby(*args, env: {}, timeout: 300, chdir: nil)
    run_command(env, RbConfig.ruby, "-I#{LIB}", *args, timeout: timeout, chdir: chdir)
  end

  # Runs a command (argv) with a timeout; returns [stdout, stderr, status].
  def run_command(env, *argv, timeout: 300, chdir: nil)
    options = { pgroup: true }
    options[:chdir] = chdir if chdir
    Open3.popen3(env, *argv, **options) do |stdin, stdout, stderr, wait|
      stdin.close
      out_reader = Thread.new { stdout.read }
      err_reader = Thread.new { stderr.read }
      unless wait.join(timeout)
        begin
          Process.kill(:KILL, -wait.pid)
        rescue Errno::ESRCH
          nil
        end
        wait.join
        raise Timeout::Error, "#{argv.join(" ")} did not finish in #{timeout} s\n" \
                              "stdout: #{out_reader.value}\nstderr: #{err_reader.value}"
      end
      [out_reader.value, err_reader.value, wait.value]
    end
  end

  # Runs test/stress/workloads/NAME.rb (which prints one JSON line of facts
  # last); returns [facts Hash, stderr, status]. Does not assert: callers do.
  def run_workload(name, *args, env: {}, timeout: 300)
    stdout, stderr, status = run_ruby(File.join(WORKLOADS, "#{name}.rb"), *args, env: env, timeout: timeout)
    facts = begin
      JSON.parse(stdout.lines.last.to_s)
    rescue JSON::ParserError
      nil
    end
    [facts, stderr, status, stdout]
  end

  # Compiles a test-only C extension (one .c file, Init_NAME) into
  # tmp/stress/ext/ unless it is already built from the same source;
  # returns the directory to put on the load path (-I) of a child.
  def build_c_extension(source)
    name = File.basename(source, ".c")
    dir = File.join(ROOT, "tmp", "stress", "ext", RUBY_VERSION)
    library = File.join(dir, "#{name}.#{RbConfig::CONFIG["DLEXT"]}")
    return dir if File.exist?(library) && File.mtime(library) >= File.mtime(source)

    FileUtils.mkdir_p(dir)
    # Built under a temporary name and renamed: two runs may build at once.
    temporary = "#{library}.#{Process.pid}.tmp"
    command = [RbConfig::CONFIG["CC"], "-shared", "-fPIC", "-Wall", "-o", temporary, source,
               "-I#{RbConfig::CONFIG["rubyhdrdir"]}", "-I#{RbConfig::CONFIG["rubyarchhdrdir"]}",
               "-L#{RbConfig::CONFIG["libdir"]}", *RbConfig::CONFIG["LIBRUBYARG_SHARED"].split, "-lpthread", "-ldl"]
    output, status = Open3.capture2e(*command)
    raise "could not build #{source}: #{output}" unless status.success?

    File.rename(temporary, library)
    dir
  end

  # Appends one line of measured figures to tmp/stress/figures.log (and
  # prints it), so a run's numbers can be copied into RESULTS.md.
  def record(test_name, figures)
    line = "#{Time.now.utc.strftime("%Y-%m-%dT%H:%M:%SZ")} #{full? ? "full" : "short"} #{test_name} " \
           "#{JSON.generate(figures)}"
    dir = File.join(ROOT, "tmp", "stress")
    Dir.mkdir(File.dirname(dir)) unless Dir.exist?(File.dirname(dir))
    Dir.mkdir(dir) unless Dir.exist?(dir)
    File.open(File.join(dir, "figures.log"), "a") { |f| f.puts(line) }
    puts "\n  #{line}" if ENV["SONDE_STRESS_VERBOSE"] || full?
    line
  end

  # Minitest assertions shared by the stress tests.
  module Assertions
    # The child exited with status 0 (not a signal); the message shows stderr.
    def assert_clean_exit(status, stderr, what = "child")
      if status.signaled?
        flunk "#{what} died of signal #{status.termsig} (SIG#{Signal.signame(status.termsig)}):\n#{stderr}"
      end
      assert_equal 0, status.exitstatus, "#{what} exited #{status.exitstatus}:\n#{stderr}"
    end

    # Skips unless Ruby version's chroot can run here (script/ruby needs
    # root) and this is not already that Ruby; then builds Sonde there.
    def build_on_other_ruby(version)
      skip "script/ruby needs root to run Ruby #{version}'s chroot" unless Process.uid.zero?
      skip "already on Ruby #{version}" if RUBY_VERSION.start_with?("#{version}.")

      _out, err, built = SondeStress.run_command({}, SondeStress::SCRIPT_RUBY, version, "rake", "compile",
                                                 timeout: 1800, chdir: SondeStress::ROOT)
      assert built.success?, "script/ruby #{version} rake compile failed:\n#{err}"
    end
  end
end
