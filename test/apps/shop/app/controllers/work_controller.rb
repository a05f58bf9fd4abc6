# frozen_string_literal: true

# Two endpoints of known CPU cost. Each answers "<pid> <CPU ns>", the CPU the
# action used on its thread's clock from its first line to its last, so the
# test knows which worker served it and what it cost.
class WorkController < ApplicationController
  HEAVY_SECONDS = Float(ENV.fetch("SHOP_HEAVY_MS", "24")) / 1000
  LIGHT_SECONDS = Float(ENV.fetch("SHOP_LIGHT_MS", "2")) / 1000

  def heavy
    render plain: "#{Process.pid} #{Burner.burn(HEAVY_SECONDS)}"
  end

  def light
    render plain: "#{Process.pid} #{Burner.burn(LIGHT_SECONDS)}"
  end

  def up
    render plain: "#{Process.pid} 0"
  end
end
