# frozen_string_literal: true

require_relative "labels"

module Sonde
  # The labels a background job runs under, for every job integration
  # (ActiveJob, Sidekiq): `job` (its class) and `queue`, and `endpoint` =
  # its class too unless the job runs inside something that has one (a job
  # performed inline in a request keeps the request's). Datadog's endpoint
  # view and Pyroscope's endpoint filter then list jobs beside requests, as
  # Datadog's own integration does (a job's root span is named after it).
  module JobLabels
    # Job classes and queues whose labels are kept checked.
    CACHE = Labels::CheckedCache.new(1000)

    # Frozen, checked labels, or nil when they cannot be labels (a class
    # name over 256 bytes): the job then runs unlabelled.
    def self.for(name, queue)
      nested = Labels.current.key?(Labels::ENDPOINT)
      CACHE.fetch([name, queue, nested]) do
        labels = { Labels::JOB => name, Labels::QUEUE => queue }
        nested ? labels : labels.merge(Labels::ENDPOINT => name)
      end
    end
  end
end
