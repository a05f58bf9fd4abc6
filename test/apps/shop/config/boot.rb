# frozen_string_literal: true

# Where `require "bundler/setup"` stands in a generated app: the pinned gems
# (config/gems.rb says why not Bundler itself).
require_relative "gems"
ShopGems.activate!
