# frozen_string_literal: true

# The README's line (and docs/rails-and-rack.md's), as pasted: require "sonde" (application.rb) is all it needs.
Rails.application.routes.draw do
  get "/heavy" => "work#heavy"
  get "/light" => "work#light"
  get "/up" => "work#up"
  mount Sonde::PprofApp.new(token: ENV["SONDE_PPROF_TOKEN"]) => "/debug/pprof"
end
