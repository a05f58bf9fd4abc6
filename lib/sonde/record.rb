# frozen_string_literal: true

# Loaded into every Ruby process that `sonde record` runs, through RUBYOPT
# (-rsonde/record). Starts sampling at once and writes the profile when the
# process exits or execs. Never stops the program: if Sonde cannot run here,
# it says why on stderr and the program runs unprofiled.
require_relative "../sonde"
require_relative "record_notes"
require_relative "output_file"

module Sonde
  module Record
    OUTPUT_VARIABLE = "SONDE_RECORD_OUTPUT"
    PARENT_VARIABLE = "SONDE_RECORD_PARENT_PID"

    module_function

    # The environment `sonde record` gives the command.
    def environment(output:, options:, parent_pid:)
      lib = File.expand_path("..", __dir__)
      env = {
        "RUBYOPT" => [ENV.fetch("RUBYOPT", nil), "-I#{lib}", "-rsonde/record"].compact.join(" "),
        OUTPUT_VARIABLE => output,
        PARENT_VARIABLE => parent_pid.to_s,
      }
      options.each { |name, value| env[Options::BY_NAME.fetch(name).variable] = variable_text(name, value) }
      env
    end

    # A setting's value as its SONDE_* variable spells it (SONDE_NO_SIGNALS
    # says the opposite of signals:).
    def variable_text(name, value)
      case Options::BY_NAME.fetch(name).text
      when :boolean then value ? "1" : "0"
      when :negated_boolean then value ? "0" : "1"
      else value.to_s
      end
    end

    # out.pprof -> out.<pid>.pprof. Beside a device, a FIFO or a /proc link
    # (-o /dev/stdout, -o /dev/null) there is no file to put beside it
    # (/dev/null.<pid> would be a new file in /dev, and as root it would be
    # created): that process's profile goes to the temporary directory,
    # /tmp/sonde-null.<pid>.pprof, and `sonde record` says where (or, when it
    # is the only profile, writes it into FILE).
    def per_process_path(output, pid)
      extension = File.extname(output)
      return "#{output.delete_suffix(extension)}.#{pid}#{extension}" unless OutputFile.writes_in_place?(output)

      require "tmpdir" # here, not at load: it loads fileutils, which every other run would pay for
      stem = File.basename(output, extension)
      File.join(Dir.tmpdir, "sonde-#{stem}.#{pid}#{extension.empty? ? ".pprof" : extension}")
    end

    # The process `sonde record` started (or what it exec'd into, or the
    # daemon it became) writes the file asked for; any other (a child, a
    # forked worker) its own.
    def output_path
      output = ENV.fetch(OUTPUT_VARIABLE)
      Process.pid == @main_pid ? output : per_process_path(output, Process.pid)
    end

    # The daemon carries on the process it came from: the command's process
    # stays the command's process, and its profile keeps its name.
    def follow_daemon(event, parent_pid = nil)
      case event
      when :before then RecordNotes.add("daemonizing", output_path)
      when :failed then RecordNotes.add("daemon_failed")
      when :after
        @main_pid = Process.pid if parent_pid == @main_pid
        RecordNotes.add("daemonized", parent_pid, output_path)
      end
    end

    def install
      return unless ENV[OUTPUT_VARIABLE]

      unless Sonde.supported?
        warn "sonde: not profiling process #{Process.pid}: #{Sonde.unsupported_reason}"
        return
      end
      @main_pid = Process.pid if Process.ppid.to_s == ENV[PARENT_VARIABLE]
      Sonde.start # the settings `sonde record` was given come in SONDE_* variables
      RecordNotes.add("started", output_path)
      Sonde.on_exec { |profile| write(profile) }
      Sonde.session.on_daemon { |event, parent_pid| follow_daemon(event, parent_pid) }
      at_exit { finish }
    rescue Sonde::Error => e
      warn "sonde: not profiling process #{Process.pid}: #{e.message}"
    end

    def finish
      return unless Sonde.running? || Native.active?

      profile =
        begin
          Sonde.stop
        rescue Sonde::SamplingError => e
          warn "sonde: #{e.message}"
          e.profile
        end
      write(profile)
    rescue StandardError => e
      warn "sonde: could not finish the profile of process #{Process.pid}: #{e.class}: #{e.message}"
    end

    def write(profile)
      path = output_path
      profile.write(path)
      RecordNotes.add("wrote", path)
    rescue Sonde::Error => e
      # The system's reason (No space left on device), not our own wrapping.
      RecordNotes.add("write_failed", path, e.cause ? e.cause.message.sub(/ @ .*/, "") : e.message)
      warn "sonde: #{e.message}"
    end
  end
end

Sonde::Record.install
