# frozen_string_literal: true

# pf2's raw profile (Marshal'd Pf2.stop result, what `pf2 report` reads):
# samples [{ stack: [location index, ...] leaf first, ruby_thread_id, ... }],
# locations [{ function_index, lineno }], functions [{ name, ... }]. In CPU
# time mode each sample is one interval of its thread's own CPU clock, so
# every sample weighs 1.
module SondeBench
  module Readers
    module Pf2Reader
      module_function

      def read(path)
        profile = Marshal.load(File.binread(path))
        locations = profile.fetch(:locations)
        functions = profile.fetch(:functions)
        samples = profile.fetch(:samples).map do |sample|
          frames = sample.fetch(:stack).map do |index|
            location = locations.fetch(index)
            [functions.fetch(location.fetch(:function_index)).fetch(:name), location[:lineno]]
          end
          Sample.new(frames, 1)
        end
        View.new(samples, "samples (CPU intervals)")
      end
    end
  end
end
