# frozen_string_literal: true

require "json"
require "sonde/flamegraph"

# The data the flame graph page embeds (lib/sonde/flamegraph/data.rb), read
# back for the tests: its timeline's moments with their thread, state,
# stack and values.
module PageData
  Moment = Struct.new(:thread, :end_us, :state, :stack, :labels, :set, :values, keyword_init: true)

  module_function

  # The data, its nodes' parents as node indexes (the page embeds how far
  # back each parent is, and its script turns them back likewise).
  def parse(html)
    data = Sonde::Flamegraph.embedded_data(html)
    (0...data["nodes"].size / 2).each { |n| data["nodes"][2 * n] = n - data["nodes"][2 * n] }
    data
  end

  # Every moment of data's timeline, lane by lane: thread name, end (µs
  # from originNs), state name, stack (function names, leaf first), labels
  # (name => value) and their set's index (-1: none), values (one per type).
  def moments(data)
    width = 2 + data["types"].size
    stride = 4 + data["types"].size
    data["timeline"]["lanes"].flat_map do |thread, flat|
      flat.each_slice(width).map do |sample, end_us, *values|
        node, sample_thread, state, set = data["samples"][sample * stride, 4]
        raise "moment of thread #{thread} points at a sample of thread #{sample_thread}" unless sample_thread == thread

        Moment.new(thread: data["threads"][thread][0], end_us: end_us, state: state.negative? ? nil : data["states"][state],
                   stack: stack(data, node), labels: labels(data, set), set: set, values: values)
      end
    end
  end

  def stack(data, node)
    names = []
    until node == -1
      parent, function = data["nodes"][2 * node, 2]
      names << data["functions"][function][0]
      node = parent
    end
    names
  end

  def labels(data, set)
    return {} if set.negative?

    data["labels"].each_with_index.filter_map do |(name, values), n|
      value = data["labelSets"][set][n]
      [name, values[value]] unless value.negative?
    end.to_h
  end

  # An epoch nanosecond as the timeline's microseconds.
  def us_of(data, epoch_ns)
    (epoch_ns - Integer(data["timeline"]["originNs"])) / 1000
  end
end
