# frozen_string_literal: true

require "sonde/errors"
require "sonde/pprof"
require "sonde/views"
require "sonde/converters/stacks"
require "sonde/converters/collapsed"
require "sonde/converters/speedscope"
require "sonde/converters/timeline"
require "sonde/converters/firefox"

module Sonde
  # `sonde convert`: a pprof profile into another tool's format.
  #
  #   Sonde::Convert.new(profile, to: :collapsed, sample: "wall").write($stdout)
  #   Sonde::Convert.new(profile, to: :collapsed, sample: "heap").write($stdout)   # heap-live-size, bytes
  #   Sonde::Convert.new(profile, to: :speedscope, name: "app").write(File.open("app.json", "w"))
  #   Sonde::Convert.new(profile, to: :firefox, name: "app").write(io)   # needs the timeline
  class Convert
    FORMATS = %i[collapsed speedscope firefox].freeze

    # The profile itself cannot be converted (it has no sample types): a
    # problem of the file, not of the options.
    class ProfileError < Sonde::Error; end

    # to: :collapsed, :speedscope or :firefox. sample: a sample type (name
    # or alias), or nil for the format's default; firefox takes none (its
    # samples are the wall samples, with their CPU). thread_names, label:
    # collapsed only; label: a label name whose value leads each stack.
    # firefox raises ProfileError when no sample has a moment (a profile
    # recorded without the timeline).
    def initialize(profile, to:, sample: nil, thread_names: true, name: "profile", label: nil)
      unless FORMATS.include?(to)
        raise Sonde::ArgumentError, "to: #{to.inspect} is not accepted (expected one of #{FORMATS.map(&:inspect).join(", ")})"
      end
      raise Sonde::ArgumentError, "label: only collapsed stacks lead by a label (not #{to})" if label && to != :collapsed

      @to = to
      @name = name
      @thread_names = thread_names
      if to == :firefox
        lay_out_timeline(profile, sample)
      else
        fold_stacks(profile, sample, label)
      end
    end

    def write(io)
      converter.write(io)
    end

    private

    def converter
      case @to
      when :collapsed
        Converters::Collapsed.new(@stacks, type_index: @type_index, thread_names: @thread_names)
      when :speedscope
        Converters::Speedscope.new(@stacks, name: @name, type_indexes: @type_index && [@type_index])
      when :firefox
        Converters::Firefox.new(@profile, @timeline, name: @name)
      end
    end

    # Resolved now, so that a profile that cannot be converted fails
    # before anything is written.
    def fold_stacks(profile, sample, label)
      @stacks = Converters::Stacks.new(profile, labels: label)
      check_label(label) if label
      @type_index = sample ? type_index(sample) : (@to == :collapsed ? default_collapsed_type : nil)
    end

    # Laid out now too: a profile without a timeline fails before anything
    # is written.
    def lay_out_timeline(profile, sample)
      if sample
        raise Sonde::ArgumentError, "sample: firefox takes no sample type (its samples are the wall samples, " \
                                    "with the CPU of each)"
      end

      @profile = profile
      @timeline = Converters::Timeline.new(profile)
    rescue Converters::Timeline::Untimed => e
      raise ProfileError, e.message
    end

    def type_index(sample)
      name = sample_aliases.fetch(sample.to_s, sample.to_s)
      index = @stacks.type_index(name)
      return index if index

      accepted = @stacks.sample_types.map(&:first)
      accepted += sample_aliases.select { |_short, long| accepted.include?(long) }.keys
      has = accepted.empty? ? "this profile has no sample types" : "this profile has: #{accepted.join(", ")}"
      raise Sonde::ArgumentError, "sample: #{sample.to_s.inspect} is not accepted (#{has})"
    end

    def check_label(label)
      names = @stacks.label_names
      return if names.include?(label)

      has = names.empty? ? "this profile's samples have no labels" : "this profile's labels: #{names.join(", ")}"
      raise Sonde::ArgumentError, "label: #{label.inspect} is on no sample (#{has})"
    end

    # The views' short names for Sonde's sample types ("alloc" =>
    # "alloc-samples"; any type name in the profile works too), in the order
    # collapsed prefers them when not told.
    def sample_aliases
      Views.all.values.to_h { |view| [view.name.to_s, view.type] }
    end

    def default_collapsed_type
      sample_aliases.each_value do |name|
        index = @stacks.type_index(name)
        return index if index
      end
      raise ProfileError, "the profile has no sample types to convert" if @stacks.sample_types.empty?

      0
    end
  end
end
