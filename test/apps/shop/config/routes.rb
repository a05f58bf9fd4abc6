# frozen_string_literal: true

# TODO(lead): remove once require "sonde" autoloads PprofApp
require "sonde/pprof_app"

Rails.application.routes.draw do
  get "/heavy" => "work#heavy"
  get "/light" => "work#light"
  get "/up" => "work#up"
  mount Sonde::PprofApp.new(token: ENV["SONDE_PPROF_TOKEN"]) => "/debug/pprof"
end
