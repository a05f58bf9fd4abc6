# frozen_string_literal: true

require "minitest/autorun"
require "tmpdir"
require_relative "../tasks/include_cycles"

# IncludeCycles (tasks/include_cycles.rb), the check behind `rake
# test:includes`, on small trees written here: it finds the cycles it is
# there to find, by module, and lets only the allowed ones through.
class IncludeCyclesTest < Minitest::Test
  def with_tree(files)
    Dir.mktmpdir("sonde-include-cycles") do |dir|
      files.each { |name, includes| File.write(File.join(dir, name), includes.map { |h| "#include \"#{h}\"\n" }.join) }
      yield dir
    end
  end

  def test_a_tree_that_reads_one_way_has_no_cycle
    tree = { "a.c" => %w[a.h b.h], "a.h" => %w[c.h], "b.c" => %w[b.h c.h], "b.h" => [], "c.h" => [] }
    with_tree(tree) { |dir| assert_equal [[], []], IncludeCycles.check(dir, []) }
  end

  # The shape of the circle this check was written after: constants only,
  # but a .c including the next module's header, three times round.
  def test_a_cycle_through_source_files_is_found_and_named
    tree = { "a.c" => %w[a.h b.h], "a.h" => [], "b.c" => %w[b.h c.h], "b.h" => [], "c.c" => %w[c.h a.h], "c.h" => [] }
    with_tree(tree) do |dir|
      new_cycles, = IncludeCycles.check(dir, [])
      assert_equal ["a -> b -> c -> a"], new_cycles
    end
  end

  def test_headers_that_include_each_other_are_a_cycle
    with_tree("x.h" => %w[y.h], "y.h" => %w[x.h], "z.h" => %w[x.h]) do |dir|
      assert_equal [%w[x y]], IncludeCycles.cycles(IncludeCycles.graph(dir))
    end
  end

  def test_a_vm_backend_is_part_of_the_vm_module
    tree = { "vm.h" => [], "vm_public.c" => %w[vm.h stacks.h], "stacks.c" => %w[stacks.h vm.h], "stacks.h" => [] }
    with_tree(tree) { |dir| assert_equal [%w[stacks vm]], IncludeCycles.cycles(IncludeCycles.graph(dir)) }
  end

  def test_an_allowed_cycle_passes_and_a_gone_one_is_reported
    tree = { "p.c" => %w[p.h q.h], "p.h" => [], "q.c" => %w[q.h p.h], "q.h" => [] }
    with_tree(tree) do |dir|
      assert_equal [[], []], IncludeCycles.check(dir, [%w[q p]])
      assert_equal [[], [%w[r s]]], IncludeCycles.check(dir, [%w[q p], %w[s r]])
      assert_equal [["p -> q -> p"], []], IncludeCycles.check(dir, [])
    end
  end

  def test_a_module_including_its_own_header_is_no_cycle
    with_tree("m.c" => %w[m.h], "m.h" => []) { |dir| assert_empty IncludeCycles.cycles(IncludeCycles.graph(dir)) }
  end
end
