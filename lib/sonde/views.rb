# frozen_string_literal: true

require "sonde/profile_names"

module Sonde
  # The views of a profile that Sonde's readers offer by a short name
  # (`sonde report --sample alloc`, `sonde convert --sample heap`, the
  # flame graph page's menu), each one sample type's value. Written once
  # here so that the report, the converters and the page agree on what
  # "heap" means and on the order they prefer when not told: CPU first.
  #
  #   Sonde::Views.all.fetch(:heap).type   # => "heap-live-size"
  #
  # Allocation and heap samples are in a profile only when its recording
  # asked for them (record_option); a reader that shows every view by
  # default shows those only when the profile has them.
  module Views
    # name: the short name. title: what the value is ("CPU time").
    # type: the sample type holding the value. count_type: the sample type
    # that counts what the value is made of (nil: none), and counted: what
    # it counts, singular ("sample", "object"). estimated_from: instead, the
    # sample type counting the samples an estimated value rests on (nil:
    # none). uncounted: what a value with no count behind it is (nil:
    # there is none). record_option: the `sonde record` option without
    # which a profile has no such samples (nil: always recorded).
    View = Struct.new(:name, :title, :type, :count_type, :counted, :estimated_from, :uncounted, :record_option,
                      keyword_init: true) do
      def always_recorded?
        record_option.nil?
      end
    end

    module_function

    # Every view by name, in the order readers prefer them.
    def all
      types = ProfileNames.all.fetch(:sample_types)
      [
        View.new(name: :cpu, title: "CPU time", type: types.fetch(:cpu_time), count_type: types.fetch(:cpu_samples),
                 counted: "sample",
                 uncounted: "CPU recorded between CPU samples, as at a thread's first sampling pass or its end: " \
                            "docs/reading-profiles.md, \"Where cpu-time comes from\""),
        View.new(name: :wall, title: "Wall time", type: types.fetch(:wall_time)),
        View.new(name: :alloc, title: "Allocations", type: types.fetch(:alloc_samples), counted: "object",
                 estimated_from: types.fetch(:alloc_samples_unscaled), record_option: "--alloc"),
        View.new(name: :heap, title: "Live heap", type: types.fetch(:heap_live_size),
                 count_type: types.fetch(:heap_live_samples), counted: "object", record_option: "--heap")
      ].to_h { |view| [view.name, view] }
    end

    # The views whose sample type the profile (anything with #sample_types,
    # [type, unit] pairs) has, in order.
    def present(profile)
      types = profile.sample_types.map(&:first)
      all.values.select { |view| types.include?(view.type) }
    end
  end
end
