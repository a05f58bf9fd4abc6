// Sonde's flame graph page. Reads the profile embedded by Sonde::Flamegraph
// once data_loader.js has inflated it (see lib/sonde/flamegraph/data.rb for
// its layout), folds the samples that pass the thread, state and label
// filters into a tree for the chosen sample type,
// and hands it to d3-flame-graph. Everything is computed from flat arrays
// of numbers: a filter change refolds in a few milliseconds even for long
// multi-thread profiles. With a timeline (timeline.js), a time range
// selected there folds only the timed samples whose moment falls in it.
(function () {
  "use strict";

  var NO_PARENT = -1;
  var SAMPLE_FIXED_FIELDS = 4; // node, thread, state, label set; then one value per sample type
  var MOMENT_FIXED_FIELDS = 2; // timeline moments: page sample, end (µs); then one value per type
  var NO_LABEL_SET = -1;
  var ABSENT = -1;
  var TOP_ROWS = 200;
  var MIN_FRAME_PX = 1; // d3-flame-graph draws no frame narrower than this
  var CELL_HEIGHT = 18;
  var ZOOM_TRANSITION_MS = 300;
  // As lib/sonde/quantities.rb shows values, so the page and `sonde report` agree.
  var UNITS = {
    duration: [["ns", 1], ["µs", 1e3], ["ms", 1e6], ["s", 1e9]],
    bytes: [["B", 1], ["KB", 1024], ["MB", 1048576], ["GB", 1073741824], ["TB", 1099511627776]]
  };

  // The profile's JSON, as data_loader.js inflated it; a page that cannot
  // read it says why where the flame graph would be.
  window.sondeProfileText.then(function (json) {
    performance.mark("sonde-parse-start");
    var data = JSON.parse(json);
    performance.mark("sonde-parse-end");
    return data;
  }).then(showPage, function (error) {
    var empty = document.getElementById("empty");
    empty.textContent = "The profile in this page could not be read: " + error.message;
    empty.hidden = false;
    throw error;
  });

  // Everything below works on the profile once it is read.
  function showPage(data) {
    var nodeCount = data.nodes.length / 2;
    // Each node comes with how far back its parent is (data.rb): its parent's own index from here on.
    for (var node = 0; node < nodeCount; node++) data.nodes[2 * node] = node - data.nodes[2 * node];
    var stride = SAMPLE_FIXED_FIELDS + data.types.length;
    var state = {
      type: data.defaultType,
      threads: data.threads.map(function () { return true; }),
      states: data.states.map(function () { return true; }),
      // Per label name, one flag per value and a last one for "(no name)".
      labels: data.labels.map(function (label) { return label[1].map(function () { return true; }).concat([true]); }),
      search: "",
      sort: "self",
      selectedFunction: -1,
      range: null // a time range of the timeline, {from, to} in µs, or null for the whole profile
    };
    var timeline = null;
    var chart = null;
    var current = null; // the tree on screen: {root, total, functions, pruned, focus}
    var currentSums = null; // what it was folded from, for refolds on zoom
    var refolding = false;

    function $(id) { return document.getElementById(id); }

    function escapeHtml(text) {
      return String(text).replace(/[&<>"']/g, function (c) {
        return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
      });
    }

    // In the format of type (data.formats; the chosen one by default): "153 µs",
    // "15.2 ms" for durations; "1.50 KB", "48.0 MB" for bytes; "1,000,000" for counts.
    function formatValue(value, type) {
      var units = UNITS[data.formats[type === undefined ? state.type : type]];
      if (!units) return Math.round(value).toLocaleString("en-US");
      for (var i = 0; i < units.length; i++) {
        var following = units[i + 1];
        var text = i === 0 ? String(Math.round(value)) : significant(value / units[i][1]);
        if (!following || Math.abs(parseFloat(text)) < following[1] / units[i][1]) return text + " " + units[i][0];
      }
    }

    function significant(value) {
      var abs = Math.abs(value);
      if (Math.round(abs * 100) / 100 < 10) return value.toFixed(2);
      if (Math.round(abs * 10) / 10 < 100) return value.toFixed(1);
      return value.toFixed(0);
    }

    function percent(value, total) {
      return total > 0 ? (100 * value / total).toFixed(1) + "%" : "0.0%";
    }

    // For each node: does its function already appear above it (recursion)?
    // Then it does not add to its function's total again. Fixed for the page,
    // so computed once, by an explicit-stack walk (stacks can be deep).
    var recursive = (function () {
      var result = new Uint8Array(nodeCount);
      var firstChild = new Int32Array(nodeCount + 1).fill(-1);
      var nextSibling = new Int32Array(nodeCount).fill(-1);
      for (var n = nodeCount - 1; n >= 0; n--) {
        var parent = data.nodes[2 * n] + 1; // slot 0 is the root
        nextSibling[n] = firstChild[parent];
        firstChild[parent] = n;
      }
      var onStack = new Int32Array(data.functions.length);
      var stack = [];
      for (var top = firstChild[0]; top !== -1; top = nextSibling[top]) {
        stack.push(top);
        while (stack.length) {
          var node = stack.pop();
          var fn;
          if (node < 0) { onStack[data.nodes[2 * (-node - 1) + 1]]--; continue; } // leaving -node-1
          fn = data.nodes[2 * node + 1];
          result[node] = onStack[fn] > 0 ? 1 : 0;
          onStack[fn]++;
          stack.push(-node - 1);
          for (var child = firstChild[node + 1]; child !== -1; child = nextSibling[child]) stack.push(child);
        }
      }
      return result;
    })();

    // Which label sets pass the label filters; the last slot is for samples
    // without labels (every name absent).
    function labelSetsPassing() {
      var sets = data.labelSets;
      var passing = new Uint8Array(sets.length + 1);
      for (var s = 0; s <= sets.length; s++) {
        var pass = 1;
        for (var n = 0; n < data.labels.length && pass; n++) {
          var value = s < sets.length ? sets[s][n] : ABSENT;
          if (!state.labels[n][value === ABSENT ? data.labels[n][1].length : value]) pass = 0;
        }
        passing[s] = pass;
      }
      return passing;
    }

    function labelSetSlot(set) { return set === NO_LABEL_SET ? data.labelSets.length : set; }

    // Calls visit(at, value) for each sample in scope: at is its offset in
    // data.samples (node, thread, state, label set), value its value of the
    // chosen type. The whole profile; in a time range, the timed samples
    // whose moment (end) falls in it, each with its own value.
    function eachSampleInScope(visit) {
      var samples = data.samples;
      var i;
      if (!state.range) {
        var offset = SAMPLE_FIXED_FIELDS + state.type;
        for (i = 0; i < samples.length; i += stride) visit(i, samples[i + offset]);
        return;
      }
      var width = MOMENT_FIXED_FIELDS + data.types.length;
      var from = state.range.from;
      var to = state.range.to;
      data.timeline.lanes.forEach(function (lane) {
        var moments = lane[1];
        for (i = 0; i < moments.length; i += width) {
          var end = moments[i + 1];
          if (end >= from && end <= to) visit(moments[i] * stride, moments[i + MOMENT_FIXED_FIELDS + state.type]);
        }
      });
    }

    // Sums the chosen value of the samples that pass the filters, per node
    // (self) and per subtree (total), and per function for the table.
    function sums() {
      var self = new Float64Array(nodeCount);
      var rootSelf = 0;
      var samples = data.samples;
      var setPasses = labelSetsPassing();
      eachSampleInScope(function (i, value) {
        if (!state.threads[samples[i + 1]]) return;
        var sampleState = samples[i + 2];
        if (sampleState >= 0 && !state.states[sampleState]) return;
        if (!setPasses[labelSetSlot(samples[i + 3])]) return;
        var node = samples[i];
        if (node === NO_PARENT) rootSelf += value;
        else self[node] += value;
      });
      // Parents come before their children, so one backward pass sums totals.
      var total = Float64Array.from(self);
      var nodes = data.nodes;
      var grand = rootSelf;
      for (var n = nodeCount - 1; n >= 0; n--) {
        var parent = nodes[2 * n];
        if (parent !== NO_PARENT) total[parent] += total[n];
        else grand += total[n];
      }
      var selfByFunction = new Float64Array(data.functions.length);
      var totalByFunction = new Float64Array(data.functions.length);
      for (n = 0; n < nodeCount; n++) {
        var fn = nodes[2 * n + 1];
        selfByFunction[fn] += self[n];
        if (!recursive[n]) totalByFunction[fn] += total[n];
      }
      return { self: self, total: total, rootSelf: rootSelf, grand: grand,
               functions: { self: selfByFunction, total: totalByFunction } };
    }

    // The tree d3-flame-graph reads ({n: name, v: total, c: children}), seen
    // from focus (a node, or NO_PARENT for the whole graph). Frames narrower
    // than MIN_FRAME_PX at this zoom are left out: they would not be drawn, and on
    // a long, many-thread profile they would be hundreds of thousands of
    // objects. Zooming in refolds from the clicked frame, so they come back;
    // then only the focus, its ancestors and its descendants are kept (the
    // zoom hides the rest anyway).
    function tree(totals, focus) {
      var scope = focus === NO_PARENT ? totals.grand : totals.total[focus];
      var threshold = scope * MIN_FRAME_PX / chartWidth();
      var ancestor = null;
      var inside = null;
      if (focus !== NO_PARENT) {
        ancestor = new Uint8Array(nodeCount);
        inside = new Uint8Array(nodeCount);
        for (var up = focus; up !== NO_PARENT; up = data.nodes[2 * up]) ancestor[up] = 1;
      }
      var root = { n: "all", v: totals.grand, s: totals.rootSelf, f: -1, i: NO_PARENT, c: [] };
      var objects = new Array(nodeCount);
      var pruned = 0;
      var nodes = data.nodes;
      for (var n = 0; n < nodeCount; n++) {
        var value = totals.total[n];
        if (value <= 0) continue;
        var parentIndex = nodes[2 * n];
        var parentObject = parentIndex === NO_PARENT ? root : objects[parentIndex];
        if (!parentObject) continue; // under a pruned frame
        if (inside) {
          inside[n] = n === focus || (parentIndex !== NO_PARENT && inside[parentIndex]) ? 1 : 0;
          if (!inside[n] && !ancestor[n]) continue;
        }
        if (value < threshold && !(ancestor && ancestor[n])) { pruned++; continue; }
        var fn = nodes[2 * n + 1];
        var object = { n: data.functions[fn][0], v: value, s: totals.self[n], f: fn, i: n, c: [] };
        objects[n] = object;
        parentObject.c.push(object);
      }
      return { root: root, total: totals.grand, functions: totals.functions, pruned: pruned, focus: focus };
    }

    function fold(focus) {
      currentSums = sums();
      return tree(currentSums, focus === undefined ? NO_PARENT : focus);
    }

    function tooltipHtml(d) {
      var object = d.data;
      var where = object.f >= 0 ? data.functions[object.f][1] : "";
      return "<b>" + escapeHtml(object.n) + "</b>" +
        (where ? "<div class=\"where\">" + escapeHtml(where) + "</div>" : "") +
        "<div>total " + formatValue(object.v) + " (" + percent(object.v, current.total) + ")" +
        " · self " + formatValue(object.s) + " (" + percent(object.s, current.total) + ")</div>";
    }

    function detailsText(d) {
      var object = d.data;
      var where = object.f >= 0 ? data.functions[object.f][1] : "";
      return object.n + (where ? "  " + where : "") + "  total " + formatValue(object.v) + " (" +
        percent(object.v, current.total) + "), self " + formatValue(object.s) + " (" + percent(object.s, current.total) + ")";
    }

    function matches(d, term) {
      return term !== "" && String(d.data.n).toLowerCase().indexOf(term.toLowerCase()) !== -1;
    }

    function chartWidth() {
      return $("chart").clientWidth || 960;
    }

    // What the search matches, counted on the whole profile (the drawn tree
    // is pruned): the total of the matching frames not under another match.
    function searchTotal(term) {
      var lower = term.toLowerCase();
      var matching = data.functions.map(function (f) { return String(f[0]).toLowerCase().indexOf(lower) !== -1; });
      var under = new Uint8Array(nodeCount);
      var sum = 0;
      for (var n = 0; n < nodeCount; n++) {
        var parent = data.nodes[2 * n];
        var above = parent !== NO_PARENT && (under[parent] || matching[data.nodes[2 * parent + 1]]);
        under[n] = above ? 1 : 0;
        if (!above && matching[data.nodes[2 * n + 1]]) sum += currentSums.total[n];
      }
      return sum;
    }

    function newChart() {
      var renderer = window.SondeFlamegraph;
      var tip = renderer.tooltip.defaultFlamegraphTooltip().html(tooltipHtml);
      return renderer.flamegraph()
        .width(chartWidth())
        .cellHeight(CELL_HEIGHT)
        .minFrameSize(1) // frames under a pixel wide are not drawn: thousands fewer SVG nodes
        .transitionDuration(0) // the first paint is not animated; zooms are (set below)
        .sort(true)
        .inverted($("inverted").checked)
        .tooltip(tip)
        .setSearchMatch(matches)
        .setLabelHandler(detailsText)
        .setDetailsElement($("details"))
        .onClick(onZoom)
        .setSearchHandler(function () {
          if (state.search === "") { $("details").textContent = ""; return; }
          var sum = searchTotal(state.search);
          $("details").textContent = "search \"" + state.search + "\": " + formatValue(sum) + " of " +
            formatValue(current.total) + " (" + percent(sum, current.total) + ")";
        });
    }

    function render() {
      if (timeline) timeline.showThreads(state.threads);
      performance.mark("sonde-fold-start");
      current = fold();
      performance.mark("sonde-fold-end");
      draw();
      renderTable();
      renderFilterTotals();
    }

    // Zooming into a frame whose tree was pruned refolds from that frame, so
    // what was too small to draw before is there now.
    function onZoom(d) {
      if (refolding || current.pruned === 0) return;
      var id = d.data.i;
      if (id === current.focus) return;
      current = tree(currentSums, id);
      refolding = true;
      try {
        draw();
        var target = null;
        window.SondeFlamegraph.select("#chart").datum().each(function (node) { if (node.data.i === id) target = node; });
        if (target && id !== NO_PARENT) chart.zoomTo(target);
      } finally {
        refolding = false;
      }
    }

    function draw() {
      var empty = current.total <= 0;
      $("empty").hidden = !empty;
      $("chart").hidden = empty;
      if (chart) chart.destroy();
      $("chart").textContent = "";
      chart = newChart();
      if (!empty) {
        window.SondeFlamegraph.select("#chart").datum(current.root).call(chart);
        performance.mark("sonde-chart-end");
        settle();
        chart.transitionDuration(ZOOM_TRANSITION_MS);
        if (state.search !== "") chart.search(state.search);
      }
    }

    // d3-flame-graph grows new frames from zero width and fills their labels
    // in transitions, even with a zero duration; the first paint should show
    // the finished graph, so finish those transitions now. Each frame's <g>
    // already carries its final width and name.
    function settle() {
      var select = window.SondeFlamegraph.select;
      document.querySelectorAll("#chart g.frame").forEach(function (g) {
        var rect = g.querySelector("rect");
        var label = g.querySelector("div");
        select(rect).interrupt();
        rect.setAttribute("width", g.getAttribute("width"));
        if (label) {
          select(label).interrupt();
          label.textContent = g.getAttribute("name");
        }
      });
    }

    function renderTable() {
      var totals = current.functions;
      var key = state.sort === "self" ? totals.self : totals.total;
      var other = state.sort === "self" ? totals.total : totals.self;
      var order = [];
      for (var fn = 0; fn < data.functions.length; fn++) if (totals.total[fn] > 0) order.push(fn);
      order.sort(function (a, b) { return key[b] - key[a] || other[b] - other[a]; });
      var rows = order.slice(0, TOP_ROWS).map(function (fn) {
        var f = data.functions[fn];
        return "<tr data-function=\"" + fn + "\"" + (fn === state.selectedFunction ? " class=\"selected\"" : "") + ">" +
          "<td class=\"num\">" + formatValue(totals.self[fn]) + "</td><td class=\"num\">" + percent(totals.self[fn], current.total) + "</td>" +
          "<td class=\"num\">" + formatValue(totals.total[fn]) + "</td><td class=\"num\">" + percent(totals.total[fn], current.total) + "</td>" +
          "<td class=\"fn\">" + escapeHtml(f[0]) + (f[1] ? " <small>" + escapeHtml(f[1]) + "</small>" : "") + "</td></tr>";
      });
      document.querySelector("#top tbody").innerHTML = rows.join("");
      document.querySelectorAll("#top th.sortable").forEach(function (th) {
        th.classList.toggle("sorted", th.getAttribute("data-sort") === state.sort);
      });
    }

    // Each thread, state and label checkbox shows how much of the chosen value it holds.
    function renderFilterTotals() {
      var byThread = new Float64Array(data.threads.length);
      var byState = new Float64Array(data.states.length);
      var byLabel = data.labels.map(function (label) { return new Float64Array(label[1].length + 1); });
      eachSampleInScope(function (i, value) {
        byThread[data.samples[i + 1]] += value;
        if (data.samples[i + 2] >= 0) byState[data.samples[i + 2]] += value;
        var set = data.samples[i + 3];
        for (var n = 0; n < data.labels.length; n++) {
          var index = set === NO_LABEL_SET ? ABSENT : data.labelSets[set][n];
          byLabel[n][index === ABSENT ? data.labels[n][1].length : index] += value;
        }
      });
      document.querySelectorAll("#threads .amount").forEach(function (span, i) { span.textContent = formatValue(byThread[i]); });
      document.querySelectorAll("#states .amount").forEach(function (span, i) { span.textContent = formatValue(byState[i]); });
      byLabel.forEach(function (amounts, n) {
        document.querySelectorAll("#label-" + n + " .amount").forEach(function (span, i) { span.textContent = formatValue(amounts[i]); });
      });
    }

    // One fieldset per label name: its values and "(no name)".
    function labelFilters() {
      data.labels.forEach(function (label, n) {
        var fieldset = document.createElement("fieldset");
        fieldset.id = "label-" + n;
        fieldset.className = "label-filter";
        var legend = document.createElement("legend");
        legend.textContent = label[0] + " ";
        ["all", "none"].forEach(function (which) {
          var button = document.createElement("button");
          button.type = "button";
          button.textContent = which;
          button.addEventListener("click", function () { setAll(fieldset.id, state.labels[n], which === "all"); });
          legend.appendChild(button);
          legend.appendChild(document.createTextNode(" "));
        });
        fieldset.appendChild(legend);
        $("filters").appendChild(fieldset);
        checkboxes(fieldset.id, label[1].concat(["(no " + label[0] + ")"]), state.labels[n]);
      });
    }

    function checkboxes(fieldsetId, labels, flags) {
      var fieldset = $(fieldsetId);
      labels.forEach(function (text, i) {
        var label = document.createElement("label");
        var input = document.createElement("input");
        input.type = "checkbox";
        input.checked = true;
        input.value = String(i);
        input.addEventListener("change", function () { flags[i] = input.checked; render(); });
        label.appendChild(input);
        label.appendChild(document.createTextNode(" " + text + " "));
        var amount = document.createElement("span");
        amount.className = "amount";
        label.appendChild(amount);
        fieldset.appendChild(label);
      });
      if (labels.length === 0) fieldset.hidden = true;
    }

    function setAll(fieldsetId, flags, value) {
      flags.forEach(function (_, i) { flags[i] = value; });
      document.querySelectorAll("#" + fieldsetId + " input").forEach(function (input) { input.checked = value; });
      render();
    }

    // The timeline of a profile with timed samples; else the note that says
    // how to get one. A timeline that fails to draw leaves the flame graph be.
    function setupTimeline() {
      if (!data.timeline || data.timeline.lanes.length === 0 || !window.SondeTimeline) {
        $("timeline-note").hidden = false;
        return;
      }
      $("timeline").hidden = false;
      performance.mark("sonde-timeline-start");
      try {
        timeline = window.SondeTimeline.create({
          data: data, root: $("timeline"), formatValue: formatValue,
          onSelect: function (range) { state.range = range; render(); }
        });
      } catch (error) {
        $("timeline").hidden = true;
        $("timeline-note").hidden = false;
        $("timeline-note").textContent = "The timeline could not be drawn: " + error;
        console.error(error);
      }
      performance.mark("sonde-timeline-end");
    }

    function setup() {
      $("title").textContent = data.title;
      setupTimeline();
      data.types.forEach(function (type, i) {
        var option = document.createElement("option");
        option.value = String(i);
        // Sonde's views by their title ("Live heap (heap-live-size)"), other types by name.
        option.textContent = data.titles[i] ? data.titles[i] + " (" + type[0] + ")" : type[0];
        $("type").appendChild(option);
      });
      $("type").value = String(state.type);
      $("type").addEventListener("change", function () { state.type = Number($("type").value); render(); });
      checkboxes("threads", data.threads.map(function (t) { return t[1] === null ? t[0] : t[0] + " (" + t[1] + ")"; }), state.threads);
      checkboxes("states", data.states, state.states);
      labelFilters();
      document.querySelector("[data-all=threads]").addEventListener("click", function () { setAll("threads", state.threads, true); });
      document.querySelector("[data-none=threads]").addEventListener("click", function () { setAll("threads", state.threads, false); });
      $("inverted").addEventListener("change", render);
      $("reset-zoom").addEventListener("click", function () {
        if (!chart || current.total <= 0) return;
        if (current.focus !== NO_PARENT) { current = tree(currentSums, NO_PARENT); draw(); } else chart.resetZoom();
      });
      $("search").addEventListener("input", function () {
        state.search = $("search").value.trim();
        state.selectedFunction = -1;
        if (!chart || current.total <= 0) return;
        if (state.search === "") chart.clear(); else chart.search(state.search);
      });
      document.querySelectorAll("#top th.sortable").forEach(function (th) {
        th.addEventListener("click", function () { state.sort = th.getAttribute("data-sort"); renderTable(); });
      });
      // A row of the table highlights that function in the flame graph.
      document.querySelector("#top tbody").addEventListener("click", function (event) {
        var row = event.target.closest("tr");
        if (!row) return;
        state.selectedFunction = Number(row.getAttribute("data-function"));
        $("search").value = data.functions[state.selectedFunction][0];
        state.search = $("search").value;
        if (chart && current.total > 0) chart.search(state.search);
        renderTable();
      });
      var resizeTimer = null;
      window.addEventListener("resize", function () {
        clearTimeout(resizeTimer);
        resizeTimer = setTimeout(function () {
          if (timeline) timeline.draw();
          render();
        }, 150);
      });
    }

    setup();
    render();
    // For tests and for the curious: when the first frame with the graph was painted.
    requestAnimationFrame(function () {
      window.sondeFirstPaintMs = performance.now();
    });
    window.sonde = { data: data, state: state, render: render, current: function () { return current; }, timeline: timeline };
  }
})();
