# frozen_string_literal: true

module SondeBench
  # Section 1c of RESULTS.md: what labels cost a Rack request, from the
  # labels workload (bench/workloads/labels.rb) on each Ruby.
  class LabelsReport
    MICROSECONDS_PER_SECOND = 1_000_000

    def initialize(labels)
      @labels = labels
    end

    def to_markdown
      rows = @labels.runs.flat_map { |ruby, run| rows(ruby, run.details) }
      details = @labels.runs.values.first.details
      <<~MD
        ## 1c. What labels cost a Rack request

        `labels` workload, one process per Ruby: a tiny Rack app (#{details.dig("rows", "tiny")} rows per response,
        about 10 µs a request) and a page (#{details.dig("rows", "page")} rows, about 0.3 ms), each called directly
        without Sonde::Middleware, with it (every request labelled with its endpoint), with it and three
        more fixed labels, and with it inside a trace context of the request's own (a span per request, as
        under a tracer: Sonde's part, not the tracer's lookup), while Sonde samples at #{details["rate_hz"]} Hz, in #{details["rounds"]} shuffled rounds; the
        calling thread's CPU per request, fastest round (and median). The bare app runs twice: the
        second, "#{details["control"]}", is the noise between two identical variants, to hold the
        labelled ones against.

        | Ruby | app | variant | µs per request, fastest (median) | fastest vs none | median vs none |
        |---|---|---|---|---|---|
        #{rows.join("\n")}
      MD
    end

    private

    def rows(ruby, details)
      details.fetch("per_request_s").flat_map do |app, variants|
        base = variants.fetch("no middleware")
        variants.map do |name, times|
          "| #{ruby.series} | #{app} | #{name} | #{format("%.2f (%.2f)", times["fastest_s"] * MICROSECONDS_PER_SECOND,
                                                         times["median_s"] * MICROSECONDS_PER_SECOND)} | " \
            "#{format("%.3f", times["fastest_s"] / base["fastest_s"])} | " \
            "#{format("%.3f", times["median_s"] / base["median_s"])} |"
        end
      end
    end
  end
end
