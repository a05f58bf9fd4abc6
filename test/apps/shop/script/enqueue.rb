# frozen_string_literal: true

# Enqueues jobs as the web app would: ruby script/enqueue.rb REPORTS MAILS
# (REDIS_URL says where Redis is). Interleaved, so that both kinds run all along.
require_relative "../config/environment"

reports, mails = ARGV.map { |n| Integer(n) }
[reports, mails].max.times do |i|
  ReportJob.perform_async if i < reports
  MailJob.perform_async if i < mails
end
