# frozen_string_literal: true

# The heavy job: 80 ms of CPU on its thread's clock.
class ReportJob
  include Sidekiq::Job

  SECONDS = 0.080

  # Records its class and the CPU it used, so the test knows when every
  # job ran and what each cost.
  def perform
    used = Burner.burn(SECONDS)
    Sidekiq.redis { |redis| redis.call("RPUSH", "shop:done", "#{self.class.name} #{used}") }
  end
end
