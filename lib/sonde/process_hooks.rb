# frozen_string_literal: true

require_relative "wrap_in_place"

module Sonde
  # Keeps sampling safe across fork and exec.
  #
  # fork: only the forking thread survives in the child, so the trigger
  # thread is gone; the child drops what it inherited from the parent (those
  # samples are the parent's) and starts a fresh profile of its own.
  #
  # daemon: Process.daemon forks (twice, or through daemon(3)) without
  # Process._fork, so it has a hook of its own: the daemon restarts
  # sampling as a forked child does.
  #
  # exec: sampling stops first, so that no SIGPROF can reach the new program,
  # which would die of it ("Profiling timer expired"). If exec fails, sampling
  # resumes.
  module ProcessHooks
    # Prepended to Process's singleton class: Process._fork is the one method
    # every fork goes through on Ruby 3.1+ (fork, Process.fork, IO.popen("-")...).
    module Fork
      def _fork
        pid = super
        Sonde.existing_session&.restart_in_forked_child if pid.zero?
        pid
      end
    end

    # Prepended to Process's singleton class. The parent's side never
    # returns (it ends in _exit); the daemon's returns 0.
    module Daemon
      def daemon(*arguments)
        parent = Process.pid
        session = Sonde.existing_session
        session&.before_daemon
        begin
          result = super
        rescue Exception # rubocop:disable Lint/RescueException -- say the daemon failed, whatever failed it, then re-raise
          session&.daemon_failed if Process.pid == parent
          raise
        end
        session&.restart_in_daemon(parent) unless Process.pid == parent
        result
      end
    end

    # Prepended to Kernel's and Process's singleton classes (Kernel.exec,
    # Process.exec); Kernel#exec is wrapped in place (WrapInPlace says why).
    module Exec
      def exec(*arguments)
        ProcessHooks.around_exec { super }
      end
    end

    module_function

    def around_exec
      session = Sonde.existing_session
      resume = session&.pause_before_exec
      begin
        yield
      rescue Exception # rubocop:disable Lint/RescueException -- resume whatever made exec fail, then re-raise
        session&.resume_after_failed_exec(resume)
        raise
      end
    end

    def install
      Process.singleton_class.prepend(Fork)
      Process.singleton_class.prepend(Daemon)
      [Kernel.singleton_class, Process.singleton_class].each { |target| target.prepend(Exec) }
      WrapInPlace.wrap(Kernel, :exec) { |original| around_exec(&original) }
    end
  end
end
