# frozen_string_literal: true

# Median, min and max of repeated measurements, and how this report prints
# them. The machine is noisy: a median says what is typical, min and max say
# how far one run can stray, and all three are shown.
module SondeBench
  Summary = Struct.new(:median, :min, :max, :count) do
    def self.of(values)
      values = values.compact.sort
      return nil if values.empty?

      new(Summary.percentile(values, 0.5), values.first, values.last, values.size)
    end

    # The p-th quantile (0..1) of values, interpolating between the two
    # nearest ranks (the usual "type 7" definition: p = 0.5 is the median,
    # p = 0 the min). nil for no values.
    def self.percentile(values, fraction)
      values = values.compact.sort
      return nil if values.empty?

      rank = fraction * (values.size - 1)
      low = values[rank.floor]
      high = values[rank.ceil]
      low + ((high - low) * (rank - rank.floor))
    end

    # "1.003 (0.990–1.020)", with the numbers formatted by the block.
    def to_s(&format)
      format ||= ->(value) { value.round(3).to_s }
      return format.call(median) if count == 1

      "#{format.call(median)} (#{format.call(min)}–#{format.call(max)})"
    end
  end
end
