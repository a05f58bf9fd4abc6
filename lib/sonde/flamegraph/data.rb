# frozen_string_literal: true

require "sonde/converters/stacks"
require "sonde/quantities"
require "sonde/views"
require "sonde/flamegraph/timeline"

module Sonde
  module Flamegraph
    # The profile as the page's script reads it: compact, flat arrays of
    # numbers, because a 60 s, 8-thread profile must parse and render in
    # well under a second. Stacks are stored once, as a tree of nodes
    # (each a parent node and a function), and the samples point at nodes:
    #
    #   types:     [[name, unit], ...]  formats: ["duration"|"bytes"|"count", ...]
    #   titles:    [view title or nil, ...]  (one of each per sample type)
    #   functions: [[name, "file:line"], ...]
    #   threads:   [[label, id], ...]          states: ["running", ...]
    #   nodes:     [back, function, back, function, ...]   node n's parent is
    #              n - back (back is n + 1 at the root: parent -1); a parent
    #              always comes before its children, and most are a few
    #              nodes back, so the page is about half the size it was
    #              with the parents' own numbers (and parses that much faster)
    #   labels:    [[name, [value, ...]], ...]  the samples' own labels (endpoint, job, ...)
    #   labelSets: [[value index per label name, -1 when absent], ...]
    #   samples:   [node, thread, state, label set, value per type, ...]
    #              state -1 when unlabelled, label set -1 for none
    #   timeline:  the timed samples, per thread (see Timeline), or nil
    class Data
      NO_PARENT = -1
      NO_STATE = -1
      NO_LABEL_SET = -1
      ABSENT = -1

      # profile: what stacks were folded from, for its timed samples (nil: no timeline).
      def initialize(stacks, title:, profile: nil)
        @stacks = stacks
        @title = title
        @profile = profile
      end

      def to_h
        nodes, samples = tree
        names, values = label_columns
        {
          "title" => @title,
          "generator" => "sonde #{Sonde::VERSION}",
          "types" => @stacks.sample_types,
          "formats" => @stacks.sample_types.map { |_type, unit| Quantities.kind(unit).to_s },
          "titles" => @stacks.sample_types.map { |type, _unit| titles[type] },
          "defaultType" => default_type,
          "functions" => @stacks.functions.map { |f| [f.name, f.location] },
          "threads" => @stacks.threads.map { |t| [t.label, thread_id_shown(t)] },
          "states" => @stacks.states,
          "labels" => names.map { |name| [name, values.fetch(name).keys] },
          "labelSets" => @label_sets.keys.map { |set| names.map { |name| set.key?(name) ? values[name][set[name]] : ABSENT } },
          "nodes" => nodes,
          "samples" => samples,
          "timeline" => @profile && Timeline.new(@profile, @stacks, @sample_of_row).to_h
        }
      end

      private

      # A thread's id as the page shows it beside its name: none for a
      # thread entry that stands for many (Sonde's "(ended threads)", id 0:
      # no Linux thread has it), which read "(ended threads) (0)".
      def thread_id_shown(thread)
        thread.id.is_a?(Integer) && thread.id <= 0 ? nil : thread.id
      end

      # The page opens on the first of Sonde's views the profile has (CPU
      # time first), else on its first sample type.
      def default_type
        view = Views.present(@stacks).first
        view ? @stacks.type_index(view.type) : 0
      end

      # The sample types of Sonde's views, by name, with their titles: the
      # menu names them ("Live heap (heap-live-size)").
      def titles
        @titles ||= Views.all.values.to_h { |view| [view.type, view.title] }
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
        width = 4 + @stacks.sample_types.size
        @sample_of_row = []
        @stacks.rows.each do |row|
          @sample_of_row << nil
          next if row.values.all?(&:zero?)

          @sample_of_row[-1] = samples.size / width
          node = row.frames.reduce(NO_PARENT) do |parent, function|
            node_ids[[parent, function]] ||= begin
              id = nodes.size / 2
              nodes.push(id - parent, function)
              id
            end
          end
          samples.push(node, row.thread, row.state || NO_STATE, label_set_index(row.labels), *row.values)
        end
        [nodes, samples]
      end
    end
  end
end
