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
    #   labels:    [[name, [value, ...]], ...]  the samples' own labels (endpoint, job, ...)
    #   labelSets: [[value index per label name, -1 when absent], ...]
    #   samples:   [node, thread, state, label set, value per type, ...]
    #              state -1 when unlabelled, label set -1 for none
    class Data
      NO_PARENT = -1
      NO_STATE = -1
      NO_LABEL_SET = -1
      ABSENT = -1
      # The sample type the page opens on, best first.

      def initialize(stacks, title:)
        @stacks = stacks
        @title = title
      end

      def to_h
        nodes, samples = tree
        names, values = label_columns
        {
          "title" => @title,
          "generator" => "sonde #{Sonde::VERSION}",
          "types" => @stacks.sample_types,
          "defaultType" => default_type,
          "functions" => @stacks.functions.map { |f| [f.name, f.location] },
          "threads" => @stacks.threads.map { |t| [t.label, t.id] },
          "states" => @stacks.states,
          "labels" => names.map { |name| [name, values.fetch(name).keys] },
          "labelSets" => @label_sets.keys.map { |set| names.map { |name| set.key?(name) ? values[name][set[name]] : ABSENT } },
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

      # Label names (sorted) and, per name, its values (in order of first
      # use) => index, from the sets the samples carry.
      def label_columns
        values = Hash.new { |hash, name| hash[name] = {} }
        @label_sets.each_key do |set|
          set.each { |name, value| values[name][value] ||= values[name].size }
        end
        [values.keys.sort, values]
      end

      def label_set_index(labels)
        return NO_LABEL_SET if labels.empty?

        @label_sets[labels] ||= @label_sets.size
      end

      def tree
        @label_sets = {}
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
          samples.push(node, row.thread, row.state || NO_STATE, label_set_index(row.labels), *row.values)
        end
        [nodes, samples]
      end
    end
  end
end
