# frozen_string_literal: true

require "minitest/autorun"
require "minitest/mock"
require "rbconfig"
require "tmpdir"
require "fileutils"
require "open3"
require "sonde/native"

# The loader refuses libraries it must not run, without crashing the process.
# Each case is a small, deliberately wrong shared library built here with the
# system C compiler: one per way a core can be unusable, and one good fake
# core. Nothing here needs the real core (ext/sonde) to be built.
class LoaderTest < Minitest::Test
  SOURCE_ROOT = File.expand_path("..", __dir__)
  LOADER_SOURCE = File.join(SOURCE_ROOT, "ext/sonde_loader/sonde_loader.c")

  RUBY_INCLUDES = ["-I#{RbConfig::CONFIG["rubyhdrdir"]}", "-I#{RbConfig::CONFIG["rubyarchhdrdir"]}"].freeze
  LIBRUBY = ["-L#{RbConfig::CONFIG["libdir"]}", *RbConfig::CONFIG["LIBRUBYARG_SHARED"].split].freeze

  # The marker returns the address of an object of its own instead of
  # rb_cObject: what a core linked against another libruby would report.
  # Its init defines a constant, so a call to it would show.
  WRONG_RUBY_SOURCE = <<~C
    #include <ruby.h>
    static const int another_rubys_object;
    const void *sonde_native_libruby_marker(void) { return &another_rubys_object; }
    void sonde_native_init(VALUE module) { rb_define_const(module, "INIT_RAN", Qtrue); }
  C

  NO_MARKER_SOURCE = <<~C
    #include <ruby.h>
    void sonde_native_init(VALUE module) { rb_define_const(module, "INIT_RAN", Qtrue); }
  C

  NO_INIT_SOURCE = <<~C
    #include <ruby.h>
    const void *sonde_native_libruby_marker(void) { return &rb_cObject; }
  C

  GOOD_SOURCE = <<~C
    #include <ruby.h>
    static VALUE answer(VALUE self) { (void)self; return INT2FIX(42); }
    const void *sonde_native_libruby_marker(void) { return &rb_cObject; }
    void sonde_native_init(VALUE module) { rb_define_module_function(module, "answer", answer, 0); }
  C

  class << self
    # Built once for the whole class: compiling is most of this test's time.
    def fixtures
      @fixtures ||= build_fixtures
    end

    private

    def build_fixtures
      dir = Dir.mktmpdir("sonde-loader-test")
      Minitest.after_run { FileUtils.remove_entry(dir) }
      require_fresh_loader(dir)
      not_elf = File.join(dir, "not_elf.so")
      File.write(not_elf, "This is a text file, not a shared object.\n")
      {
        dir: dir,
        not_elf: not_elf,
        wrong_ruby: compile(dir, "wrong_ruby", WRONG_RUBY_SOURCE),
        no_marker: compile(dir, "no_marker", NO_MARKER_SOURCE),
        no_init: compile(dir, "no_init", NO_INIT_SOURCE),
        good: compile(dir, "good", GOOD_SOURCE)
      }
    end

    def compile(dir, name, source)
      c_file = File.join(dir, "#{name}.c")
      so_file = File.join(dir, "#{name}.so")
      File.write(c_file, source)
      run!(ENV.fetch("CC", "cc"), "-shared", "-fPIC", *RUBY_INCLUDES, "-o", so_file, c_file, *LIBRUBY)
      so_file
    end

    # Uses the loader in lib/sonde/native when it is at least as new as its
    # source; otherwise builds one from the source in dir, so the test always
    # exercises the code in the tree without writing into it.
    def require_fresh_loader(dir)
      return if defined?(Sonde::NativeLoader)

      installed = Sonde::Platform.loader_extension_path
      if File.file?(installed) && File.mtime(installed) >= File.mtime(LOADER_SOURCE)
        require installed
        return
      end

      build = File.join(dir, "loader")
      FileUtils.mkdir_p(build)
      extconf = File.join(SOURCE_ROOT, "ext/sonde_loader/extconf.rb")
      Dir.chdir(build) do
        run!(RbConfig.ruby, extconf, "--srcdir=#{File.dirname(extconf)}")
        run!("make", "V=0")
      end
      require File.join(build, "#{Sonde::Platform.loader_extension_name}.#{RbConfig::CONFIG["DLEXT"]}")
    end

    def run!(*command)
      output, status = Open3.capture2e(*command)
      raise "#{command.join(" ")} failed:\n#{output}" unless status.success?
    end
  end

  # Builds the fixtures, and brings in the loader, before any test body runs.
  def setup
    self.class.fixtures
  end

  def fixture(name)
    self.class.fixtures.fetch(name)
  end

  def load_error_for(path, into: Module.new)
    error = assert_raises(Sonde::LoadError) { Sonde::Native.load_library(path, into: into) }
    assert_includes error.message, path, "the message names the file"
    error
  end

  def test_missing_file_is_a_dlopen_failure_with_dlerrors_text
    path = File.join(fixture(:dir), "does_not_exist.so")
    error = load_error_for(path)
    assert_equal :dlopen_failed, error.reason
    assert_includes error.message, "cannot open shared object file"
    assert_kind_of Sonde::UnsupportedError, error
  end

  def test_a_file_that_is_not_a_shared_object_is_a_dlopen_failure
    error = load_error_for(fixture(:not_elf))
    assert_equal :dlopen_failed, error.reason
  end

  def test_a_core_built_for_another_ruby_is_refused_before_its_init_runs
    mod = Module.new
    error = load_error_for(fixture(:wrong_ruby), into: mod)
    assert_equal :wrong_ruby, error.reason
    assert_match(/different Ruby/, error.message)
    assert_match(/libruby/, error.message, "the message names the libruby this Ruby uses")
    refute mod.const_defined?(:INIT_RAN, false), "init of a core built for another Ruby must not run"
  end

  def test_a_library_without_the_marker_is_refused_as_the_wrong_ruby
    mod = Module.new
    error = load_error_for(fixture(:no_marker), into: mod)
    assert_equal :wrong_ruby, error.reason
    assert_includes error.message, "sonde_native_libruby_marker"
    refute mod.const_defined?(:INIT_RAN, false)
  end

  def test_a_library_with_the_right_marker_but_no_init_is_missing_init
    error = load_error_for(fixture(:no_init))
    assert_equal :missing_init, error.reason
    assert_includes error.message, "sonde_native_init"
  end

  def test_a_good_core_is_loaded_and_its_init_defines_methods_on_the_module_given
    mod = Module.new
    assert_nil Sonde::Native.load_library(fixture(:good), into: mod)
    assert_equal 42, mod.answer
    refute_respond_to Sonde::Native, :answer, "init got the module passed, not Sonde::Native"
  end

  def test_the_raw_loader_reports_failures_as_data
    reason, message = Sonde::NativeLoader.load_library(fixture(:not_elf), Module.new)
    assert_equal :dlopen_failed, reason
    assert_includes message, fixture(:not_elf)
  end

  def test_the_raw_loader_rejects_a_non_module_before_opening_anything
    assert_raises(TypeError) { Sonde::NativeLoader.load_library(fixture(:good), Object.new) }
  end

  def test_load_on_an_unsupported_platform_records_the_reason_and_returns_false
    with_fresh_load_outcome do
      reason = "Sonde does not run here (forced by a test)"
      loaded = Sonde::Platform.stub(:unsupported_reason, reason) { Sonde::Native.load }
      refute loaded
      refute_predicate Sonde::Native, :loaded?
      assert_instance_of Sonde::UnsupportedError, Sonde::Native.load_error
      assert_equal reason, Sonde::Native.load_error.message
      assert_raises(Sonde::UnsupportedError) { Sonde::Native.load! }
    end
  end

  def test_load_with_the_core_not_built_says_how_to_build_it
    with_fresh_load_outcome do
      missing = File.join(fixture(:dir), "not_built.so")
      Sonde::Platform.stub(:unsupported_reason, nil) do
        Sonde::Platform.stub(:native_extension_path, missing) do
          refute Sonde::Native.load
          assert_same false, Sonde::Native.load, "the outcome is memoized"
        end
      end
      error = Sonde::Native.load_error
      assert_kind_of Sonde::LoadError, error
      assert_includes error.message, missing
      assert_includes error.message, "rake compile"
    end
  end

  def test_requiring_sonde_native_does_not_raise_even_when_unsupported
    script = <<~RUBY
      require "sonde/platform"
      module Sonde::Platform
        def self.unsupported_reason = "forced by a test"
      end
      require "sonde/native"
      print Sonde::Native.load, " ", Sonde::Native.load_error.message
    RUBY
    output, status = Open3.capture2e(RbConfig.ruby, "-I#{File.join(SOURCE_ROOT, "lib")}", "-e", script)
    assert status.success?, output
    assert_equal "false forced by a test", output
  end

  private

  # A loaded core stays loaded for the life of the process, so these tests
  # only make sense before anything has loaded the real one.
  def with_fresh_load_outcome
    skip "the real native core is already loaded in this process" if Sonde::Native.loaded?
    Sonde::Native.forget_failed_load
    yield
  ensure
    Sonde::Native.forget_failed_load
  end
end
