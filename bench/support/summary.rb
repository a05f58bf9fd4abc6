# frozen_string_literal: true

# Median, min and max of repeated measurements, and how this report prints
# them. The machine is noisy: a median says what is typical, min and max say
# how far one run can stray, and all three are shown.
module SondeBench
  Summary = Struct.new(:median, :min, :max, :count) do
    def self.of(values)
      values = values.compact.sort
      return nil if values.empty?

      middle = values.size / 2
      median = values.size.odd? ? values[middle] : (values[middle - 1] + values[middle]) / 2.0
      new(median, values.first, values.last, values.size)
    end

    # "1.003 (0.990–1.020)", with the numbers formatted by the block.
    def to_s(&format)
      format ||= ->(value) { value.round(3).to_s }
      return format.call(median) if count == 1

      "#{format.call(median)} (#{format.call(min)}–#{format.call(max)})"
    end
  end
end
