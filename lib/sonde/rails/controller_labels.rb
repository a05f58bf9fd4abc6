# frozen_string_literal: true

require_relative "../labels"
require_relative "../trace_context"

module Sonde
  module Rails
    # Prepended to ActionController::Base and ::API by Sonde's Railtie: the
    # action, its callbacks and its rendering run under the label
    # `endpoint` = "UsersController#show", which replaces the middleware's
    # coarser "GET /users" for that part of the request (routing and the
    # middleware stack keep the middleware's). The name is known only once
    # the router picked the controller, which is why this is here and not
    # in Sonde::Middleware.
    module ControllerLabels
      # Controller and action pairs whose labels are kept checked. An
      # anonymous controller, or a name over 256 bytes, keeps the
      # middleware's label.
      CACHE = Labels::CheckedCache.new(10_000)

      def self.labels_for(controller, action)
        CACHE.fetch([controller, action]) { controller.name && { Labels::ENDPOINT => "#{controller.name}##{action}" } }
      end

      # The trace context is read here too: whichever order the tracer's
      # middleware and Sonde's took, every middleware has run by now, so
      # the tracer's request span (and its controller span) is active.
      # One frame on the action's stack: no blocks.
      def process_action(*)
        trace = Sonde::TraceContext.enter_current_span
        begin
          labels = Sonde::Rails::ControllerLabels.labels_for(self.class, action_name.to_s)
          return super unless labels

          previous = Sonde::Labels.enter_checked(labels)
          begin
            super
          ensure
            Sonde::Labels.leave(previous)
          end
        ensure
          Sonde::TraceContext.leave(trace)
        end
      end
    end
  end
end
