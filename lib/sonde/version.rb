# frozen_string_literal: true

module Sonde
  VERSION = "0.1.0"
end
