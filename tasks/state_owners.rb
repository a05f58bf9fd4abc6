# frozen_string_literal: true

# Which file may write each piece of per-thread state in ext/sonde (issue
# 25: one owner per piece of state). A thread_context's fields are written
# in thread_contexts.c (the other modules go through its functions), except
# its `sampling` record (thread_sampling.h), which only sampling_pass.c
# writes. Read from the source text: in each file, the names declared as
# `thread_context *NAME` are followed, and an assignment to one of their
# fields (`=`, `+=` and the like, `++`, `--`) or its address handed on
# (`&NAME->field`, which the callee may write through) is a write. It also
# finds compiler atomics named anywhere but ext/sonde/shared.h.
module StateOwners
  STRUCT = "thread_context"
  OWNER = "thread_contexts.c"
  # A part of the struct with an owner of its own: field => its owner.
  PARTS = { "sampling" => "sampling_pass.c" }.freeze
  # Writes allowed outside the owner, each with its reason: [file, text].
  EXCEPTIONS = [
    # The table frees a context, and with it the hint's memory.
    ["thread_contexts.c", "&context->sampling.stack_hint"],
  ].freeze

  module_function

  # Each write by a file that does not own it: "file:line: text".
  def violations(dir, exceptions = EXCEPTIONS)
    Dir[File.join(dir, "*.c")].sort.flat_map do |path|
      file = File.basename(path)
      source = File.read(path)
      names = source.scan(/\b#{STRUCT}\s*\*\s*(\w+)/).flatten.uniq
      next [] if names.empty?

      source.each_line.with_index(1).flat_map do |line, number|
        writes(line, names).filter_map do |field, text|
          next if owner_of(field) == file
          next if exceptions.include?([file, text])

          "#{file}:#{number}: #{text} (#{owner_of(field)} owns it)"
        end
      end
    end
  end

  # Each raw compiler atomic outside shared.h, the one header that may name
  # them (every other file says the memory order through its names).
  def raw_atomics(dir)
    Dir[File.join(dir, "*.{c,h}")].sort.reject { |path| File.basename(path) == "shared.h" }.flat_map do |path|
      File.read(path).each_line.with_index(1).filter_map do |line, number|
        "#{File.basename(path)}:#{number}: #{line.strip}" if line.sub(%r{//.*}, "").match?(/__atomic_|__sync_/)
      end
    end
  end

  def owner_of(field)
    PARTS.fetch(field, OWNER)
  end

  # [[field, text], ...]: the writes on one line to fields of names.
  def writes(line, names)
    code = line.sub(%r{//.*}, "")
    pattern = /((?<![&\w)\]])&\s*)?\b(#{names.map { |n| Regexp.escape(n) }.join("|")})->(\w+)((?:\.\w+)*)(\s*(?:[-+*\/|&^]?=(?!=)|\+\+|--))?/
    code.to_enum(:scan, pattern).filter_map do
      match = Regexp.last_match
      next unless match[1] || match[5]

      [match[3], "#{match[1] ? "&" : ""}#{match[2]}->#{match[3]}#{match[4]}"]
    end
  end
end
