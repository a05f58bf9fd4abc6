# frozen_string_literal: true

require "minitest/autorun"
require "tmpdir"
require_relative "../tasks/state_owners"

# StateOwners (tasks/state_owners.rb), the check behind `rake test:owners`:
# a thread_context is written only by thread_contexts.c, its sampling
# record only by sampling_pass.c. On small files written here, and on the
# real tree.
class StateOwnersTest < Minitest::Test
  def violations_in(files, exceptions = [])
    Dir.mktmpdir("sonde-state-owners") do |dir|
      files.each { |name, text| File.write(File.join(dir, name), text) }
      StateOwners.violations(dir, exceptions)
    end
  end

  def test_writes_of_the_table_s_fields_elsewhere_are_found
    found = violations_in("gc_source.c" => <<~C)
      static void charge(thread_context *context, int64_t wall) {
        context->gc_wall_ns_to_deduct += wall;
        context->timer = 0;
        context->sampling.sampled = true;
        arm(&context->timer);
        context->seen++;
      }
    C
    assert_equal ["gc_source.c:2: context->gc_wall_ns_to_deduct (thread_contexts.c owns it)",
                  "gc_source.c:3: context->timer (thread_contexts.c owns it)",
                  "gc_source.c:4: context->sampling.sampled (sampling_pass.c owns it)",
                  "gc_source.c:5: &context->timer (thread_contexts.c owns it)",
                  "gc_source.c:6: context->seen (thread_contexts.c owns it)"], found
  end

  def test_reads_comparisons_and_the_owners_own_writes_pass
    assert_empty violations_in("sampling_pass.c" => <<~C, "thread_contexts.c" => <<~C2)
      static void sample(thread_context *context, int64_t now) {
        if (timers != NULL && context->timer != 0) finish(context->timer);
        context->sampling.wall_ns_at_previous_sample = now;
        intern(&context->sampling.stack_hint);
        if (context->sampling.stack_id == id) return; // context->timer = 0 in a comment
      }
    C
      void reset(thread_context *previous) { previous->timer = 0; }
    C2
  end

  def test_an_exception_names_its_file_and_text
    files = { "thread_contexts.c" => "void f(thread_context *context) { g(&context->sampling.stack_hint); }\n" }
    refute_empty violations_in(files)
    assert_empty violations_in(files, [["thread_contexts.c", "&context->sampling.stack_hint"]])
  end

  def test_the_core_writes_each_thread_s_state_only_where_it_is_owned
    assert_empty StateOwners.violations(File.expand_path("../ext/sonde", __dir__))
  end

  def test_atomics_outside_shared_h_are_found
    Dir.mktmpdir("sonde-state-owners") do |dir|
      File.write(File.join(dir, "shared.h"), "#define shared_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)\n")
      File.write(File.join(dir, "a.c"), "int f(int *p) {\n  return __atomic_load_n(p, __ATOMIC_ACQUIRE); // raw\n}\n" \
                                        "// __atomic_store_n in a comment is prose\n")
      assert_equal ["a.c:2: return __atomic_load_n(p, __ATOMIC_ACQUIRE); // raw"], StateOwners.raw_atomics(dir)
    end
    assert_empty StateOwners.raw_atomics(File.expand_path("../ext/sonde", __dir__))
  end
end
