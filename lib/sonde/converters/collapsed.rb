# frozen_string_literal: true

module Sonde
  module Converters
    # Collapsed stacks, the text format of flamegraph.pl and of many tools
    # after it: one line per distinct stack, frames root first, joined by
    # ";", then a space and the stack's value:
    #
    #   requests;block in <main>;Object#handle_requests;JSON.parse 125000000
    #
    # One line per stack per thread; with thread_names: true (the default)
    # the thread's name is the first frame, so each thread is its own tower.
    # Stacks folded by a label (Stacks.new(profile, labels: "endpoint")) lead
    # with its value before that ("GET /users;puma 001;..."), "(no
    # endpoint)" for samples without it: a flame graph of towers by label.
    # Values are one sample type's, summed over states (cpu-time in ns by
    # default). Stacks with no value are left out; lines are sorted, so the
    # same profile always gives the same file.
    class Collapsed
      SEPARATOR = ";"
      # Frame names cannot hold the separator or a line break; a space is
      # fine (the value is after the last one).
      UNSAFE = /[;\r\n]/
      # A sample with no frames (a thread caught before its first Ruby frame)
      # still needs one frame name when no thread name leads the line.
      NO_FRAMES = "(no frames)"

      def initialize(stacks, type_index:, thread_names: true)
        @stacks = stacks
        @type_index = type_index
        @thread_names = thread_names
      end

      def write(io)
        lines.each { |line| io << line << "\n" }
        io
      end

      def lines
        totals = Hash.new(0)
        @stacks.rows.each do |row|
          value = row.values[@type_index]
          next if value.zero?

          totals[stack_text(row)] += value
        end
        totals.sort.map { |stack, value| "#{stack} #{value}" }
      end

      private

      def stack_text(row)
        names = row.frames.map { |function| clean(@stacks.functions[function].name) }
        names.unshift(clean(@stacks.threads[row.thread].label)) if @thread_names
        if (label = @stacks.label_name)
          names.unshift(clean(row.labels.fetch(label, "(no #{label})")))
        end
        names = [NO_FRAMES] if names.empty?
        names.join(SEPARATOR)
      end

      def clean(name)
        name.empty? ? "?" : name.gsub(UNSAFE, "_")
      end
    end
  end
end
