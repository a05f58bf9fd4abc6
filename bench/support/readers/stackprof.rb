# frozen_string_literal: true

# StackProf's results (what StackProf.run(out:, raw: true) writes: a
# Marshal'd Hash), read through StackProf's own Ruby API (StackProf::Report)
# where it has the data. raw is [frame count, frame ids (root first)...,
# repeat count]*; frames[id] has :name, and :lines { line => [total, self] }
# (self samples by line; the raw stacks carry no lines). Each sample is one
# tick of StackProf's timer (process CPU time in cpu mode, wall time in wall
# mode), recorded for the thread that ran the postponed job.
module SondeBench
  module Readers
    module StackProfReader
      module_function

      def read(path)
        require "stackprof"
        data = StackProf::Report.new(Marshal.load(File.binread(path))).data
        frames = data.fetch(:frames)
        View.new(samples_of(data.fetch(:raw), frames), "samples", self_lines: lambda { |pattern|
          self_lines(frames, pattern)
        })
      end

      def samples_of(raw, frames)
        samples = []
        index = 0
        while index < raw.size
          count = raw[index]
          stack = raw[(index + 1)..(index + count)].reverse.map { |id| [frames.fetch(id)[:name], nil] }
          samples << Sample.new(stack, raw[index + count + 1])
          index += count + 2
        end
        samples
      end

      def self_lines(frames, pattern)
        lines = Hash.new(0)
        frames.each_value do |frame|
          next unless frame[:name].match?(pattern)

          (frame[:lines] || {}).each { |line, counts| lines[line] += counts.is_a?(Array) ? counts[1] : counts }
        end
        lines
      end
    end
  end
end
