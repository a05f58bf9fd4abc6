# frozen_string_literal: true

require_relative "lib/sonde/version"

Gem::Specification.new do |spec|
  spec.name = "sonde"
  spec.version = Sonde::VERSION
  spec.summary = "Sampling CPU and wall-time profiler for Ruby, every thread, pprof output"
  spec.description = "Sonde samples every Ruby thread at a fixed rate (stacks, per-thread CPU " \
                     "time, wall time, thread state) with a C core cheap enough to leave on, " \
                     "and writes pprof profiles that go tool pprof, speedscope, Pyroscope and Datadog read."
  spec.authors = ["Sonde developers"]
  spec.license = "MIT"
  spec.required_ruby_version = ">= 3.1"
  spec.files = Dir["lib/**/*.rb", "lib/sonde/assets/*", "lib/sonde/flamegraph/*.{html,js,css}", "ext/**/*.{c,h,rb}", "exe/*", "README.md", "LICENSE", "docs/*.md"]
  spec.bindir = "exe"
  spec.executables = ["sonde"]
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/sonde_loader/extconf.rb", "ext/sonde/extconf.rb"]
end
