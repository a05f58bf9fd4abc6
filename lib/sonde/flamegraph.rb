# frozen_string_literal: true

require "json"
require "zlib"
require "sonde/version"
require "sonde/errors"
require "sonde/pprof"
require "sonde/output_file"
require "sonde/converters/stacks"
require "sonde/flamegraph/data"

module Sonde
  # The flame graph page of `sonde flamegraph`: one self-contained HTML file
  # (renderer, styles, scripts and profile inlined) that works from file://
  # with no network. The renderer is d3-flame-graph, vendored as a built
  # bundle in lib/sonde/assets/ (script/vendor-flamegraph rebuilds it).
  # Above the flame graph, the timeline of a profile whose samples keep
  # their moments (flamegraph/timeline.js); a note when they do not.
  #
  #   Sonde::Flamegraph.write_html("app.pprof", "app.html")
  module Flamegraph
    ASSETS_DIR = File.expand_path("assets", __dir__)
    PAGE_DIR = File.expand_path("flamegraph", __dir__)
    # Placeholders of page.html, each replaced by one inlined part.
    PARTS = {
      "{{TITLE}}" => :title_html, "{{RENDERER_CSS}}" => :renderer_css, "{{PAGE_CSS}}" => :page_css,
      "{{RENDERER_JS}}" => :renderer_js, "{{DATA_LOADER_JS}}" => :data_loader_js,
      "{{TIMELINE_JS}}" => :timeline_js, "{{PAGE_JS}}" => :page_js,
      "{{DATA}}" => :data_deflated
    }.freeze

    module_function

    # Reads the pprof file at pprof_path and writes the page to html_path
    # (atomically: a reader never sees half a page). Returns html_path.
    # Raises Pprof::DecodeError for a file that is not a pprof profile,
    # SystemCallError when a file cannot be read or written.
    def write_html(pprof_path, html_path, title: nil)
      profile = Pprof.read(pprof_path)
      write_atomically(html_path, html(profile, title: title || File.basename(pprof_path.to_s)))
    end

    # The data a page embeds, as page.js reads it (the layout is data.rb's).
    def embedded_data(html)
      block = html[%r{<script type="application/x-sonde-deflated" id="sonde-data">([^<]*)</script>}, 1]
      raise ArgumentError, "not a Sonde flame graph page: it has no data block" unless block

      JSON.parse(Zlib::Inflate.inflate(block.unpack1("m0")))
    end

    # The page for a decoded profile, as a String.
    def html(profile, title:)
      Page.new(Data.new(Converters::Stacks.new(profile, labels: :all), title: title.to_s, profile: profile)).render
    end

    # app.pprof -> app.html, beside it.
    def default_output(pprof_path)
      base = pprof_path.to_s.sub(/\.pprof(\.gz)?\z|\.pb(\.gz)?\z/, "")
      "#{base}.html"
    end

    # The page's UTF-8 bytes as they are (OutputFile writes binary: a
    # default_internal or default_external would transcode them otherwise).
    def write_atomically(path, text)
      OutputFile.write(path, text)
    end

    # A part of the page (template, styles, scripts): UTF-8 on disk, read as
    # such whatever Encoding.default_external and default_internal say.
    def read_part(path)
      File.read(path, mode: "rb").force_encoding(Encoding::UTF_8)
    end

    # Opens path in the user's browser without waiting for it: $BROWSER,
    # else xdg-open (Linux) or open (macOS). Returns false when none exists.
    def open_in_browser(path)
      url = "file://#{File.expand_path(path)}"
      command = [ENV.fetch("BROWSER", nil), "xdg-open", "open"].compact.find { |name| executable?(name) }
      return false unless command

      Process.detach(Process.spawn(command, url, in: File::NULL, out: File::NULL, err: File::NULL))
      true
    rescue SystemCallError
      false
    end

    def executable?(name)
      return File.executable?(name) if name.include?("/")

      ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? { |dir| File.executable?(File.join(dir, name)) }
    end

    # Fills page.html's placeholders.
    class Page
      def initialize(data)
        @data = data
      end

      def render
        template = Flamegraph.read_part(File.join(PAGE_DIR, "page.html"))
        template.gsub(Regexp.union(PARTS.keys)) { |placeholder| send(PARTS.fetch(placeholder)) }
      end

      private

      def title_html
        "#{escape_html(data_hash.fetch("title"))} - Sonde flame graph"
      end

      def renderer_css
        asset("flamegraph.css")
      end

      def renderer_js
        script_safe(asset("flamegraph.js"))
      end

      def page_css
        Flamegraph.read_part(File.join(PAGE_DIR, "page.css"))
      end

      def page_js
        script_safe(Flamegraph.read_part(File.join(PAGE_DIR, "page.js")))
      end

      def data_loader_js
        script_safe(Flamegraph.read_part(File.join(PAGE_DIR, "data_loader.js")))
      end

      def timeline_js
        script_safe(Flamegraph.read_part(File.join(PAGE_DIR, "timeline.js")))
      end

      # The data as JSON, deflated (zlib) and in base64: a browser tokenizes
      # a 2.7 MB inline block in about 200 ms before any script runs, its
      # quarter in about 50, and inflates it in about 80 (data_loader.js,
      # while the scripts after it compile). Base64 has no "<", so nothing
      # in a name can end the block early.
      def data_deflated
        [Zlib::Deflate.deflate(JSON.generate(data_hash), Zlib::DEFAULT_COMPRESSION)].pack("m0")
      end

      def data_hash
        @data_hash ||= @data.to_h
      end

      def asset(name)
        Flamegraph.read_part(File.join(ASSETS_DIR, name))
      end

      # An inline script ends at the first "</script"; "<\/" means "</" in JS strings and regexps.
      def script_safe(source)
        source.gsub(%r{</(?=script)}i, "<\\/")
      end

      def escape_html(text)
        text.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;").gsub('"', "&quot;")
      end
    end
  end
end
