# frozen_string_literal: true

module Sonde
  class Report
    # `sonde report --function NAME`: who called one function and what it
    # called, with the time (or allocations, or live heap) that went through
    # each, like pprof's -peek.
    # In each sample, every distinct caller (the frame just outside an
    # occurrence of the function) and every distinct callee (the frame just
    # inside) gets the sample's value once; a recursive call is neither.
    class FunctionView
      ROOT = "(root: no caller)"
      HEADER = ["total", "total%", "function", "location"].freeze
      NUMERIC_COLUMNS = 2

      def initialize(profile, frames, targets, kinds)
        @profile = profile
        @frames = frames
        @targets = targets
        @kinds = kinds
      end

      def render(io, samples)
        io.puts heading
        @kinds.each do |kind|
          io.puts
          render_kind(io, kind, samples)
        end
      end

      private

      def heading
        groups = @targets.map { |group| @frames.groups[group] }
        locations = groups.map(&:location).reject(&:empty?).uniq
        "Function #{groups.first.name}#{locations.empty? ? "" : " (#{locations.join(", ")})"}"
      end

      def render_kind(io, kind, samples)
        values = Report.recorded(io, @profile, kind)
        return unless values

        peek = Peek.new(@frames, @targets, samples, values.index)
        if peek.total.zero?
          io.puts "#{kind.title}: none recorded for this function"
          return
        end

        io.puts "#{kind.title}: total #{values.show(peek.total)} (#{Report.percent(peek.total, peek.all)}), " \
                "self #{values.show(peek.self_value)} (#{Report.percent(peek.self_value, peek.all)}) " \
                "of #{values.show(peek.all)}"
        render_neighbours(io, "Callers (who called it)", peek.callers, peek.all, values)
        render_neighbours(io, "Callees (what it called)", peek.callees, peek.all, values)
      end

      def render_neighbours(io, title, neighbours, all, values)
        io.puts "#{title}:"
        if neighbours.empty?
          io.puts "  none"
          return
        end

        rows = neighbours.sort_by { |group, value| [-value, group ? @frames.groups[group].name : ""] }.map do |group, value|
          function = group && @frames.groups[group]
          [values.show(value), Report.percent(value, all), function ? function.name : ROOT,
           function ? function.location : ""]
        end
        io.puts Table.new(rows, header: HEADER, numeric_columns: NUMERIC_COLUMNS).lines.map { |line| "  #{line}" }
      end

      # The sums behind the view, for one sample type. callers and callees
      # are Hashes by group (nil: no caller, the function is a root).
      class Peek
        attr_reader :total, :self_value, :all, :callers, :callees

        def initialize(frames, targets, samples, value_index)
          @frames = frames
          @targets = targets.to_h { |group| [group, true] }
          @total = @self_value = @all = 0
          @callers = Hash.new(0)
          @callees = Hash.new(0)
          samples.each { |sample| add(sample, sample.values[value_index]) }
        end

        private

        def add(sample, value)
          return if value.zero?

          @all += value
          path = @frames.path(sample.location_ids)
          positions = path.each_index.select { |i| @targets[path[i]] }
          return if positions.empty?

          @total += value
          @self_value += value if positions.first.zero?
          positions.map { |i| path[i + 1] }.uniq.each { |caller| @callers[caller] += value unless @targets[caller] }
          callees = positions.filter_map { |i| path[i - 1] if i.positive? }
          callees.uniq.each { |callee| @callees[callee] += value unless @targets[callee] }
        end
      end
    end
  end
end
