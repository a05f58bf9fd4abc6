# frozen_string_literal: true

require_relative "support/test_helper"

# The names a profile gives functions are the ones Ruby gives them, on every
# Ruby: Kernel#is_a? (not Kernel.is_a?, which Ruby 3.3 said once anything
# was prepended to Kernel, Sonde included), a method of a module with a
# module prepended, blocks as Ruby 3.4's backtraces name them ("block in
# Names::Hot#two_blocks") and apart by their first line; one function-table
# entry per function, and one "<main>" at the root of the main thread.
class FrameNamesTest < Minitest::Test
  include SondeTestHelper

  # One workload run serves every test: they read the same profile.
  def setup
    @facts, @profile = self.class.recorded ||= Dir.mktmpdir do |dir|
      out = File.join(dir, "names.pprof")
      [run_workload("frame_names", out, "1.0"), Sonde::Pprof.read(out)]
    end
    @names = @profile.functions.values.map(&:name)
  end

  class << self
    attr_accessor :recorded
  end

  def test_sonde_leaves_kernel_ancestors_alone
    assert_equal @facts["kernel_ancestors_before"], @facts["kernel_ancestors_after"]
  end

  def test_kernel_and_prepended_module_methods_read_as_ruby_names_them
    assert_includes @names, "Kernel#is_a?"
    refute_includes @names, "Kernel.is_a?"
    assert_includes @names, "Names::Mixin#mixed"
    refute_includes @names, "Names::Mixin.mixed"
    assert_equal RUBY_VERSION >= "3.4" ? "Names::Mixin#mixed" : "mixed", @facts.dig("labels", "mixed", "label")
  end

  def test_blocks_are_named_as_ruby_3_4_names_them
    expected = "block in Names::Hot#two_blocks"
    # Ruby 3.4's own backtrace is the reference; 3.1 and 3.3 label it "block in two_blocks".
    %w[first_block second_block].each do |key|
      label = @facts.dig("labels", key, "label")
      assert_equal(RUBY_VERSION >= "3.4" ? expected : "block in two_blocks", label)
    end
    first, second = @facts.values_at("first_block_line", "second_block_line")
    if Sonde::Platform.backend == :mjit_header
      blocks = @profile.functions.values.select { |function| function.name == expected }
      assert_equal [first, second], blocks.map(&:start_line).sort, "one entry per block, apart by first line"
      blocks.each { |block| assert_operator cpu_under(block.id), :>, 0, "block at line #{block.start_line}" }
      refute_includes @names, "block in two_blocks"
    else
      # Ruby 3.3+'s public frame API reports a block's frame with its
      # method's entry: the block's time is its method's, at the block's lines.
      refute_includes @names, expected
      method = @profile.functions.values.find { |function| function.name == "Names::Hot#two_blocks" }
      lines = leaf_lines_of(method.id)
      assert_includes lines, first + 1
      assert_includes lines, second + 1
    end
  end

  def test_one_function_entry_per_function_and_one_location_per_line
    fields = @profile.functions.values.map { |function| [function.name, function.filename, function.start_line] }
    assert_equal fields.uniq.size, fields.size, "duplicates: #{fields.tally.select { |_, n| n > 1 }.keys.inspect}"
    locations = @profile.locations.values.map { |location| [location.function_id, location.line] }
    assert_equal locations.uniq.size, locations.size
  end

  def test_one_main_at_the_root_of_the_main_thread
    main_samples = @profile.samples.select { |sample| thread_name(sample) == "main" }
    refute_empty main_samples
    main_samples.each do |sample|
      names = @profile.frames(sample).map { |function, _line| function.name }
      next if names == ["Garbage Collection"]

      assert_equal 1, names.count("<main>"), names.reverse.join(" ; ")
      assert_equal "<main>", names.last
    end
  end

  private

  def cpu_under(function_id)
    index = @profile.value_index("cpu-time")
    @profile.samples.sum do |sample|
      ids = sample.location_ids.map { |id| @profile.locations.fetch(id).function_id }
      ids.include?(function_id) ? sample.values[index] : 0
    end
  end

  # The lines at which samples had function_id on their stack, innermost occurrence.
  def leaf_lines_of(function_id)
    @profile.samples.filter_map do |sample|
      location = sample.location_ids.map { |id| @profile.locations.fetch(id) }.find { |l| l.function_id == function_id }
      location&.line
    end.uniq
  end
end
