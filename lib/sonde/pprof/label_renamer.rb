# frozen_string_literal: true

require_relative "../errors"
require_relative "../native"
require_relative "../pprof"

module Sonde
  module Pprof
    # Renames sample label keys in an encoded pprof profile, for a backend
    # that reads labels under its own names (Datadog's endpoint profiling
    # reads "trace endpoint" where Sonde writes "endpoint"). The native core
    # does the work (pprof_rename.c: pprof_rename_label_keys_gzip) with the GVL
    # released: only the labels of the samples that carry a renamed key are
    # rewritten, the new names are appended to the string table so no index
    # moves, and a string also used elsewhere (a label value, a function
    # name) keeps its meaning there. A walk in Ruby cost about 28 µs per
    # sample, most of a second per minute for a busy server's profile, with
    # the GVL held; the native one costs a few milliseconds.
    class LabelRenamer
      # renames: {"old name" => "new name"}; numeric: the old names whose
      # values, hex strings, become the labels' numbers (Datadog reads span
      # ids as numbers, Sonde writes them as tracers print them).
      def initialize(renames, numeric: [])
        @renames = renames.to_h { |old, new| [old.to_s.b.freeze, new.to_s.b.freeze] }.freeze
        @numeric = numeric.map { |name| name.to_s.b.freeze }.freeze
      end

      # The gzip'd profile with the label keys renamed (gzip'd too); the
      # same String when it has none of the old names. Raises DecodeError
      # for bytes that are not a gzip'd profile.
      def call(gzipped)
        Native.load!
        Native.rename_label_keys(gzipped, @renames, @numeric)
      rescue ::ArgumentError => e
        raise DecodeError, "cannot rename labels: #{e.message}"
      end
    end
  end
end
