# frozen_string_literal: true

require "sonde/converters/stacks"

module Sonde
  module Flamegraph
    # The profile as the page's script reads it: compact, flat arrays of
    # numbers, because a 60 s, 8-thread profile must parse and render in
    # well under a second. Stacks are stored once, as a tree of nodes
    # (each a parent node and a function), and the samples point at nodes:
    #
    #   functions: [[name, "file:line"], ...]
    #   threads:   [[label, id], ...]          states: ["running", ...]
    #   nodes:     [parent, function, parent, function, ...]   parent -1 at the root;
    #              a parent always comes before its children
    #   samples:   [node, thread, state, value per type, ...]  state -1 when unlabelled
    class Data
      NO_PARENT = -1
      NO_STATE = -1
      # The sample type the page opens on, best first.

      def initialize(stacks, title:)
        @stacks = stacks
        @title = title
      end

      def to_h
        nodes, samples = tree
        {
          "title" => @title,
          "generator" => "sonde #{Sonde::VERSION}",
          "types" => @stacks.sample_types,
          "defaultType" => default_type,
          "functions" => @stacks.functions.map { |f| [f.name, f.location] },
          "threads" => @stacks.threads.map { |t| [t.label, t.id] },
          "states" => @stacks.states,
          "nodes" => nodes,
          "samples" => samples
        }
      end

      private

      def default_type
        [ProfileNames.sample_type(:cpu_time), ProfileNames.sample_type(:wall_time)].each do |name|
          index = @stacks.type_index(name)
          return index if index
        end
        0
      end

      def tree
        node_ids = {}
        nodes = []
        samples = []
        @stacks.rows.each do |row|
          next if row.values.all?(&:zero?)

          node = row.frames.reduce(NO_PARENT) do |parent, function|
            node_ids[[parent, function]] ||= begin
              nodes.push(parent, function)
              nodes.size / 2 - 1
            end
          end
          samples.push(node, row.thread, row.state || NO_STATE, *row.values)
        end
        [nodes, samples]
      end
    end
  end
end
