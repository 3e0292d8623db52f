// Replays the request bodies of popular OpenAI clients (tests/peers/client_payloads.json: each
// body byte for byte as its client sends it, the source file and commit cited) against a
// running mulo_server, and reads each answer the way its client does: b64_json decoded, the url
// fetched with the client's own Authorization header (url) or with none (url-anonymous), or an
// error the client shows (error: the status and param of `expect`). Every image must decode
// (PNG, JPEG or WebP magic) and come in the number and size asked.
//   node tests/peers/client_payloads_test.mjs http://127.0.0.1:PORT API_KEY
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [base, key] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const { payloads } = JSON.parse(readFileSync(join(here, "client_payloads.json"), "utf8"));
const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };

function kindOf(bytes) {
  if (bytes.subarray(1, 4).toString("latin1") === "PNG") return "png";
  if (bytes[0] === 0xff && bytes[1] === 0xd8) return "jpeg";
  if (bytes.subarray(8, 12).toString("latin1") === "WEBP") return "webp";
  return "unknown";
}

let accepted = 0;
for (const p of payloads) {
  const label = `${p.client}: ${p.case}`;
  const body = JSON.parse(p.body);
  const response = await fetch(`${base}/v1/images/generations`, {
    method: "POST", headers, body: p.body,
  });
  const text = await response.text();
  if (p.read === "error") {
    assert.equal(response.status, p.expect.status, `${label} -> ${response.status} ${text}`);
    const { error } = JSON.parse(text);
    assert.equal(error.param, p.expect.param, `${label}: ${text}`);
    assert.ok(error.message.length > 0, label);
    accepted++;
    console.log(`ok ${accepted} - ${label} (${response.status}, param ${error.param}: ${error.message})`);
    continue;
  }
  assert.equal(response.status, 200, `${label} -> ${response.status} ${text.slice(0, 300)}`);
  const answer = JSON.parse(text);
  assert.equal(answer.data.length, body.n ?? 1, label);
  for (const item of answer.data) {
    let bytes;
    if (p.read === "url" || p.read === "url-anonymous") {
      assert.ok(item.url, `${label}: no url`);
      const image = await fetch(item.url, p.read === "url" ?
          { headers: { Authorization: headers.Authorization } } : {});
      assert.equal(image.status, 200, `${label}: ${item.url} -> ${image.status}`);
      assert.match(image.headers.get("content-type"), /^image\//, label);
      bytes = Buffer.from(await image.arrayBuffer());
    } else {
      assert.ok(item.b64_json, `${label}: no b64_json`);
      bytes = Buffer.from(item.b64_json, "base64");
    }
    assert.equal(kindOf(bytes), body.output_format ?? "png", label);
  }
  if (body.size && body.size !== "auto") assert.equal(answer.size, body.size.toLowerCase(), label);
  accepted++;
  console.log(`ok ${accepted} - ${label} (${answer.size}, ${answer.data.length} image(s))`);
}
console.log(`all ${accepted} of ${payloads.length} payloads answered as their clients expect`);
