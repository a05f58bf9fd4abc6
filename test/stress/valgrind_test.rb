# frozen_string_literal: true

require_relative "stress_helper"
require "fileutils"

# Valgrind memcheck (tracker issue 7, case 1, valgrind part). Proves that
# Sonde's C code reads and writes only memory it owns and frees what it
# allocates:
#   - the C unit tests (test/c/*_test.c with the modules each names on its
#     "// modules:" line), built plainly (-O0 -g, no sanitizer) and run under
#     memcheck: no error of any kind, nothing definitely or indirectly lost,
#     every test passing;
#   - a short Ruby program (test/stress/valgrind/sonde_run.rb: Sonde at
#     1000 Hz over threads doing CPU work, sleeps, pipe IO and a Queue, two
#     flushes, a stop, a second run without signals) under memcheck with
#     test/stress/valgrind/ruby.supp for Ruby's own noise: no invalid read,
#     write or free whose stack has a frame of Sonde's code
#     (sonde_native*.so, sonde_loader*.so, ext/sonde/); no definitely or
#     indirectly lost block that Sonde allocated (the first frame under
#     malloc, or under Ruby's ruby_xmalloc family, is Sonde's: memory Ruby
#     allocates for itself when Sonde calls rb_define_method or rb_funcall,
#     and never frees at exit, is Ruby's); no use of an uninitialised value
#     in Sonde's code (the error's own frame, or the first one under a libc
#     call, is Sonde's; Ruby's GC scanning a stack Sonde's frames are on is
#     not).
#     Under SONDE_STRESS=full the program runs a second time without any
#     suppression and must give the same verdict: the suppressions hide
#     nothing of Sonde's.
# Skipped, saying so, when valgrind is not installed (apt-get install valgrind).
# The program runs on a copy of lib/ taken at the start, so that a rebuild
# or an edit in the tree meanwhile cannot change what is being checked.
class ValgrindTest < Minitest::Test
  VALGRIND = "valgrind"
  BUILDS = File.join(SondeStress::ROOT, "tmp", "stress", "valgrind")
  SUPPRESSIONS = File.join(__dir__, "valgrind", "ruby.supp")
  PROGRAM = File.join(__dir__, "valgrind", "sonde_run.rb")
  C_TESTS = Dir[File.join(SondeStress::ROOT, "test", "c", "*_test.c")].sort
  SONDE_FRAME = %r{sonde_(?:native|loader)|/ext/sonde/|/test/c/}
  # Frames that only pass a caller's bytes on (an uninitialised value used
  # there was the caller's).
  PASS_THROUGH = /\A(?:libc\.so|ld-linux|vgpreload_memcheck)/
  ACCESS_KINDS = /\A(?:Invalid(?:Read|Write|Free|Jump)|MismatchedFree|Overlap|SyscallParam|ClientCheck|InvalidMemPool)/
  LOST_KINDS = /\ALeak_(?:DefinitelyLost|IndirectlyLost)\z/
  UNINIT_KINDS = /\AUninit/
  # Ruby's allocator API: whoever calls these owns the memory.
  RUBY_ALLOCATORS = /\A(?:ruby_x(?:malloc|malloc2|calloc|realloc|realloc2)|rb_xmalloc_mul_add|rb_xcalloc_mul_add|rb_xrealloc_mul_add)\z/

  Frame = Struct.new(:obj, :fn, :file, :line) do
    def to_s
      "#{fn || "?"} (#{file ? "#{file}:#{line}" : File.basename(obj.to_s)})"
    end
  end
  Error = Struct.new(:kind, :what, :stacks)

  def setup
    skip "valgrind is not installed (apt-get install valgrind): memcheck runs skipped" unless
      system("#{VALGRIND} --version > /dev/null 2>&1")
    FileUtils.mkdir_p(BUILDS)
    # Binaries, lib/ copy and XML of this run only (another run of the suite
    # may share the tree); kept after a failure, for a look.
    @build = Dir.mktmpdir("run-", BUILDS)
  end

  def teardown
    FileUtils.rm_rf(@build) if @build && passed?
  end

  # valgrind --xml output, read with regexps (REXML takes long over the
  # megabytes a Ruby run writes).
  def parse_errors(xml)
    xml.scan(%r{<error>(.*?)</error>}m).map do |(body)|
      kind = body[%r{<kind>(.*?)</kind>}, 1]
      what = body[%r{<what>(.*?)</what>}m, 1] || body[%r{<xwhat>\s*<text>(.*?)</text>}m, 1]
      stacks = body.scan(%r{<stack>(.*?)</stack>}m).map do |(stack)|
        stack.scan(%r{<frame>(.*?)</frame>}m).map do |(frame)|
          Frame.new(frame[%r{<obj>(.*?)</obj>}, 1], frame[%r{<fn>(.*?)</fn>}, 1],
                    frame[%r{<file>(.*?)</file>}, 1], frame[%r{<line>(.*?)</line>}, 1])
        end
      end
      Error.new(kind, what.to_s.gsub(/\s+/, " "), stacks)
    end
  end

  def sonde_frame?(frame)
    [frame.obj, frame.file].compact.any? { |text| text.match?(SONDE_FRAME) }
  end

  def pass_through?(frame)
    File.basename(frame.obj.to_s).match?(PASS_THROUGH)
  end

  # The frame that asked for a leaked block: the first under malloc (and
  # libc), or under Ruby's own allocator functions when those were called.
  def allocating_frame(stack)
    frames = stack.drop_while { |frame| pass_through?(frame) }
    allocator = frames.index { |frame| frame.fn.to_s.match?(RUBY_ALLOCATORS) }
    frames = frames[(allocator + 1)..] if allocator && frames[0...allocator].all? { |frame| frame.fn.nil? }
    frames.first
  end

  # Sonde's fault: see the header.
  def sonde_error?(error)
    stack = error.stacks.first || []
    case error.kind
    when ACCESS_KINDS then error.stacks.flatten.any? { |frame| sonde_frame?(frame) }
    when LOST_KINDS
      owner = allocating_frame(stack)
      owner && sonde_frame?(owner)
    when UNINIT_KINDS
      first_own = stack.find { |frame| !pass_through?(frame) }
      first_own && sonde_frame?(first_own)
    else false
    end
  end

  def describe(error)
    frames = error.stacks.first.to_a.first(12).map(&:to_s).join("\n      ")
    "#{error.kind}: #{error.what}\n      #{frames}"
  end

  def compile(test)
    name = File.basename(test, ".c")
    modules = File.read(test).scan(%r{^// modules: (.*)$}).flatten.join(" ").split
    binary = File.join(@build, name)
    cc = ENV.fetch("SONDE_TEST_CC", "cc")
    argv = [cc, "-std=gnu11", "-g", "-O0", "-fno-omit-frame-pointer", "-Wall", "-Wextra",
            "-I#{SondeStress::ROOT}/ext/sonde", "-I#{SondeStress::ROOT}/test/c", "-o", binary, test,
            *modules.map { |m| File.join(SondeStress::ROOT, "ext", "sonde", m) }, "-lz"]
    _stdout, stderr, status = SondeStress.run_command({}, *argv, timeout: 300)
    assert status.success?, "#{name} does not compile:\n#{stderr}"
    binary
  end

  # env: the C tests relax their signal-count bounds under valgrind, which
  # delivers a timer's signals late and merged (see cpu_timers_test.c).
  def memcheck(argv, xml, suppressions: [], timeout: 600, env: {})
    command = [VALGRIND, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
               "--errors-for-leak-kinds=definite,indirect", "--num-callers=50", "--error-limit=no",
               "--xml=yes", "--xml-file=#{xml}", *suppressions.map { |file| "--suppressions=#{file}" }, *argv]
    started = SondeStress.now
    stdout, stderr, status = SondeStress.run_command(env, *command, timeout: timeout)
    [stdout, stderr, status, SondeStress.now - started]
  end

  def test_c_unit_tests_under_memcheck
    assert_operator C_TESTS.size, :>=, 1
    binaries = C_TESTS.map { |test| compile(test) }
    # Two at a time: the recorder test alone takes half a minute under memcheck.
    results = {}
    binaries.each_slice(2) do |pair|
      pair.map do |binary|
        Thread.new { results[binary] = memcheck([binary], "#{binary}.xml", env: { "SONDE_TEST_UNDER_VALGRIND" => "1" }) }
      end.each(&:join)
    end
    figures = {}
    binaries.each do |binary|
      name = File.basename(binary)
      stdout, stderr, status, seconds = results.fetch(binary)
      errors = parse_errors(File.read("#{binary}.xml"))
      figures[name] = { errors: errors.size, seconds: seconds.round(1), summary: (stdout + stderr)[/\w+: \d+ passed, \d+ failed/] }
      assert_empty errors.map { |error| describe(error) }, "#{name}: memcheck errors"
      assert_equal 0, status.exitstatus, "#{name} failed under valgrind:\n#{stdout}\n#{stderr}"
      assert_match(/\d+ passed, 0 failed/, stdout + stderr, name)
    end
    SondeStress.record("valgrind C unit tests", figures)
  end

  # lib/ as it is now, native build included.
  def lib_copy
    @lib_copy ||= begin
      copy = File.join(@build, "lib")
      FileUtils.cp_r(SondeStress::LIB, copy)
      copy
    end
  end

  def run_program(label, suppressions)
    xml = File.join(@build, "ruby-#{label}.xml")
    # Without RubyGems, which the program does not use: loading them took
    # about 4 of memcheck's seconds.
    stdout, stderr, status, seconds = memcheck([RbConfig.ruby, "--disable-gems", "-I#{lib_copy}", PROGRAM], xml,
                                               suppressions: suppressions)
    assert_equal 0, status.exitstatus, "the Ruby program failed under valgrind (#{label}):\n#{stdout}\n#{stderr}"
    assert_match(/\Aok samples=[1-9]\d* /, stdout, "the program must have sampled something")
    errors = parse_errors(File.read(xml))
    suppressed = File.read(xml).scan(%r{<pair>\s*<count>(\d+)</count>}m).flatten.sum(&:to_i)
    [errors, seconds, stdout.strip, suppressed]
  end

  def check_program(label, suppressions)
    errors, seconds, output, suppressed = run_program(label, suppressions)
    ours = errors.select { |error| sonde_error?(error) }
    touching = errors.count { |error| error.stacks.flatten.any? { |frame| sonde_frame?(frame) } }
    by_kind = errors.group_by(&:kind).transform_values(&:size).sort.to_h
    SondeStress.record("valgrind ruby (#{label})", seconds: seconds.round(1), output: output, errors: errors.size,
                                                   suppressed: suppressed, with_a_sonde_frame: touching,
                                                   sonde_faults: ours.size, by_kind: by_kind)
    assert_empty ours.map { |error| describe(error) }, "memcheck errors in Sonde's code (#{label})"
    errors
  end

  def test_ruby_program_under_memcheck
    skip "#{SUPPRESSIONS} is missing" unless File.exist?(SUPPRESSIONS)
    check_program("suppressed", [SUPPRESSIONS])
    return unless SondeStress.full?

    # The same verdict with no suppression at all: ruby.supp hides nothing of Sonde's.
    check_program("unsuppressed", [])
  end

  # The classifier itself, on made-up errors.
  def test_the_classifier
    sonde = Frame.new("/x/lib/sonde/native/sonde_native_3_1_2_x86_64_linux_gnu.so", "sample_wall_of_thread", "sampling_pass.c", "5")
    ruby = Frame.new("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2", nil, nil, nil)
    libc = Frame.new("/usr/lib/x86_64-linux-gnu/libc.so.6", "write", nil, nil)
    malloc = Frame.new("/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so", "malloc", nil, nil)
    xmalloc = Frame.new(ruby.obj, "ruby_xmalloc", nil, nil)
    define = Frame.new(ruby.obj, "rb_define_module_function", nil, nil)
    assert sonde_error?(Error.new("InvalidRead", "", [[ruby, ruby, sonde]]))
    assert sonde_error?(Error.new("InvalidWrite", "", [[ruby], [malloc, sonde]])), "a block Sonde allocated"
    assert sonde_error?(Error.new("Leak_DefinitelyLost", "", [[malloc, sonde, ruby]]))
    assert sonde_error?(Error.new("Leak_IndirectlyLost", "", [[malloc, ruby, xmalloc, sonde]]))
    refute sonde_error?(Error.new("Leak_DefinitelyLost", "", [[malloc, ruby, define, sonde]])), "Ruby's method table"
    refute sonde_error?(Error.new("Leak_PossiblyLost", "", [[malloc, sonde, ruby]]))
    assert sonde_error?(Error.new("UninitCondition", "", [[sonde, ruby]]))
    assert sonde_error?(Error.new("SyscallParam", "", [[libc, sonde]]))
    assert sonde_error?(Error.new("UninitValue", "", [[libc, sonde]]))
    refute sonde_error?(Error.new("UninitCondition", "", [[ruby, ruby, sonde]])), "Ruby's GC scanning a stack"
    refute sonde_error?(Error.new("InvalidWrite", "", [[ruby, ruby]]))
  end
end
