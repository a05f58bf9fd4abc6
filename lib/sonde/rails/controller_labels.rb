# frozen_string_literal: true

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
      # Controller and action pairs whose labels are kept checked.
      CACHED = 10_000

      @cache = {}

      def self.labels_for(controller, action)
        key = [controller, action]
        @cache.fetch(key) do
          labels = begin
            controller.name && Labels.check("endpoint" => "#{controller.name}##{action}")
          rescue Sonde::ArgumentError
            nil # an anonymous controller, or a name over 256 bytes: the middleware's label stays
          end
          @cache[key.freeze] = labels if @cache.size < CACHED
          labels
        end
      end

      def process_action(*)
        labels = Sonde::Rails::ControllerLabels.labels_for(self.class, action_name.to_s)
        return super unless labels

        Sonde::Labels.with_checked(labels) { super }
      end
    end
  end
end
