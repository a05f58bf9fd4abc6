# frozen_string_literal: true

module Sonde
  module Rails
    # The `endpoint` Sonde::Middleware gives a Rails request before it is
    # routed: the action the router will pick ("UsersController#show"), so
    # that a request has one endpoint from its first sample to its last
    # (Datadog's endpoint view counts each value as an endpoint; a request
    # labelled "GET /users" in the middleware stack and the action inside
    # it showed every endpoint twice). Sonde::Rails::ControllerLabels sets
    # the same name once the controller runs.
    #
    # Asks the application's Journey router to recognize a copy of the
    # request (recognize rewrites SCRIPT_NAME and PATH_INFO for mounted
    # apps; the request's own env is left alone). Recognition matches paths,
    # verbs and Hash constraints only: no application code (lambda
    # constraints live in the route's app) runs here. A route with no
    # controller (a mounted Rack app, a redirect) or no match gives nil: the
    # middleware's "GET /users" then stays.
    #
    # Recognizing costs what routing costs (25 us a request on this
    # project's VMs), so answers are kept by verb and path with its ids
    # taken out (/users/42/edit and /users/7/edit are one entry): an app's
    # requests find their name in a Hash after the first of each shape.
    # Ids are segments of digits, UUIDs and long hex strings; a route that
    # tells two such paths apart by the id alone (or by host) is named by
    # the first one seen, until the action's own label takes over.
    class RouteEndpoint
      # Controller and action pairs whose names are kept, and path shapes
      # whose answers are kept (past that, each request is recognized).
      MAX_NAMES = 10_000
      MAX_SHAPES = 10_000
      ID_SEGMENT = %r{(?<=/)(?:\d+|\h{8}-\h{4}-\h{4}-\h{4}-\h{12}|\h{24,})(?=[/.]|\z)}.freeze
      NONE = Object.new.freeze # a shape no controller serves

      def initialize(application)
        @application = application
        @names = {}
        @shapes = {}
      end

      # env -> "UsersController#show" or nil. Never raises.
      def call(env)
        shape = "#{env["REQUEST_METHOD"]} #{env["PATH_INFO"].to_s.gsub(ID_SEGMENT, ":id")}"
        known = @shapes[shape]
        return NONE.equal?(known) ? nil : known if known

        name = recognize(env)
        @shapes[shape.freeze] = name || NONE if @shapes.size < MAX_SHAPES
        name
      rescue StandardError
        nil
      end

      private

      def recognize(env)
        @application.routes.router.recognize(::ActionDispatch::Request.new(env.dup)) do |_route, params|
          controller = params[:controller]
          action = params[:action]
          return name_of(controller.to_s, action.to_s) if controller && action
        end
        nil
      end

      # "admin/users", "show" -> "Admin::UsersController#show", as the
      # controller class names itself.
      def name_of(controller, action)
        by_action = @names[controller] ||= {}
        by_action[action] || begin
          name = "#{controller.camelize}Controller##{action}".freeze
          by_action[action.frozen? ? action : action.dup.freeze] = name if @names.size < MAX_NAMES
          name
        end
      end
    end
  end
end
