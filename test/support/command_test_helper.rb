# frozen_string_literal: true

require "stringio"

# For the tests of one CLI command run in-process: the including class names
# it with COMMAND (the class) and COMMAND_NAME (as in "sonde report").
module CommandTestHelper
  # Runs the command with argv; returns [exit code, stdout, stderr].
  def run_command(*argv)
    out = StringIO.new
    err = StringIO.new
    code = self.class::COMMAND.run(argv, out: out, err: err)
    [code, out.string, err.string]
  end

  # Errors are one line, prefixed with the command's name.
  def assert_one_line_error(err, pattern)
    assert_equal 1, err.lines.size, err
    assert err.start_with?("sonde #{self.class::COMMAND_NAME}: "), err
    assert_match pattern, err
  end
end
