// Sonde's timeline view, above the flame graph: one lane per thread on a
// shared time axis, coloured by what the thread was doing (running, waiting
// for the GVL, sleeping, blocked, in GC), with its label spans (endpoint,
// job...) and GC pauses in a strip beneath. Reads data.timeline (see
// lib/sonde/flamegraph/timeline.rb): each moment points at a page sample,
// which holds its stack, thread, state and labels.
//
// Drawn on one canvas, by pixel column: each wall sample adds the time it
// covers to its columns' per-state sums, and each column takes the colour
// of the state that holds most of it. A lane of 10,000 samples is that many
// additions and a few hundred rectangles, never a DOM node per sample.
//
// A drag selects a time range (options.onSelect gets {from, to} in
// microseconds, then null when a click, Escape or "Clear" clears it);
// "Zoom to selection" spreads that range over the width, "Zoom out" shows
// the whole again; hovering a lane shows the sample nearest the pointer on
// that thread. The page's thread filter hides lanes (showThreads).
(function () {
  "use strict";

  var STATE_COLORS = {
    "running": "#2f9e44", "waiting for gvl": "#f08c00", "sleeping": "#a5d8ff",
    "blocked": "#e03131", "gc": "#7048e8"
  };
  var LEGEND_STATES = ["running", "waiting for gvl", "sleeping", "blocked", "gc"];
  var OTHER_COLOR = "#adb5bd";
  var GC_MARK_COLOR = "#5f3dc4";
  var SPAN_COLORS = ["#ffe8cc", "#d0ebff", "#d3f9d8", "#f3d9fa", "#fff3bf", "#c5f6fa", "#ffdeeb", "#e5dbff"];
  var GRID_COLOR = "#e9ecef";
  var TEXT_COLOR = "#495057";
  var MIN_GUTTER = 150;  // px left of the plot, for the lane names: widened to fit them,
  var MAX_GUTTER = 260;  // up to this
  var GUTTER = MIN_GUTTER;
  var RIGHT_MARGIN = 12;
  var AXIS = 20;         // px of the time axis above the lanes
  var BAND = 18;         // a lane's state band
  var STRIP = 12;        // its label spans and GC pauses, below the band
  var LANE = BAND + STRIP + 6;
  var TICK_PX = 110;     // about one axis tick per this many px
  var MIN_GC_PX = 2;     // a GC pause stays visible at any zoom
  var MIN_SPAN_TEXT_PX = 40;
  var TOP_FRAMES = 12;
  var DRAG_PX = 4;       // a smaller move is a click
  var NO_NODE = -1;
  var SAMPLE_FIXED_FIELDS = 4; // node, thread, state, label set (page.js)
  var MOMENT_FIXED_FIELDS = 2; // page sample, end; then one value per type
  var NS_PER_US = 1000;

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function stateColor(name) {
    return STATE_COLORS[name] || OTHER_COLOR;
  }

  // An axis label: "0.5 s", "12.250 s", "350 ms", in the unit of the
  // largest label, with the digits the step between ticks needs.
  function formatTime(us, step, largest) {
    var unit = largest >= 1e6 ? [1e6, "s"] : largest >= 1e3 ? [1e3, "ms"] : [1, "µs"];
    var digits = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / unit[0]) + 1e-9)));
    return (us / unit[0]).toFixed(digits) + " " + unit[1];
  }

  // A range's edges in seconds, to a hundredth of its length or better,
  // and its length in the unit it reads best in: "19.96 s to 29.98 s
  // (10.02 s)", "1.094 s to 1.512 s (417.7 ms)".
  function formatRange(from, to) {
    var length = Math.max(1, to - from);
    var digits = Math.max(2, Math.min(7, 2 + Math.ceil(-Math.log10(length / 1e6))));
    var unit = length >= 1e6 ? [1e6, "s", 2] : length >= 1e3 ? [1e3, "ms", 1] : [1, "µs", 0];
    return (from / 1e6).toFixed(digits) + " s to " + (to / 1e6).toFixed(digits) + " s (" +
      (length / unit[0]).toFixed(unit[2]) + " " + unit[1] + ")";
  }

  function niceStep(raw) {
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * power >= raw) return steps[i] * power;
    return 10 * power;
  }

  // Wide enough for the longest lane name in the names' own font (a
  // thread id after a repeated name must not be cut off), within bounds.
  function gutterFor(lanes, names) {
    var context = document.createElement("canvas").getContext("2d");
    var style = window.getComputedStyle(names);
    context.font = "600 " + style.fontSize + " " + style.fontFamily;
    var widest = lanes.reduce(function (most, lane) { return Math.max(most, context.measureText(lane.name).width); }, 0);
    return Math.max(MIN_GUTTER, Math.min(MAX_GUTTER, Math.ceil(widest) + 16));
  }

  // One thread's moments as typed arrays, in order of end.
  function laneOf(data, entry, paintType, name) {
    var thread = entry[0];
    var flat = entry[1];
    var width = MOMENT_FIXED_FIELDS + data.types.length;
    var count = flat.length / width;
    var sampleStride = SAMPLE_FIXED_FIELDS + data.types.length;
    var lane = {
      thread: thread, name: name, count: count, flat: flat, width: width,
      sample: new Int32Array(count), start: new Float64Array(count), end: new Float64Array(count),
      state: new Int32Array(count), set: new Int32Array(count), spans: [], gcs: []
    };
    var gcState = data.states.indexOf("gc");
    var span = null;
    for (var i = 0; i < count; i++) {
      var at = i * width;
      var sample = flat[at];
      var end = flat[at + 1];
      var covers = paintType >= 0 ? Math.max(0, flat[at + MOMENT_FIXED_FIELDS + paintType]) / NS_PER_US : 0;
      lane.sample[i] = sample;
      lane.end[i] = end;
      lane.start[i] = end - covers;
      lane.state[i] = data.samples[sample * sampleStride + 2];
      lane.set[i] = data.samples[sample * sampleStride + 3];
      if (gcState >= 0 && lane.state[i] === gcState && covers > 0) lane.gcs.push([lane.start[i], end]);
      // A label span: consecutive moments with the same labels.
      if (span && span.set === lane.set[i]) {
        span.to = Math.max(span.to, end);
      } else {
        span = lane.set[i] >= 0 ? { set: lane.set[i], from: lane.start[i], to: end } : null;
        if (span) lane.spans.push(span);
      }
    }
    return lane;
  }

  function create(options) {
    var data = options.data;
    var root = options.root;
    var canvas = root.querySelector("canvas");
    var names = root.querySelector(".timeline-names");
    var overlay = root.querySelector(".timeline-selection");
    var tip = root.querySelector(".timeline-tip");
    var rangeText = root.querySelector(".timeline-range");
    var clearButton = root.querySelector(".timeline-clear");
    var zoomButton = root.querySelector(".timeline-zoom");
    var unzoomButton = root.querySelector(".timeline-unzoom");
    var wall = data.types.findIndex(function (t) { return t[0] === "wall-time"; });
    var cpu = data.types.findIndex(function (t) { return t[0] === "cpu-time"; });
    // The time a moment covers: its wall time; its CPU time in a profile without wall time.
    var paintType = wall >= 0 ? wall : cpu;
    // Named as the data names them: by thread id too where names repeat (a merged fleet's "main"s).
    var allLanes = data.timeline.lanes.map(function (entry, i) {
      return laneOf(data, entry, paintType, data.timeline.names[i]);
    });
    var lanes = allLanes; // those of the threads shown
    GUTTER = gutterFor(allLanes, names);
    var whole = { from: 0, to: Math.max(1, data.timeline.endUs) };
    var view = whole;
    var range = null;
    var drag = null;
    var plotWidth = 0;
    var drawMs = 0;

    function scale() { return plotWidth / (view.to - view.from); }
    function xOf(us) { return GUTTER + (us - view.from) * scale(); }
    function timeAt(x) { return view.from + (x - GUTTER) / scale(); }
    function laneTop(i) { return AXIS + i * LANE; }

    function legend() {
      var states = LEGEND_STATES.concat(data.states.filter(function (s) { return LEGEND_STATES.indexOf(s) < 0; }));
      var items = states.map(function (s) {
        return "<span class=\"legend-item\"><i style=\"background:" + stateColor(s) + "\"></i>" + escapeHtml(s) + "</span>";
      });
      items.push("<span class=\"legend-item\"><i class=\"strip\" style=\"background:" + GC_MARK_COLOR + "\"></i>GC pause</span>");
      items.push("<span class=\"legend-item\"><i class=\"strip\" style=\"background:" + SPAN_COLORS[0] + "\"></i>labels (endpoint, job...)</span>");
      root.querySelector(".timeline-legend").innerHTML = items.join("");
    }

    function laneNames() {
      names.innerHTML = "";
      lanes.forEach(function (lane, i) {
        var div = document.createElement("div");
        var thread = data.threads[lane.thread];
        div.className = "timeline-name";
        div.style.top = laneTop(i) + "px";
        div.style.height = BAND + "px";
        div.style.width = (GUTTER - 10) + "px";
        div.textContent = lane.name;
        div.title = thread[1] === null ? thread[0] : thread[0] + " (thread " + thread[1] + ")";
        div.setAttribute("data-thread", String(lane.thread));
        names.appendChild(div);
      });
    }

    function drawAxis(ctx, width, height) {
      var step = niceStep((view.to - view.from) * TICK_PX / plotWidth);
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      ctx.fillStyle = TEXT_COLOR;
      for (var t = Math.ceil(view.from / step) * step; t <= view.to; t += step) {
        var x = Math.round(xOf(t));
        ctx.fillStyle = GRID_COLOR;
        ctx.fillRect(x, AXIS - 4, 1, height - AXIS + 4);
        var text = formatTime(t, step, view.to);
        if (x + 3 + ctx.measureText(text).width > width) continue;
        ctx.fillStyle = TEXT_COLOR;
        ctx.fillText(text, x + 3, AXIS / 2);
      }
    }

    // Each column of the band takes the colour of the state that covers most of it.
    function drawBand(ctx, lane, top) {
      var columns = Math.floor(plotWidth);
      var slots = data.states.length + 1; // the last: no state label
      var sums = new Float32Array(columns * slots);
      var perUs = scale();
      for (var i = 0; i < lane.count; i++) {
        if (lane.start[i] >= lane.end[i]) continue;
        var x0 = Math.max(0, (lane.start[i] - view.from) * perUs);
        var x1 = Math.min(columns, (lane.end[i] - view.from) * perUs);
        if (x1 <= x0) continue;
        var slot = lane.state[i] >= 0 ? lane.state[i] : slots - 1;
        var last = Math.min(columns - 1, Math.ceil(x1) - 1);
        for (var c = Math.floor(x0); c <= last; c++) {
          sums[c * slots + slot] += Math.min(x1, c + 1) - Math.max(x0, c);
        }
      }
      var runStart = 0;
      var runSlot = -1;
      for (c = 0; c <= columns; c++) {
        var best = -1;
        if (c < columns) {
          var most = 0;
          for (var s = 0; s < slots; s++) if (sums[c * slots + s] > most) { most = sums[c * slots + s]; best = s; }
        }
        if (best === runSlot) continue;
        if (runSlot >= 0) {
          ctx.fillStyle = stateColor(data.states[runSlot]);
          ctx.fillRect(GUTTER + runStart, top, c - runStart, BAND);
        }
        runStart = c;
        runSlot = best;
      }
    }

    function spanText(set) {
      return data.labels.map(function (label, n) {
        var value = data.labelSets[set][n];
        return value < 0 ? null : label[0] + "=" + label[1][value];
      }).filter(Boolean).join(", ");
    }

    function drawStrip(ctx, lane, top) {
      var y = top + BAND + 1;
      var right = GUTTER + plotWidth;
      ctx.font = "10px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      lane.spans.forEach(function (span) {
        var x0 = Math.max(GUTTER, Math.round(xOf(span.from)));
        var x1 = Math.min(right, Math.round(xOf(span.to)));
        if (x1 <= x0) x1 = x0 + 1;
        if (x0 >= right) return;
        ctx.fillStyle = SPAN_COLORS[span.set % SPAN_COLORS.length];
        ctx.fillRect(x0, y, Math.max(1, x1 - x0 - 1), STRIP - 2);
        if (x1 - x0 >= MIN_SPAN_TEXT_PX) {
          ctx.save();
          ctx.beginPath();
          ctx.rect(x0, y, x1 - x0 - 1, STRIP - 2);
          ctx.clip();
          ctx.fillStyle = TEXT_COLOR;
          ctx.fillText(spanText(span.set), x0 + 2, y + (STRIP - 2) / 2);
          ctx.restore();
        }
      });
      ctx.fillStyle = GC_MARK_COLOR;
      lane.gcs.forEach(function (gc) {
        var x0 = Math.max(GUTTER, xOf(gc[0]));
        var x1 = Math.min(right, xOf(gc[1]));
        if (x1 < GUTTER || x0 > right) return;
        ctx.fillRect(Math.floor(x0), y, Math.max(MIN_GC_PX, Math.round(x1 - x0)), STRIP - 2);
      });
    }

    function draw() {
      var started = performance.now();
      var width = Math.max(GUTTER + 100, root.querySelector(".timeline-lanes").clientWidth);
      var height = AXIS + lanes.length * LANE;
      var ratio = window.devicePixelRatio || 1;
      plotWidth = width - GUTTER - RIGHT_MARGIN;
      canvas.style.width = width + "px";
      canvas.style.height = height + "px";
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      var ctx = canvas.getContext("2d");
      ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
      ctx.clearRect(0, 0, width, height);
      drawAxis(ctx, width, height);
      lanes.forEach(function (lane, i) {
        drawBand(ctx, lane, laneTop(i));
        drawStrip(ctx, lane, laneTop(i));
      });
      laneNames();
      showRange();
      drawMs = performance.now() - started;
    }

    // The moment on lane nearest time t: one whose span holds t (the
    // shortest), else the one whose start or end is closest.
    function nearest(lane, t) {
      var low = 0;
      var high = lane.count;
      while (low < high) {
        var mid = (low + high) >> 1;
        if (lane.end[mid] < t) low = mid + 1; else high = mid;
      }
      var best = -1;
      var bestSpan = Infinity;
      for (var i = low; i < lane.count && i < low + 16; i++) {
        if (lane.start[i] <= t && lane.end[i] - lane.start[i] < bestSpan) { best = i; bestSpan = lane.end[i] - lane.start[i]; }
      }
      if (best >= 0) return best;
      var distance = Infinity;
      [low - 1, low].forEach(function (i) {
        if (i < 0 || i >= lane.count) return;
        var d = Math.min(Math.abs(lane.end[i] - t), Math.abs(lane.start[i] - t));
        if (d < distance) { distance = d; best = i; }
      });
      return best;
    }

    function describe(lane, i) {
      var stride = SAMPLE_FIXED_FIELDS + data.types.length;
      var base = lane.sample[i] * stride;
      var stateName = lane.state[i] >= 0 ? data.states[lane.state[i]] : "(no state)";
      var values = [];
      data.types.forEach(function (type, k) {
        var value = lane.flat[i * lane.width + MOMENT_FIXED_FIELDS + k];
        if (value) values.push(escapeHtml(type[0]) + " " + escapeHtml(options.formatValue(value, k)));
      });
      var frames = [];
      var depth = 0;
      for (var node = data.samples[base]; node !== NO_NODE; node = data.nodes[2 * node]) {
        if (depth++ < TOP_FRAMES) {
          var f = data.functions[data.nodes[2 * node + 1]];
          frames.push("<div>" + escapeHtml(f[0]) + (f[1] ? " <span class=\"where\">" + escapeHtml(f[1]) + "</span>" : "") + "</div>");
        }
      }
      if (depth > TOP_FRAMES) frames.push("<div class=\"where\">… " + (depth - TOP_FRAMES) + " more</div>");
      var labels = lane.set[i] >= 0 ? "<div>" + escapeHtml(spanText(lane.set[i])) + "</div>" : "";
      return "<b>" + escapeHtml(lane.name) + "</b> at " + (lane.end[i] / 1e6).toFixed(3) + " s" +
        " · <span class=\"state\"><i style=\"background:" + stateColor(stateName) + "\"></i>" + escapeHtml(stateName) + "</span>" +
        "<div class=\"where\">" + values.join(" · ") + "</div>" + labels + "<div class=\"frames\">" + frames.join("") + "</div>";
    }

    function pointer(event) {
      var box = canvas.getBoundingClientRect();
      return { x: event.clientX - box.left, y: event.clientY - box.top };
    }

    function laneAt(y) {
      var i = Math.floor((y - AXIS) / LANE);
      if (i < 0 || i >= lanes.length || y - laneTop(i) > BAND + STRIP) return -1;
      return i;
    }

    function hover(event) {
      var p = pointer(event);
      var i = laneAt(p.y);
      if (drag || i < 0 || p.x < GUTTER || p.x > GUTTER + plotWidth) { tip.hidden = true; return; }
      var moment = nearest(lanes[i], timeAt(p.x));
      if (moment < 0) { tip.hidden = true; return; }
      tip.innerHTML = describe(lanes[i], moment);
      tip.hidden = false;
      var left = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      var top = event.clientY + 14 + tip.offsetHeight > window.innerHeight ? event.clientY - tip.offsetHeight - 8 : event.clientY + 14;
      tip.style.left = Math.max(0, left) + "px";
      tip.style.top = Math.max(0, top) + "px";
    }

    function showRange() {
      clearButton.hidden = !range;
      zoomButton.hidden = !range || (range.from === view.from && range.to === view.to);
      unzoomButton.hidden = view === whole;
      if (!range) {
        overlay.hidden = true;
        rangeText.textContent = "Drag across the lanes to see that time in the flame graph.";
        return;
      }
      var x0 = Math.max(GUTTER, xOf(range.from));
      var x1 = Math.min(GUTTER + plotWidth, xOf(range.to));
      overlay.hidden = false;
      overlay.style.left = x0 + "px";
      overlay.style.width = Math.max(1, x1 - x0) + "px";
      overlay.style.height = canvas.style.height;
      rangeText.textContent = "Selected " + formatRange(range.from, range.to) + ": the flame graph shows the samples taken in it. " +
        "Click or press Esc to clear.";
    }

    function select(from, to) {
      var low = Math.max(view.from, Math.min(from, to));
      var high = Math.min(view.to, Math.max(from, to));
      range = { from: low, to: high };
      showRange();
      options.onSelect(range);
    }

    // Only the lanes of the threads whose flag is set (the page's thread filter).
    function showThreads(flags) {
      var shown = allLanes.filter(function (lane) { return flags[lane.thread]; });
      if (shown.length === lanes.length && shown.every(function (lane, i) { return lane === lanes[i]; })) return;
      lanes = shown;
      draw();
    }

    // The time axis shows view (a range, or the whole profile).
    function zoom(to) {
      view = to && to.to > to.from ? { from: to.from, to: to.to } : whole;
      draw();
    }

    function clear() {
      if (!range) return;
      range = null;
      showRange();
      options.onSelect(null);
    }

    canvas.addEventListener("mousedown", function (event) {
      if (event.button !== 0) return;
      var p = pointer(event);
      if (p.x < GUTTER) return;
      event.preventDefault();
      drag = { x: Math.min(p.x, GUTTER + plotWidth), moved: false };
      tip.hidden = true;
    });
    window.addEventListener("mousemove", function (event) {
      if (!drag) return;
      var x = Math.max(GUTTER, Math.min(GUTTER + plotWidth, pointer(event).x));
      if (Math.abs(x - drag.x) < DRAG_PX && !drag.moved) return;
      drag.moved = true;
      overlay.hidden = false;
      overlay.style.left = Math.min(x, drag.x) + "px";
      overlay.style.width = Math.abs(x - drag.x) + "px";
      overlay.style.height = canvas.style.height;
    });
    window.addEventListener("mouseup", function (event) {
      if (!drag) return;
      var start = drag;
      drag = null;
      var x = Math.max(GUTTER, Math.min(GUTTER + plotWidth, pointer(event).x));
      if (start.moved) select(timeAt(start.x), timeAt(x)); else clear();
    });
    canvas.addEventListener("mousemove", hover);
    canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
    clearButton.addEventListener("click", clear);
    zoomButton.addEventListener("click", function () { zoom(range); });
    unzoomButton.addEventListener("click", function () { zoom(null); });
    document.addEventListener("keydown", function (event) { if (event.key === "Escape") clear(); });

    legend();
    draw();
    return {
      draw: draw, select: select, clear: clear, zoom: zoom, showThreads: showThreads, xOf: xOf, timeAt: timeAt,
      range: function () { return range; },
      drawMs: function () { return drawMs; },
      // Where each lane is drawn, in CSS pixels of the canvas, for tests.
      lanes: function () {
        return lanes.map(function (lane, i) {
          return { thread: lane.thread, name: lane.name, moments: lane.count, top: laneTop(i), band: BAND, strip: STRIP };
        });
      },
      stateColor: stateColor,
      spanColor: function (set) { return SPAN_COLORS[set % SPAN_COLORS.length]; },
      gcColor: GC_MARK_COLOR
    };
  }

  window.SondeTimeline = { create: create };
})();
