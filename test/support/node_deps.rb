# frozen_string_literal: true

require "base64"
require "json"
require "open3"
require "tmpdir"

# Headless Chromium for the browser tests, driven by test/support/browser.mjs
# through puppeteer-core. script/test-node-deps installs puppeteer-core and
# speedscope (pinned) into tmp/node. Tests skip, with the reason, only when
# Chromium or Node is not installed on this machine, or when the run says
# they ran on another Ruby (SONDE_BROWSER_TESTS_RAN_ON, below); a failed
# npm install fails them.
module NodeDeps
  ROOT = File.expand_path("../..", __dir__)
  SCRIPT = File.join(ROOT, "test", "support", "browser.mjs")
  CHROMIUM_NAMES = %w[chromium chromium-browser google-chrome].freeze
  SPEEDSCOPE_INDEX = "speedscope/dist/release/index.html"
  JOB_TIMEOUT = 90

  module_function

  def chromium
    return ENV["SONDE_CHROMIUM"] if ENV["SONDE_CHROMIUM"]

    CHROMIUM_NAMES.each do |name|
      path = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |dir| File.join(dir, name) }
                .find { |candidate| File.executable?(candidate) }
      return path if path
    end
    nil
  end

  # .ci/run runs the tests that load Sonde's pages and files in Chromium or
  # Node.js on one Ruby (the host's) and sets SONDE_BROWSER_TESTS_RAN_ON to
  # its version in the legs of the others: what they load is made from
  # fixture profiles by Ruby code whose output the other tests check on
  # every Ruby, and they cost 30-40 s of each leg.
  def skip_if_they_ran_on_another_ruby(test)
    ran_on = ENV.fetch("SONDE_BROWSER_TESTS_RAN_ON", "")
    return if ran_on.empty? || ran_on == RUBY_VERSION

    test.skip "the Chromium and Node.js tests ran on Ruby #{ran_on} in this run (SONDE_BROWSER_TESTS_RAN_ON)"
  end

  # A Browser, or skips the test with what is missing and how to get it.
  def browser_or_skip(test)
    skip_if_they_ran_on_another_ruby(test)
    path = chromium
    test.skip "Chromium is not installed (apt-get install chromium; script/setup installs it)" unless path
    test.skip "Node.js is not installed (apt-get install nodejs npm)" unless system("node --version > /dev/null 2>&1")
    @node_modules ||= install
    Browser.new(path, @node_modules)
  end

  def install
    out, err, status = Open3.capture3(File.join(ROOT, "script", "test-node-deps"))
    raise "script/test-node-deps failed:\n#{out}#{err}" unless status.success?

    File.join(ROOT, out.lines.last.strip, "node_modules")
  end

  # One Chromium run per job, each with a fresh profile directory.
  class Browser
    def initialize(chromium, node_modules)
      @chromium = chromium
      @node_modules = node_modules
    end

    def flamegraph(html, **job)
      run(script: "flamegraph", html: File.expand_path(html), **job)
    end

    # The flame graph page where the browser has no DecompressionStream.
    def without_decompression(html)
      run(script: "withoutDecompression", html: File.expand_path(html))
    end

    # The timeline of the flame graph page (browser.mjs's timeline job).
    def timeline(html, **job)
      run(script: "timeline", html: File.expand_path(html), **job)
    end

    # Opens speedscope's app with path loaded as its CLI does: a script
    # calling speedscope.loadFileFromBase64, named in #localProfilePath.
    def speedscope(path, dir:, **job)
      loader = File.join(dir, "#{File.basename(path)}.loader.js")
      File.write(loader, "speedscope.loadFileFromBase64(#{JSON.generate(File.basename(path))}, " \
                         "#{JSON.generate(Base64.strict_encode64(File.binread(path)))})\n")
      run(script: "speedscope", index: File.join(@node_modules, SPEEDSCOPE_INDEX), loader: loader, **job)
    end

    private

    def run(**job)
      Dir.mktmpdir("sonde-chromium") do |profile_dir|
        input = JSON.generate(job.merge(chromium: @chromium, profileDir: profile_dir))
        out, err, status = Open3.capture3({ "SONDE_NODE_MODULES" => @node_modules }, "timeout", JOB_TIMEOUT.to_s,
                                          "node", SCRIPT, stdin_data: input)
        result = JSON.parse(out.lines.last || "{}")
        raise "browser job failed (#{status.inspect}): #{result["failure"] || err}" unless status.success?

        result
      end
    end
  end
end
