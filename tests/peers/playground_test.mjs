// Debian's headless Chromium (driven by puppeteer-core) opens mulo_server's playground as a
// new user would. The server asks for a key: the page must say so (no broken image), then,
// with the key, run two methods side by side on one prompt and seed. Checked: both images are
// not flat, both acceptance maps have the image's grid, the drafting method's map shows kept
// drafts and the baseline's none, the figures under each image are the server's stats for
// that request, and the live panel counts the images. Screenshots before, during and after the
// run go to OUT_DIR (tools/playground_screenshots.sh puts them in docs/).
//   node tests/peers/playground_test.mjs http://127.0.0.1:PORT MODEL KEY OUT_DIR BASE DRAFTING
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";

const [base, model, key, outDir, baseline, drafting] = process.argv.slice(2);
const methods = [baseline, drafting];
const seed = 4;
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});

// The distinct colours of an element's screenshot, decoded by the browser itself.
async function distinctColours(page, element) {
  const shot = await element.screenshot({ encoding: "base64" });
  return page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const canvas = Object.assign(document.createElement("canvas"),
                                 { width: img.naturalWidth, height: img.naturalHeight });
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    const { data } = context.getImageData(0, 0, canvas.width, canvas.height);
    const seen = new Set();
    for (let i = 0; i < data.length; i += 4) {
      seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    }
    return seen.size;
  }, shot);
}

// What the server answers for the same request, without the stream (the page's figures must
// be these).
async function serverStats(method) {
  const response = await fetch(`${base}/v1/images/generations`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body: JSON.stringify({ model, prompt: "a large red circle in the center on a blue background",
                           method, seed, commit_map: true }),
  });
  assert.equal(response.status, 200, await response.clone().text());
  return (await response.json()).mulo.images[0];
}

try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1180, height: 900 });
  await page.goto(`${base}/?model=${model}&methods=${methods.join(",")}&seed=${seed}&run=1`);
  // 1. No key: the page asks for one, and shows no image, broken or not.
  await page.waitForFunction(
    () => document.getElementById("status").textContent.includes("API key"), { timeout: 30000 });
  const asked = await page.evaluate(() => ({
    keyShown: !document.getElementById("keyrow").classList.contains("hidden"),
    images: document.querySelectorAll("img").length,
    empty: !document.getElementById("empty").hidden,
    legend: !document.getElementById("legend").hidden,
    error: document.getElementById("status").classList.contains("error"),
  }));
  // A request for the key, not an error; the empty state, not empty images or a legend.
  assert.deepEqual(asked, { keyShown: true, images: 0, empty: true, legend: false, error: false });
  await page.screenshot({ path: `${outDir}/playground_key.png` });

  // 2. The key, then Generate.
  await page.type("#key", key);
  await page.keyboard.press("Tab");  // the field commits its value (change)
  await page.waitForFunction(() => !document.getElementById("go").disabled, { timeout: 30000 });
  const checked = await page.$$eval("#methods input:checked", (boxes) => boxes.map((b) => b.value));
  assert.deepEqual(checked, methods);
  await page.screenshot({ path: `${outDir}/playground_before.png` });
  await page.click("#go");
  // During: the first run's partial image, if the run is slow enough to catch one.
  let during = false;
  try {
    await page.waitForFunction(() => {
      const cards = document.querySelectorAll(".run");
      return [...cards].some((c) => c.dataset.state === "generating" &&
                                    Number(c.dataset.partials) > 0);
    }, { timeout: 20000, polling: 20 });
    await page.screenshot({ path: `${outDir}/playground_during.png` });
    during = true;
  } catch (e) { /* finished before a partial image was caught */ }
  await page.waitForFunction(() => ["done", "error"].includes(document.body.dataset.state),
                             { timeout: 120000 });
  const state = await page.evaluate(() => ({
    state: document.body.dataset.state,
    status: document.getElementById("status").textContent,
  }));
  assert.equal(state.state, "done", state.status);
  // The live panel's next refresh counts the images.
  await page.waitForFunction(() => document.getElementById("live-methods").rows.length >= 2,
                             { timeout: 10000 });
  await page.screenshot({ path: `${outDir}/playground_after.png` });

  // 3. Each card against the server's answer for its request.
  const grid = (await (await fetch(`${base}/v1/models/${model}`,
                                   { headers: { Authorization: `Bearer ${key}` } })).json())
                 .mulo.grid_size;
  for (const method of methods) {
    const card = await page.$(`.run[data-method="${method}"]`);
    assert.ok(card, `no card for ${method}`);
    const shown = await card.evaluate((c) => ({
      state: c.dataset.state, partials: Number(c.dataset.partials), grid: Number(c.dataset.grid),
      kept: Number(c.dataset.kept), redrawn: Number(c.dataset.redrawn),
      target: Number(c.dataset.target), stats: JSON.parse(c.dataset.stats),
      figures: Object.fromEntries([...c.querySelectorAll("dd")]
                                    .map((d) => [d.dataset.field, d.textContent])),
      canvas: [c.querySelector("canvas").width, c.querySelector("canvas").height],
    }));
    assert.equal(shown.state, "done");
    assert.ok(shown.partials >= 1, `${method}: no partial image arrived through the stream`);
    assert.equal(shown.grid, grid, `${method}: the map is not the image's grid`);
    assert.deepEqual(shown.canvas, [grid, grid]);
    assert.equal(shown.kept + shown.redrawn + shown.target, grid * grid);
    const stats = await serverStats(method);
    assert.equal(shown.kept, stats.accepted_tokens, `${method}: kept cells != accepted tokens`);
    assert.equal(shown.redrawn, stats.resampled_tokens, `${method}: re-drawn cells`);
    assert.equal(shown.figures.step_compression, stats.step_compression.toFixed(2));
    assert.equal(shown.figures.target_forward_passes, String(stats.target_forward_passes));
    assert.equal(shown.figures.acceptance_rate, `${(100 * stats.acceptance_rate).toFixed(1)}%`);
    assert.equal(shown.figures.mean_accepted_length, stats.mean_accepted_length.toFixed(2));
    assert.equal(shown.stats.tokens, stats.tokens);
    assert.match(shown.figures.latency, /^\d+\.\d\d s/);
    assert.match(shown.figures.first_row_seconds, /^\d+\.\d{3} s$/);
    const colours = await distinctColours(page, await card.$(".frame.image img"));
    assert.ok(colours > 8, `${method}: a flat image (${colours} colours)`);
    console.log(`ok - ${method}: ${shown.partials} partial image(s), image of ${colours} colours, ` +
                `map ${grid}x${grid}: ${shown.kept} kept, ${shown.redrawn} re-drawn, ` +
                `${shown.target} the target's; figures ${JSON.stringify(shown.figures)}`);
    if (method === baseline) {
      assert.equal(shown.kept, 0, "the baseline kept drafts");
      assert.equal(shown.redrawn, 0, "the baseline re-drew drafts");
    } else {
      assert.ok(shown.kept > 0, `${method}'s map shows no kept draft`);
    }
  }
  const live = await page.$$eval("#live-methods tr",
                                 (rows) => rows.map((r) => r.cells[0].textContent));
  assert.deepEqual([...live].sort(), [...methods].sort());
  console.log(`ok - the live panel lists ${live.join(", ")}; ` +
              `a partial image caught mid-run: ${during}`);
} finally {
  await browser.close();
}
