# frozen_string_literal: true

require_relative "native"

module Sonde
  # The names Sonde's profiles give their sample types, units and labels,
  # as the native core writes them (ext/sonde/profile_names.h, exposed as
  # Native::PROFILE_NAMES): the report and the converters read them here
  # rather than spelling them again.
  #
  #   ProfileNames.label(:thread_id)        # => "thread id"
  #   ProfileNames.sample_type(:cpu_time)   # => "cpu-time"
  module ProfileNames
    module_function

    def all
      Native.load!
      Native::PROFILE_NAMES
    end

    def label(name)
      all.fetch(:labels).fetch(name)
    end

    def sample_type(name)
      all.fetch(:sample_types).fetch(name)
    end
  end
end
