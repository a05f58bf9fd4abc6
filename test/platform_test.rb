# frozen_string_literal: true

require_relative "support/test_helper"

# Where Sonde cannot run, installing still works and the API says why.
class PlatformTest < Minitest::Test
  include SondeTestHelper

  FORCE_UNSUPPORTED = <<~RUBY
    require "sonde/platform"
    module Sonde::Platform
      def self.unsupported_reason = "Sonde supports Ruby 3.1 and 3.2; this is Ruby 9.9 (forced by a test)"
    end
  RUBY

  def test_built_file_names_carry_the_ruby_version_and_platform
    suffix = Sonde::Platform.build_suffix
    assert_includes suffix, RUBY_VERSION.tr(".", "_")
    assert_includes suffix, RUBY_PLATFORM.gsub(/[^A-Za-z0-9]/, "_")
    assert_match(/sonde_native_#{suffix}\.so\z/, Sonde::Platform.native_extension_path)
    assert File.exist?(Sonde::Platform.native_extension_path), "rake compile puts the core there"
  end

  def test_start_on_an_unsupported_ruby_raises_unsupported_error_with_the_reason
    stdout, stderr, status = run_ruby("-e", FORCE_UNSUPPORTED + <<~RUBY)
      require "sonde"
      puts Sonde.supported?
      puts Sonde.unsupported_reason
      begin
        Sonde.start
      rescue Sonde::UnsupportedError => e
        puts "raised \#{e.class}: \#{e.message}"
      end
    RUBY
    assert_succeeded status, stderr
    lines = stdout.lines.map(&:chomp)
    assert_equal "false", lines[0]
    assert_match(/this is Ruby 9\.9/, lines[1])
    assert_match(/raised Sonde::UnsupportedError: .*this is Ruby 9\.9/, lines[2])
  end

  def test_extconf_on_an_unsupported_ruby_still_lets_the_install_succeed
    Dir.mktmpdir do |dir|
      extconf = File.join(ROOT, "ext", "sonde", "extconf.rb")
      _stdout, stderr, status = run_ruby("-e", FORCE_UNSUPPORTED + "load #{extconf.inspect}", chdir: dir)
      assert_succeeded status, stderr
      assert_match(/native core is not built: .*Ruby 9\.9/, stderr)
      make_output, make_status = Open3.capture2e("make", "all", "install", chdir: dir)
      assert make_status.success?, make_output
      assert_empty Dir[File.join(dir, "*.so")]
    end
  end

  def test_linux_and_cruby_are_supported_here
    assert_nil Sonde::Platform.unsupported_reason
    expected = RUBY_VERSION >= "3.3" ? :public_api : :mjit_header
    assert_equal expected, Sonde::Platform.backend
  end

  # extconf.rb picks the backend by the functions the headers declare; the
  # core it built must be the one Platform.backend names.
  def test_the_built_backend_is_the_one_platform_names
    makefile = File.join(ROOT, "tmp", "build", Sonde::Platform.build_suffix, "sonde", "Makefile")
    skip "no build in tmp/build (the core came from elsewhere)" unless File.exist?(makefile)
    built, other = Sonde::Platform.backend == :public_api ? %w[vm_public.o vm_ruby31.o] : %w[vm_ruby31.o vm_public.o]
    objects = File.read(makefile)[/^OBJS = .*$/].split
    assert_includes objects, built
    refute_includes objects, other
  end
end
