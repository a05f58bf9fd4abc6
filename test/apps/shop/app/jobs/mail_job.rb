# frozen_string_literal: true

# The light job: 20 ms of CPU, a quarter of ReportJob's (several kernel ticks each:
# bursts shorter than a tick are sampled less evenly, docs/reading-profiles.md, "CPU timers").
class MailJob
  include Sidekiq::Job

  SECONDS = 0.020

  # Records its class and the CPU it used, so the test knows when every
  # job ran and what each cost.
  def perform
    used = Burner.burn(SECONDS)
    Sidekiq.redis { |redis| redis.call("RPUSH", "shop:done", "#{self.class.name} #{used}") }
  end
end
