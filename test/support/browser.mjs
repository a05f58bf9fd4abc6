// Drives headless Chromium for Sonde's browser tests through puppeteer-core
// (installed by script/test-node-deps). Reads one JSON job on stdin, prints
// one JSON result on stdout:
//   {"chromium": path, "profileDir": dir, "script": "flamegraph"|"timeline"|"speedscope", ...}
// The flags keep Chromium off the network: without them it hangs on a closed one.
import { createRequire } from "node:module";
import fs from "node:fs";

const require = createRequire(process.env.SONDE_NODE_MODULES + "/");
const puppeteer = require("puppeteer-core");

const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--disable-quic", "--disable-dev-shm-usage"
];
const TIMEOUT_MS = 15000;

const job = JSON.parse(fs.readFileSync(0, "utf8"));

async function withPage(fn) {
  const browser = await puppeteer.launch({
    executablePath: job.chromium, headless: true, userDataDir: job.profileDir,
    args: FLAGS.concat(job.extraFlags || []), defaultViewport: { width: 1400, height: 900 }
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    page.on("console", (message) => { if (message.type() === "error") errors.push(message.text()); });
    page.on("dialog", (dialog) => { errors.push("dialog: " + dialog.message()); dialog.dismiss(); });
    return await fn(page, errors);
  } finally {
    await browser.close();
  }
}

// The flame graph page: first paint time, the frames drawn, the sample type
// menu, a click to zoom, a switch to another type (wall-time, alloc-samples...),
// a screenshot.
async function flamegraph(page, errors) {
  // A user opens a page in a browser already running: a small page first,
  // so that Chromium's own start-up is not counted as the page's.
  if (job.warmUp) {
    await page.goto("file://" + job.warmUp, { waitUntil: "load", timeout: TIMEOUT_MS });
    await page.waitForFunction(() => window.sondeFirstPaintMs !== undefined, { timeout: TIMEOUT_MS });
  }
  // job.opens: how many times the page is opened (the last one is the one
  // examined below); firstPaintMs is their median, firstPaints each one.
  const firstPaints = [];
  let openedMs = 0;
  for (let open = 0; open < (job.opens || 1); open++) {
    const started = Date.now();
    await page.goto("file://" + job.html, { waitUntil: "load", timeout: TIMEOUT_MS });
    await page.waitForFunction(() => window.sondeFirstPaintMs !== undefined, { timeout: TIMEOUT_MS });
    openedMs = Date.now() - started;
    firstPaints.push(await page.evaluate(() => window.sondeFirstPaintMs));
  }
  const firstPaintMs = firstPaints.slice().sort((a, b) => a - b)[Math.floor(firstPaints.length / 2)];
  const frames = () => page.evaluate(() => Array.from(document.querySelectorAll("#chart g.frame")).map((g) => ({
    name: g.getAttribute("name"), width: Number(g.querySelector("rect").getAttribute("width") || 0),
    fade: g.classList.contains("fade")
  })));
  const before = await frames();
  const marks = await page.evaluate(() => performance.getEntriesByType("mark").map((m) => [m.name, Math.round(m.startTime)]));
  const typeOptions = await page.evaluate(() => Array.from(document.querySelectorAll("#type option")).map((o) => o.textContent));
  // What the page says in place of a timeline (null when it shows one).
  const timelineNote = await page.evaluate(() => {
    const note = document.getElementById("timeline-note");
    return note.hidden ? null : note.textContent;
  });
  const result = { openedMs, firstPaintMs, firstPaints, before, marks, typeOptions, timelineNote, errors };
  if (job.click) {
    const target = await page.$(`#chart g.frame[name="${job.click}"] rect`);
    if (!target) throw new Error(`no frame named ${job.click} to click`);
    await target.click();
    await new Promise((resolve) => setTimeout(resolve, 600)); // the zoom transition
    result.afterClick = await frames();
  }
  if (job.type) {
    await page.select("#type", await page.evaluate((name) =>
      String(window.sonde.data.types.findIndex((t) => t[0] === name)), job.type));
    await page.waitForFunction(() => document.querySelectorAll("#chart g.frame").length > 0, { timeout: TIMEOUT_MS });
    result.afterType = await frames();
    result.topRows = await page.evaluate(() => Array.from(document.querySelectorAll("#top tbody tr")).slice(0, 5)
      .map((tr) => Array.from(tr.children).map((td) => td.textContent)));
    // Each thread checkbox's label with its share of the chosen type.
    result.threadAmounts = await page.evaluate(() => Array.from(document.querySelectorAll("#threads label"))
      .map((label) => label.textContent.trim()));
  }
  if (job.uncheck) {
    for (const selector of job.uncheck) await page.click(selector);
    result.afterFilter = await frames();
  }
  if (job.search) {
    await page.type("#search", job.search);
    result.highlighted = await page.evaluate(() => Array.from(document.querySelectorAll("#chart g.frame"))
      .filter((g) => g.querySelector("rect").getAttribute("fill") === "#E600E6").map((g) => g.getAttribute("name")));
    result.details = await page.evaluate(() => document.getElementById("details").textContent);
  }
  if (job.hover) {
    await page.hover(`#chart g.frame[name="${job.hover}"] rect`);
    await new Promise((resolve) => setTimeout(resolve, 400)); // the tooltip fades in
    result.tooltip = await page.evaluate(() => {
      const tip = document.querySelector(".d3-flame-graph-tip");
      return tip ? tip.textContent : null;
    });
  }
  if (job.screenshot) await page.screenshot({ path: job.screenshot, fullPage: false });
  return result;
}

// The timeline above the flame graph: its lanes and their names, the
// colour drawn at given moments of given lanes (probes: [{thread, us}],
// read from the canvas; strip: true reads the strip of label spans and GC
// pauses beneath the lane's state band), a drag across a time range (drag: {from, to} in
// µs) and what the flame graph then holds, a hover (hover: {thread, us})
// and its tooltip, then a click that clears the range, then the lanes left
// once the thread boxes of uncheck are unchecked.
async function timeline(page, errors) {
  const started = Date.now();
  await page.goto("file://" + job.html, { waitUntil: "load", timeout: TIMEOUT_MS });
  await page.waitForFunction(() => window.sondeFirstPaintMs !== undefined, { timeout: TIMEOUT_MS });
  const result = await page.evaluate(() => {
    const t = window.sonde.timeline;
    const marks = Object.fromEntries(performance.getEntriesByType("mark").map((m) => [m.name, m.startTime]));
    return {
      firstPaintMs: window.sondeFirstPaintMs,
      timelineMs: marks["sonde-timeline-end"] === undefined ? null : marks["sonde-timeline-end"] - marks["sonde-timeline-start"],
      drawMs: t ? t.drawMs() : null,
      lanes: t ? t.lanes() : [],
      names: Array.from(document.querySelectorAll("#timeline .timeline-name")).map((div) => {
        const box = div.getBoundingClientRect();
        return { text: div.textContent, visible: box.width > 0 && box.height > 0 };
      }),
      timelineShown: !document.getElementById("timeline").hidden,
      note: document.getElementById("timeline-note").hidden ? null : document.getElementById("timeline-note").textContent,
      legend: Array.from(document.querySelectorAll("#timeline .legend-item")).map((item) => item.textContent),
      totalBefore: window.sonde.current().total
    };
  });
  result.openedMs = Date.now() - started;
  result.errors = errors;
  if (!result.timelineShown) return result;
  const laneY = (thread, strip) => {
    const lane = result.lanes.find((l) => l.name === thread);
    if (!lane) throw new Error(`no lane named ${thread}`);
    return strip ? lane.top + lane.band + lane.strip / 2 : lane.top + lane.band / 2;
  };
  const probe = (probes) => page.evaluate((probes, ys) => {
    const t = window.sonde.timeline;
    const canvas = document.querySelector("#timeline canvas");
    const ctx = canvas.getContext("2d");
    const ratio = canvas.width / canvas.getBoundingClientRect().width;
    return probes.map((probe, i) => {
      const x = Math.floor(t.xOf(probe.us)) + 0.5;
      const pixel = ctx.getImageData(Math.floor(x * ratio), Math.floor(ys[i] * ratio), 1, 1).data;
      return "#" + Array.from(pixel.slice(0, 3)).map((c) => c.toString(16).padStart(2, "0")).join("");
    });
  }, probes, probes.map((probe) => laneY(probe.thread, probe.strip)));
  result.probes = await probe(job.probes || []);
  result.colors = await page.evaluate(() => Object.fromEntries(window.sonde.data.states
    .map((s) => [s, window.sonde.timeline.stateColor(s)])));
  result.gcColor = await page.evaluate(() => window.sonde.timeline.gcColor);
  result.spanColors = await page.evaluate(() => window.sonde.data.labelSets.map((_, set) => window.sonde.timeline.spanColor(set)));
  // Where moment us of thread's lane is on the page (the canvas may have moved).
  const at = (us, thread) => page.evaluate((us) => {
    const box = document.querySelector("#timeline canvas").getBoundingClientRect();
    return { left: box.left, top: box.top, x: window.sonde.timeline.xOf(us) };
  }, us).then((p) => ({ x: p.left + p.x, y: p.top + laneY(thread) }));
  if (job.drag) {
    const from = await at(job.drag.from, result.lanes[0].name);
    const to = await at(job.drag.to, result.lanes[0].name);
    await page.mouse.move(from.x, from.y);
    await page.mouse.down();
    await page.mouse.move((from.x + to.x) / 2, from.y, { steps: 3 });
    await page.mouse.move(to.x, to.y, { steps: 3 });
    await page.mouse.up();
    Object.assign(result, await page.evaluate(() => {
      const last = (name) => performance.getEntriesByName(name).slice(-1)[0].startTime;
      return {
        range: window.sonde.timeline.range(),
        totalInRange: window.sonde.current().total,
        rangeText: document.querySelector("#timeline .timeline-range").textContent,
        // The refold and redraw of the flame graph for the range.
        refoldMs: last("sonde-chart-end") - last("sonde-fold-start")
      };
    }));
    result.framesInRange = await page.evaluate(() => Array.from(document.querySelectorAll("#chart g.frame"))
      .map((g) => g.getAttribute("name")));
  }
  if (job.hover) {
    const point = await at(job.hover.us, job.hover.thread);
    await page.mouse.move(point.x, point.y);
    result.tooltip = await page.evaluate(() => {
      const tip = document.querySelector("#timeline .timeline-tip");
      return tip.hidden ? null : tip.innerText;
    });
  }
  if (job.screenshot) await page.screenshot({ path: job.screenshot, fullPage: false });
  // "Zoom to selection": the range spread over the width, probed again (zoomProbes), then "Zoom out".
  if (job.drag && job.zoomProbes) {
    await page.click("#timeline .timeline-zoom");
    result.zoomed = await probe(job.zoomProbes);
    result.zoomedAxis = await page.evaluate(() => [window.sonde.timeline.timeAt(150), window.sonde.timeline.range()]);
    if (job.zoomScreenshot) await page.screenshot({ path: job.zoomScreenshot, fullPage: false });
    await page.click("#timeline .timeline-unzoom");
  }
  if (job.drag) {
    const point = await at(job.drag.from, result.lanes[0].name);
    await page.mouse.click(point.x, point.y); // a click, no drag: clears the range
    result.afterClear = await page.evaluate(() => ({ range: window.sonde.timeline.range(), total: window.sonde.current().total }));
  }
  // The thread filter: the lanes left once these boxes are unchecked.
  if (job.uncheck) {
    for (const selector of job.uncheck) await page.click(selector);
    result.lanesAfterUncheck = await page.evaluate(() => window.sonde.timeline.lanes().map((lane) => lane.name));
    result.namesAfterUncheck = await page.evaluate(() => Array.from(document.querySelectorAll("#timeline .timeline-name"))
      .map((div) => div.textContent));
  }
  return result;
}

// speedscope's own app, opened as its `speedscope FILE` command does: a script
// that calls speedscope.loadFileFromBase64, named in #localProfilePath.
async function speedscope(page, errors) {
  await page.goto("file://" + job.index + "#localProfilePath=" + job.loader, { waitUntil: "load", timeout: TIMEOUT_MS });
  await page.waitForFunction(() => document.title !== "speedscope" || /went wrong|not recognized/i.test(document.body.innerText),
    { timeout: TIMEOUT_MS }).catch(() => {});
  await new Promise((resolve) => setTimeout(resolve, 300));
  const text = await page.evaluate(() => document.body.innerText);
  const title = await page.evaluate(() => document.title);
  // The sandwich view lists every function with its total and self value as
  // DOM text: what the importer really read.
  let sandwich = null;
  const button = await page.evaluateHandle(() => Array.from(document.querySelectorAll("div, button, span"))
    .find((el) => el.children.length <= 1 && /Sandwich$/.test(el.textContent.trim())));
  if (button && button.asElement()) {
    await button.asElement().click();
    await new Promise((resolve) => setTimeout(resolve, 500));
    sandwich = await page.evaluate(() => Array.from(document.querySelectorAll("table tr"))
      .map((tr) => Array.from(tr.children).map((td) => td.textContent.trim())));
  }
  if (job.screenshot) await page.screenshot({ path: job.screenshot });
  return { title, text, sandwich, errors };
}

// The flame graph page in a browser without DecompressionStream (older
// than Chrome 80, Firefox 113, Safari 16.4): what it says instead.
async function withoutDecompression(page, errors) {
  await page.evaluateOnNewDocument(() => { delete window.DecompressionStream; });
  await page.goto("file://" + job.html, { waitUntil: "load", timeout: TIMEOUT_MS });
  await page.waitForFunction(() => !document.getElementById("empty").hidden, { timeout: TIMEOUT_MS });
  const message = await page.evaluate(() => document.getElementById("empty").textContent);
  const frames = await page.evaluate(() => document.querySelectorAll("#chart g.frame").length);
  return { message, frames, errors };
}

const run = { flamegraph, timeline, speedscope, withoutDecompression }[job.script];
withPage(run).then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n");
}).catch((error) => {
  process.stdout.write(JSON.stringify({ failure: String(error && error.stack || error) }) + "\n");
  process.exitCode = 1;
});
