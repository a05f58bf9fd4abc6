# frozen_string_literal: true

module Sonde
  # Loads Sonde's Railtie when Rails comes after Sonde. A process started
  # with RUBYOPT=-rsonde/auto loads Sonde before Rails, so Bundler's later
  # `require "sonde"` is a no-op and the Railtie (labels, middleware,
  # config.sonde) would never load. The Railtie must exist before the
  # application's class body runs (it reads config.sonde), so this waits
  # for that class to open: a :class TracePoint, on only until then. A
  # process that never loads Rails keeps it, at the cost of a check per
  # class or module opened.
  module RailtieLoader
    @trace = nil

    class << self
      def install
        return if @trace || defined?(::Sonde::Railtie)

        @trace = TracePoint.new(:class) { |tp| load_when_application_opens(tp.self) }
        @trace.enable
      end

      def installed?
        !@trace.nil? && @trace.enabled?
      end

      private

      def load_when_application_opens(opened)
        return unless defined?(::Rails::Application) && opened.is_a?(Class) && opened < ::Rails::Application

        @trace.disable
        require_relative "railtie" unless defined?(::Sonde::Railtie)
      rescue StandardError, ScriptError => e
        @trace&.disable
        warn "sonde: Rails app not labelled (process #{Process.pid}): could not load Sonde's Railtie: " \
             "#{e.class}: #{e.message}"
      end
    end
  end
end
