# frozen_string_literal: true

require_relative "../sonde"
require_relative "job_labels"

module Sonde
  # ActiveJob: every job performed runs under the labels `job` (its class)
  # and `queue` (and `endpoint`: Sonde::JobLabels), whatever the queue
  # adapter (Sidekiq, GoodJob, Solid Queue,
  # inline, async), so a worker's profile splits by job
  # (`sonde report --by label:job`).
  #
  #   require "sonde/active_job"     # outside Rails; Sonde's Railtie does it in a Rails app
  #
  # Installs an around_perform callback on ActiveJob::Base when ActiveJob
  # loads (ActiveSupport.on_load), so requiring this file loads nothing of
  # ActiveJob's by itself. A job whose class name cannot be a label (over
  # 256 bytes) runs unlabelled; nothing of Sonde's is raised into the job.
  module ActiveJobLabels
    @installed = false

    class << self
      # Registers the callback (once). Raises Sonde::Error when
      # ActiveSupport is not loaded: there is no ActiveJob to label.
      def install
        unless defined?(::ActiveSupport) && ::ActiveSupport.respond_to?(:on_load)
          raise Sonde::Error, "sonde/active_job labels ActiveJob's jobs: require \"active_job\" before it"
        end
        return if @installed

        @installed = true
        ::ActiveSupport.on_load(:active_job) do
          around_perform { |job, block| Sonde::ActiveJobLabels.around(job, &block) }
        end
      end

      # Runs the job's block under its labels.
      # And in the trace context of the span a tracer has active (its job span).
      def around(job)
        TraceContext.with_current_span do
          labels = labels_for(job.class.name.to_s, job.queue_name.to_s)
          next yield unless labels

          Labels.with_checked(labels) { yield }
        end
      end

      private

      def labels_for(name, queue)
        JobLabels.for(name, queue)
      end
    end
  end
end

Sonde::ActiveJobLabels.install
