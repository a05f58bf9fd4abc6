# frozen_string_literal: true

# The light job: 10 ms of CPU, a quarter of ReportJob's.
class MailJob
  include Sidekiq::Job

  SECONDS = 0.010

  # Records its class and the CPU it used, so the test knows when every
  # job ran and what each cost.
  def perform
    used = Burner.burn(SECONDS)
    Sidekiq.redis { |redis| redis.call("RPUSH", "shop:done", "#{self.class.name} #{used}") }
  end
end
