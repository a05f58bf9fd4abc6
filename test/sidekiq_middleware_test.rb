# frozen_string_literal: true

require_relative "support/test_helper"

# Sonde::SidekiqMiddleware, run as Sidekiq's server runs its middleware
# chain (Sidekiq itself is not installed here: a fake queue of job hashes
# stands in for Redis, and the chain is called the way
# Sidekiq::Middleware::Chain#invoke calls it). Each job's CPU time, which
# the job measures itself, comes out under its job and queue labels.
class SidekiqMiddlewareTest < Minitest::Test
  include SondeTestHelper

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a difference -0.000876 to 0.00626 of ±0.06; a difference
  # -0.0132 to -0.00534 of ±0.05.
  statistical def test_each_job_is_labelled_with_its_class_and_queue
    Dir.mktmpdir do |dir|
      out = File.join(dir, "jobs.pprof")
      stdout, stderr, status = run_ruby("-rsonde", "-rsonde/sidekiq", "-rjson", "-e", <<~RUBY)
        def burn(seconds)
          started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
          x = 0
          x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started < seconds
          x
        end
        class ImportJob; def perform(ms) = burn(ms / 1000.0); end
        class MailJob; def perform(ms) = burn(ms / 1000.0); end
        queue = [
          { "class" => "ImportJob", "args" => [30], "queue" => "bulk" },
          { "class" => "MailJob", "args" => [10], "queue" => "default" },
          { "class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "wrapped" => "MailJob",
            "args" => [10], "queue" => "default" },
        ] * 10
        chain = [Sonde::SidekiqMiddleware.new]
        Sonde.start(rate: 250)
        spent = Hash.new(0)
        queue.each do |job|
          worker = Object.const_get(job["wrapped"] || job["class"]).new
          started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
          chain.reverse.reduce(-> { worker.perform(*job["args"]) }) { |inner, m| -> { m.call(worker, job, job["queue"]) { inner.call } } }.call
          spent[job["wrapped"] || job["class"]] += Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started
        end
        Sonde.stop.write(#{out.inspect})
        puts JSON.generate(spent)
      RUBY
      assert_succeeded status, stderr
      spent = JSON.parse(stdout.lines.last)
      profile = Sonde::Pprof.read(out)
      by_job = Hash.new(0)
      profile.samples.each do |sample|
        by_job[sample.labels.values_at("job", "queue")] += sample.values[profile.value_index("cpu-time")]
      end
      assert_in_delta spent["ImportJob"], by_job[%w[ImportJob bulk]] / 1e9, 0.06, by_job.inspect
      assert_in_delta spent["MailJob"], by_job[%w[MailJob default]] / 1e9, 0.05, by_job.inspect
      assert_equal [%w[ImportJob bulk], %w[MailJob default]], (by_job.keys - [[nil, nil]]).sort, "no other label set"
    end
  end
end
