// Debian's headless Chromium (driven by puppeteer-core) opens mulo_server's playground, which
// loads the models, generates through the stream of /v1/images/generations and shows the
// image; a screenshot of the final image must not be one flat colour.
//   node tests/peers/playground_test.mjs http://127.0.0.1:PORT MODEL METHOD OUT_DIR
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";

const [base, model, method, outDir] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 700 });
  const requests = [];
  page.on("request", (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
  await page.goto(`${base}/?model=${model}&method=${method}&seed=4&run=1`);
  await page.waitForFunction(() => ["done", "error"].includes(document.body.dataset.state),
                             { timeout: 60000 });
  const state = await page.evaluate(() => ({
    state: document.body.dataset.state,
    status: document.getElementById("status").textContent,
    partials: Number(document.body.dataset.partials),
    stats: document.getElementById("stats").innerText,
  }));
  assert.equal(state.state, "done", state.status);
  assert.ok(state.partials >= 1, "no partial image arrived through the stream");
  assert.ok(requests.includes("POST /v1/images/generations"), requests.join(", "));
  assert.match(state.stats, new RegExp(`method\\s+${method.replace("+", "\\+")}`));
  const image = await page.$("#final");
  await page.screenshot({ path: `${outDir}/playground.png` });
  // A screenshot of the final image as the browser shows it, decoded by the browser itself
  // (drawn to a canvas): how many distinct colours it holds.
  const shot = await image.screenshot({ path: `${outDir}/playground_final.png`, encoding: "base64" });
  const colours = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const canvas = document.createElement("canvas");
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    const { data } = context.getImageData(0, 0, canvas.width, canvas.height);
    const seen = new Set();
    for (let i = 0; i < data.length; i += 4) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    return { size: `${canvas.width}x${canvas.height}`, distinct: seen.size };
  }, shot);
  assert.ok(colours.distinct > 8, `a flat image: ${JSON.stringify(colours)}`);
  console.log(`ok - the playground's final image, screenshot at ${colours.size}, holds ${colours.distinct} colours ` +
              `after ${state.partials} partial image(s): ${state.status}`);
} finally {
  await browser.close();
}
