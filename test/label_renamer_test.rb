# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "support/exporter_test_helpers"
require "sonde/pprof/label_renamer"

# Sonde::Pprof::LabelRenamer on real Sonde profiles: the renamed keys carry
# the same values on the same samples, and nothing else changes.
class LabelRenamerTest < Minitest::Test
  include SondeTestHelper

  def labelled_pprof
    ExporterTestHelpers.labelled_pprof_bytes
  end

  RENAMES = { "endpoint" => "trace endpoint" }.freeze

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.90-2.47x its bound (>).
  statistical def test_renamed_keys_keep_their_values_on_the_same_samples
    renamed = Sonde::Pprof::LabelRenamer.new(RENAMES).call(labelled_pprof)
    before = Sonde::Pprof.decode(labelled_pprof)
    after = Sonde::Pprof.decode(renamed)
    labelled = total(before, "cpu-samples") { |s| s.labels.key?("endpoint") }
    assert_operator labelled, :>, 30, "samples taken under an endpoint (0.3 s at 250 Hz)"
    assert_equal before.samples.size, after.samples.size
    before.samples.zip(after.samples).each do |old, new|
      expected = old.labels.to_h { |key, value| [RENAMES.fetch(key, key), value] }
      assert_equal expected, new.labels
      assert_equal old.values, new.values
      assert_equal before.frames(old), after.frames(new)
    end
    kinds = after.samples.map { |s| s.labels["kind"] }.compact.uniq
    assert_equal ["endpoint"], kinds, "a label value equal to a renamed key is left alone"
    assert_equal before.sample_types, after.sample_types
    assert_equal [before.time_nanos, before.duration_nanos, before.comments],
                 [after.time_nanos, after.duration_nanos, after.comments]
    assert_go_pprof_tags(renamed)
  end

  def test_a_profile_without_the_old_names_comes_back_unchanged
    bytes = Sonde::Pprof::LabelRenamer.new({ "no such label" => "x" }).call(labelled_pprof)
    assert_same labelled_pprof, bytes
  end

  def test_a_corrupt_profile_is_a_decode_error
    assert_raises(Sonde::Pprof::DecodeError) { Sonde::Pprof::LabelRenamer.new(RENAMES).call("not gzip".b) }
  end

  private

  def assert_go_pprof_tags(renamed)
    skip "go is not installed (CI installs it)" unless go_available?

    Dir.mktmpdir do |dir|
      path = File.join(dir, "renamed.pprof")
      File.binwrite(path, renamed)
      assert_go_pprof_reads(path)
      out, status = Open3.capture2e("go", "tool", "pprof", "-tags", path)
      assert status.success?, out
      assert_match(/^ *trace endpoint: /, out)
      assert_includes out, "GET /users"
      refute_match(/^ *endpoint: /, out)
    end
  end
end
