# frozen_string_literal: true

# Vernier's Firefox-profiler JSON (the "processed profile" format the
# Firefox profiler documents). Per thread: samples.stack (stack index) and
# samples.weight (Vernier merges identical consecutive samples into one with
# a weight); stackTable.prefix/frame/category; frameTable.func/line;
# funcTable.name (an index into stringArray). Vernier samples in wall time
# and files the samples of a thread that was not running under the
# categories "Idle" (off the GVL: sleeping, IO) and "Stalled" (waiting for
# the GVL), so a sample counts as CPU when its stack's category is neither.
require "json"

module SondeBench
  module Readers
    module VernierReader
      NOT_RUNNING = %w[Idle Stalled].freeze

      module_function

      def read(path)
        profile = JSON.parse(File.read(path))
        idle = profile.fetch("meta").fetch("categories").each_index.select do |index|
          NOT_RUNNING.include?(profile["meta"]["categories"][index]["name"])
        end
        View.new(profile.fetch("threads").flat_map { |thread| samples_of(thread, idle) }, "samples while running")
      end

      def samples_of(thread, idle)
        stacks = thread.fetch("stackTable")
        frames = thread.fetch("frameTable")
        names = thread.fetch("funcTable").fetch("name").map { |index| thread.fetch("stringArray")[index] }
        samples = thread.fetch("samples")
        samples.fetch("stack").zip(samples.fetch("weight")).filter_map do |stack, weight|
          next if stack.nil? || idle.include?(stacks.fetch("category")[stack])

          Sample.new(stack_of(stack, stacks, frames, names), weight || 1)
        end
      end

      def stack_of(stack, stacks, frames, names)
        result = []
        while stack
          frame = stacks.fetch("frame")[stack]
          result << [names[frames.fetch("func")[frame]], frames.fetch("line")[frame]]
          stack = stacks.fetch("prefix")[stack]
        end
        result.freeze
      end
    end
  end
end
