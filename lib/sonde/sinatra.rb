# frozen_string_literal: true

require_relative "../sonde"

module Sonde
  # Sinatra extension: each route's block (and the templates it renders)
  # runs under the label `endpoint` = the matched route's method and
  # pattern ("GET /users/:id"), which replaces Sonde::Middleware's coarser
  # "GET /users" for that part of the request (filters and the middleware
  # keep the middleware's). The pattern is known only once Sinatra matched
  # the route, which is why this is here and not in the middleware.
  #
  #   require "sonde/sinatra"
  #   class App < Sinatra::Base
  #     use Sonde::Middleware
  #     register Sonde::Sinatra
  #   end
  #
  # Loads nothing of Sinatra's. A pattern that cannot be a label (over 256
  # bytes) leaves the middleware's label; nothing is raised into the app.
  module Sinatra
    # Route patterns whose labels are kept checked.
    CACHE = Labels::CheckedCache.new(10_000)

    def self.registered(app)
      app.prepend(RouteLabels)
    end

    def self.labels_for(route)
      CACHE.fetch(route) { { Labels::ENDPOINT => route } }
    end

    # Sinatra sets env["sinatra.route"] just before it evaluates the
    # route's block through route_eval.
    module RouteLabels
      def route_eval(&block)
        route = env["sinatra.route"]
        labels = route.is_a?(String) && Sonde::Sinatra.labels_for(route)
        return super unless labels

        Sonde::Labels.with_checked(labels) { super(&block) }
      end
    end
  end
end
