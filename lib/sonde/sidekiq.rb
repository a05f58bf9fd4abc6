# frozen_string_literal: true

require_relative "../sonde"
require_relative "job_labels"

module Sonde
  # Sidekiq server middleware: every job runs under the labels `job` (its
  # class) and `queue` (and `endpoint`: Sonde::JobLabels), so a worker's
  # profile splits by job (`sonde report --by label:job`).
  #
  #   # config/initializers/sidekiq.rb
  #   require "sonde/sidekiq"
  #   Sidekiq.configure_server do |config|
  #     config.server_middleware { |chain| chain.add Sonde::SidekiqMiddleware }
  #   end
  #
  # Loads nothing of Sidekiq's: Sidekiq calls #call(job_instance, job_hash,
  # queue) with a block that runs the job. A job whose class name cannot be
  # a label (empty, over 256 bytes) runs unlabelled; nothing of Sonde's is
  # raised into the job.
  class SidekiqMiddleware
    # And in the trace context of the span a tracer has active (its job
    # span, when the tracer's Sidekiq middleware comes first in the chain).
    def call(_job_instance, job, queue)
      TraceContext.with_current_span do
        labels = job_labels(job, queue)
        next yield unless labels

        Labels.with(labels) { yield }
      end
    end

    private

    # ActiveJob's jobs run through Sidekiq's JobWrapper: the real class is
    # in "wrapped".
    def job_labels(job, queue)
      name = job.is_a?(Hash) ? (job["wrapped"] || job["class"]).to_s : job.class.name.to_s
      JobLabels.for(name, queue.to_s)
    end
  end
end
