// Drives headless Chromium for Sonde's browser tests through puppeteer-core
// (installed by script/test-node-deps). Reads one JSON job on stdin, prints
// one JSON result on stdout:
//   {"chromium": path, "profileDir": dir, "script": "flamegraph"|"speedscope", ...}
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
  const started = Date.now();
  await page.goto("file://" + job.html, { waitUntil: "load", timeout: TIMEOUT_MS });
  await page.waitForFunction(() => window.sondeFirstPaintMs !== undefined, { timeout: TIMEOUT_MS });
  const openedMs = Date.now() - started;
  const firstPaintMs = await page.evaluate(() => window.sondeFirstPaintMs);
  const frames = () => page.evaluate(() => Array.from(document.querySelectorAll("#chart g.frame")).map((g) => ({
    name: g.getAttribute("name"), width: Number(g.querySelector("rect").getAttribute("width") || 0),
    fade: g.classList.contains("fade")
  })));
  const before = await frames();
  const marks = await page.evaluate(() => performance.getEntriesByType("mark").map((m) => [m.name, Math.round(m.startTime)]));
  const typeOptions = await page.evaluate(() => Array.from(document.querySelectorAll("#type option")).map((o) => o.textContent));
  const result = { openedMs, firstPaintMs, before, marks, typeOptions, errors };
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

const run = { flamegraph, speedscope }[job.script];
withPage(run).then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n");
}).catch((error) => {
  process.stdout.write(JSON.stringify({ failure: String(error && error.stack || error) }) + "\n");
  process.exitCode = 1;
});
