# frozen_string_literal: true

require_relative "support/test_helper"
require "sonde/middleware"

# Sonde::Middleware as a Rack server calls it: which endpoint each request
# is labelled with (never the raw path), the app's own labels on top, and
# nothing of Sonde's raised into a request.
class MiddlewareTest < Minitest::Test
  APP = ->(env) { [200, { "content-type" => "text/plain" }, [Sonde.labels.merge("path" => env["PATH_INFO"].to_s)]] }

  def labels_for(middleware, path, method = "GET")
    _status, _headers, body = middleware.call("REQUEST_METHOD" => method, "PATH_INFO" => path)
    body.first.reject { |key, _| key == "path" }
  end

  def test_the_endpoint_is_the_method_and_the_first_path_segment
    middleware = Sonde::Middleware.new(APP)
    assert_equal({ "endpoint" => "GET /users" }, labels_for(middleware, "/users/42/edit"))
    assert_equal({ "endpoint" => "POST /orders" }, labels_for(middleware, "/orders", "POST"))
    assert_equal({ "endpoint" => "GET /" }, labels_for(middleware, "/"))
    assert_equal({ "endpoint" => "GET /" }, labels_for(middleware, ""))
    assert_equal({ "endpoint" => "GET /a" }, labels_for(middleware, "//a/b"))
    assert_equal({ "endpoint" => "GET /?x?" }, labels_for(middleware, "/\x00x\xFF".b))
    assert_equal({ "endpoint" => "GET /#{"s" * 64}" }, labels_for(middleware, "/#{"s" * 500}"))
    assert_equal({}, Sonde.labels, "the labels end with the request")
  end

  def test_a_custom_endpoint_fixed_labels_and_the_apps_own_labels
    named = Sonde::Middleware.new(APP, endpoint: ->(env) { env["PATH_INFO"] == "/u" ? "UsersController#show" : nil },
                                       labels: { tier: "web" })
    assert_equal({ "tier" => "web", "endpoint" => "UsersController#show" }, labels_for(named, "/u"))
    assert_equal({ "tier" => "web", "endpoint" => "GET /other" }, labels_for(named, "/other"), "nil: the default")
    inner = ->(env) { Sonde.with_labels(endpoint: "Api#index") { APP.call(env) } }
    assert_equal({ "endpoint" => "Api#index" }, labels_for(Sonde::Middleware.new(inner), "/api"), "the app's label wins")
  end

  def test_bad_settings_are_refused_at_construction_and_never_in_a_request
    assert_raises(Sonde::ArgumentError) { Sonde::Middleware.new(APP, labels: { "state" => "x" }) }
    assert_raises(Sonde::ArgumentError) { Sonde::Middleware.new(APP, endpoint: "UsersController") }
    odd = Sonde::Middleware.new(APP, endpoint: ->(_env) { "x" * 300 }) # too long for a label: unlabelled
    assert_equal({}, labels_for(odd, "/users"))
    raising = ->(_env) { raise Sonde::ArgumentError, "the app's own" }
    error = assert_raises(Sonde::ArgumentError) { Sonde::Middleware.new(raising).call("PATH_INFO" => "/") }
    assert_equal "the app's own", error.message, "the app's exceptions go through untouched"
  end
end
