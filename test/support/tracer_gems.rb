# frozen_string_literal: true

require "fileutils"
require "open3"
require "rbconfig"

# The tracers the trace-context tests run under, installed into a folder of
# the tests' own per Ruby (tmp/gems/ruby-<major.minor>, never the
# system's gems) from .gem files in tmp/gems/cache, which script/setup
# downloads on the host (the 3.3 and 3.4 chroots cannot reach the
# registry). Children load them with GEM_PATH set to that folder.
module TracerGems
  ROOT = File.expand_path("../..", __dir__)
  CACHE = File.join(ROOT, "tmp", "gems", "cache")
  # OpenTelemetry's API, pure Ruby and dependency-free: 1.6.0 is the last
  # one whose gemspec takes Ruby 3.1 (later ones ask for 3.3).
  OPENTELEMETRY_API = ["opentelemetry-api", "1.6.0"].freeze
  # The datadog gem, installed by `rake bench:peers` for the benchmark
  # (with its native parts); the tests read it from there when present.
  PEERS = File.join(ROOT, "tmp", "peers")

  module_function

  def series
    RUBY_VERSION.split(".").first(2).join(".")
  end

  # The folder holding opentelemetry-api for this Ruby, installing it from
  # the cache on first use; nil when the cache lacks it (with why in @why).
  def opentelemetry_gem_path
    name, version = OPENTELEMETRY_API
    dir = File.join(ROOT, "tmp", "gems", "ruby-#{series}")
    return dir if Dir.exist?(File.join(dir, "gems", "#{name}-#{version}"))

    file = File.join(CACHE, "#{name}-#{version}.gem")
    return nil unless File.exist?(file)

    FileUtils.mkdir_p(dir)
    _out, _err, status = Open3.capture3({ "GEM_HOME" => dir, "GEM_PATH" => dir }, RbConfig.ruby, "-S", "gem",
                                        "install", "--local", "--no-document", "--install-dir", dir, file)
    status.success? ? dir : nil
  end

  def opentelemetry_missing_reason
    "#{OPENTELEMETRY_API.join(" ")} is not in #{CACHE} (script/setup downloads it)"
  end

  # The bench's folder with the datadog gem for this Ruby, or nil.
  def datadog_gem_path
    dir = File.join(PEERS, "ruby-#{series}")
    Dir.glob(File.join(dir, "gems", "datadog-2.*")).empty? ? nil : dir
  end
end
