# frozen_string_literal: true

require_relative "support/test_helper"
require "fileutils"
require "sonde/flamegraph"

# Every writer of profile bytes writes them as bytes, whatever
# Encoding.default_internal (Rails sets UTF-8) and default_external are
# (issue 22, defect 1). One child per odd external encoding runs each
# writer with `-E EXTERNAL:UTF-8` (the CLI commands and the recorded
# program get it through RUBYOPT); this process then reads what they wrote:
# each pprof decodes, the collapsed text and the page are valid UTF-8 with
# the program's non-ASCII method name in them, the speedscope file parses.
class BinaryOutputTest < Minitest::Test
  include SondeTestHelper

  # Windows-1252 has no "→" (writing it raises) and no byte 0x81 (reading
  # UTF-8 as it can raise); ISO-8859-5 reads any byte, as Cyrillic.
  EXTERNALS = %w[Windows-1252 ISO-8859-5].freeze
  METHOD = "caf\u00e9_\u2192_work"

  PROGRAM = <<~RUBY
    # encoding: utf-8
    #{BURN_SCRIPT}
    def #{METHOD}
      burn(0.3)
    end
    #{METHOD}
  RUBY

  CHILD = <<~RUBY
    require "sonde"
    require "sonde/cli"
    require "sonde/flamegraph"
    dir, program = ARGV
    abort "internal is \#{Encoding.default_internal}" unless Encoding.default_internal == Encoding::UTF_8
    #{BURN_SCRIPT}
    run = ->(*argv) { code = Sonde::CLI.run(argv); abort "sonde \#{argv.first} exited \#{code}" unless code.zero? }

    Sonde.start(continuous: true, export: "dir:\#{dir}/exported", every: 60, service: "enc")
    burn(0.1)
    Sonde.stop
    Sonde.profile(out: "\#{dir}/block.pprof") { burn(0.1) }.write("\#{dir}/write.pprof")
    run.call("record", "-o", "\#{dir}/record.pprof", "--", RbConfig.ruby, program)
    run.call("convert", "\#{dir}/record.pprof", "--to", "collapsed", "-o", "\#{dir}/collapsed.txt")
    run.call("convert", "\#{dir}/record.pprof", "--to", "speedscope", "-o", "\#{dir}/speedscope.json")
    run.call("flamegraph", "\#{dir}/record.pprof", "-o", "\#{dir}/cli.html")
    Sonde::Flamegraph.write_html("\#{dir}/record.pprof", "\#{dir}/api.html")
  RUBY

  def setup
    @dir = Dir.mktmpdir("sonde-binary")
    @program = File.join(@dir, "program.rb")
    File.write(@program, PROGRAM)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  EXTERNALS.each do |external|
    define_method("test_every_writer_writes_bytes_under_default_external_#{external.tr("-", "_")}") do
      env = { "RUBYOPT" => "-E#{external}:UTF-8" }
      _out, err, status = run_ruby("-e", CHILD, @dir, @program, env: env)
      assert status.success?, "the child failed under #{external}:\n#{err}"
      refute_match(/exporter|failed|Error/, err, "a writer complained")

      exported = Dir.glob(File.join(@dir, "exported", "*.pprof"))
      assert_equal 1, exported.size, "the dir: exporter wrote the run's one period"
      [*exported, "block.pprof", "write.pprof"].each do |file|
        Sonde::Pprof.read(File.expand_path(file, @dir)) # raises unless it is a pprof
      end
      recorded = Sonde::Pprof.read(File.join(@dir, "record.pprof"))
      assert(recorded.functions.each_value.any? { |function| function.name.include?(METHOD) },
             "the recorded profile names #{METHOD}")

      collapsed = utf8(File.join(@dir, "collapsed.txt"))
      assert_includes collapsed, METHOD
      speedscope = JSON.parse(utf8(File.join(@dir, "speedscope.json")))
      assert(speedscope.fetch("shared").fetch("frames").any? { |frame| frame.fetch("name").include?(METHOD) })
      # The executable's standard output carries the same bytes.
      record = File.join(@dir, "record.pprof")
      out, err, status = run_sonde("convert", record, "--to", "collapsed", env: env)
      assert status.success?, err
      assert_equal collapsed, out.b.force_encoding(Encoding::UTF_8)
      out, err, status = run_sonde("report", record, env: env)
      assert status.success?, err
      assert_includes out.b.force_encoding(Encoding::UTF_8), METHOD
      %w[cli.html api.html].each do |page|
        html = utf8(File.join(@dir, page))
        # The profile is deflated inside the page; the page's own text is UTF-8 too.
        functions = Sonde::Flamegraph.embedded_data(html).fetch("functions").map(&:first)
        assert(functions.any? { |name| name.include?(METHOD) }, "#{page} holds the method's name")
        assert_includes html, "\u00b5s", "#{page}'s script keeps its µ"
        assert html.rstrip.end_with?("</html>"), "#{page} is whole"
      end
    end
  end

  private

  # The file's bytes as UTF-8, which they must be.
  def utf8(path)
    text = File.binread(path).force_encoding(Encoding::UTF_8)
    assert text.valid_encoding?, "#{File.basename(path)} is not valid UTF-8"
    text
  end
end
