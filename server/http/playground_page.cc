#include "server/http/playground_page.h"

namespace mulo::server::http {

// URL parameters fill the form (?prompt=...&model=...&method=...&seed=...); &run=1 generates
// at once (the headless-browser test uses it). The page records what it received in data-*
// attributes of <body> so that a test can read them from the DOM.
const char* PlaygroundHtml() {
  return R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mulo playground</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; }
  form { display: grid; grid-template-columns: 7em 28em; gap: 6px 10px; align-items: center; }
  input, select, button { font: inherit; padding: 4px; }
  button { grid-column: 2; width: 10em; }
  #images { display: flex; gap: 16px; margin-top: 16px; align-items: flex-start; }
  figure { margin: 0; }
  img { width: 256px; image-rendering: pixelated; background: #eee; border: 1px solid #ccc; }
  figcaption { color: #666; margin-top: 4px; }
  #status { margin-top: 12px; }
  table { border-collapse: collapse; margin-top: 8px; }
  td { padding: 2px 10px 2px 0; }
</style>
</head>
<body data-partials="0" data-state="idle">
<h1>mulo playground</h1>
<form id="form">
  <label for="prompt">Prompt</label><input id="prompt" value="a large red circle in the center on a blue background">
  <label for="model">Model</label><select id="model"></select>
  <label for="method">Method</label><select id="method"></select>
  <label for="seed">Seed</label><input id="seed" type="number" min="0" value="0">
  <label for="key">API key</label><input id="key" type="password" placeholder="only when the server asks for one" autocomplete="off">
  <button id="go" type="submit">Generate</button>
</form>
<div id="status">Loading models...</div>
<div id="images">
  <figure><img id="partial" alt="partial image"><figcaption id="partial-caption">partial images</figcaption></figure>
  <figure><img id="final" alt="final image"><figcaption>final image</figcaption></figure>
</div>
<table id="stats"></table>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let models = [];

function fillMethods() {
  const model = models.find((m) => m.id === $("model").value);
  $("method").innerHTML = "";
  for (const name of model ? model.mulo.methods : []) $("method").add(new Option(name, name));
  if (params.get("method")) $("method").value = params.get("method");
}

// The key stays in this page (never stored): sent as OpenAI's clients send it.
function headers() {
  const key = $("key").value;
  return key ? { Authorization: `Bearer ${key}` } : {};
}

async function loadModels() {
  const response = await fetch("/v1/models", { headers: headers() });
  if (!response.ok) throw new Error((await response.json()).error.message);
  models = (await response.json()).data;
  $("model").innerHTML = "";
  for (const m of models) $("model").add(new Option(`${m.id} (${m.mulo.size})`, m.id));
  if (params.get("model")) $("model").value = params.get("model");
  fillMethods();
  $("status").textContent = "Ready.";
}

function showStats(event, seconds) {
  const stats = event.mulo.images[0];
  const rows = [
    ["method", event.mulo.method], ["latency", `${seconds.toFixed(2)} s`],
    ["image tokens", event.usage.output_tokens], ["target forwards", stats.target_forward_passes],
    ["step compression", stats.step_compression.toFixed(2)],
    ["mean accepted length", stats.mean_accepted_length.toFixed(2)],
    ["acceptance rate", stats.acceptance_rate.toFixed(3)],
    ["queue", `${stats.queue_seconds.toFixed(3)} s`], ["request id", stats.request_id]];
  $("stats").innerHTML = "";
  for (const [name, value] of rows) {
    const tr = $("stats").insertRow();
    tr.insertCell().textContent = name;
    tr.insertCell().textContent = value;
  }
}

async function generate() {
  const started = performance.now();
  document.body.dataset.state = "running";
  document.body.dataset.partials = "0";
  $("status").textContent = "Generating...";
  $("partial").removeAttribute("src");
  $("final").removeAttribute("src");
  const body = { model: $("model").value, prompt: $("prompt").value, method: $("method").value,
                 seed: Number($("seed").value), stream: true, partial_images: 3 };
  const response = await fetch("/v1/images/generations", {
    method: "POST", headers: { "Content-Type": "application/json", ...headers() },
    body: JSON.stringify(body) });
  if (!response.ok) {
    const error = (await response.json()).error;
    throw new Error(`${response.status}: ${error.message}`);
  }
  // Server-sent events from the response body, as they arrive.
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const type = (block.match(/^event: (.*)$/m) || [])[1];
      const data = JSON.parse((block.match(/^data: (.*)$/m) || [])[1] || "null");
      const src = (d) => `data:image/${d.output_format};base64,${d.b64_json}`;
      if (type === "image_generation.partial_image") {
        $("partial").src = src(data);
        $("partial-caption").textContent = `partial image ${data.partial_image_index + 1}`;
        document.body.dataset.partials = String(data.partial_image_index + 1);
      } else if (type === "image_generation.completed") {
        $("final").src = src(data);
        const seconds = (performance.now() - started) / 1000;
        showStats(data, seconds);
        $("status").textContent = `Done in ${seconds.toFixed(2)} s.`;
        document.body.dataset.state = "done";
      } else if (type === "error") {
        throw new Error(data.error.message);
      }
    }
  }
}

$("model").addEventListener("change", fillMethods);
$("key").addEventListener("change", () => loadModels().catch((error) => {
  $("status").textContent = `Error: ${error.message}`;
}));
$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  generate().catch((error) => {
    $("status").textContent = `Error: ${error.message}`;
    document.body.dataset.state = "error";
  });
});
for (const id of ["prompt", "seed"]) if (params.get(id)) $(id).value = params.get(id);
loadModels().then(() => { if (params.get("run") === "1") $("form").requestSubmit(); })
  .catch((error) => { $("status").textContent = `Error: ${error.message}`; });
</script>
</body>
</html>
)html";
}

}  // namespace mulo::server::http
