// The official `openai` npm package (tests/peers/package-lock.json) against a running
// mulo_server's HTTP API: images.generate with n, with stream and partial_images, with every
// parameter the SDK types (openai 6.49.0, resources/images.d.ts ImageGenerateParamsBase), with
// parameters set to null, with response_format url (the URL fetched with the same key), a bad
// field and an unknown model raising the SDK's own errors, and models.list.
//   node tests/peers/openai_sdk_test.mjs http://127.0.0.1:PORT/v1 MODEL
import assert from "node:assert/strict";
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: process.env.MULO_API_KEY || "unused", maxRetries: 0 });
const prompt = "a small red circle in the top left on a blue background";

// PNG width and height from the IHDR chunk.
function pngSize(b64) {
  const bytes = Buffer.from(b64, "base64");
  assert.equal(bytes.subarray(1, 4).toString("latin1"), "PNG", "not a PNG");
  return `${bytes.readUInt32BE(16)}x${bytes.readUInt32BE(20)}`;
}

let checks = 0;
function pass(what) {
  checks++;
  console.log(`ok ${checks} - ${what}`);
}

if (process.env.MULO_EXPECT_UNAUTHORIZED) {
  // A server with --api_keys_file and a key it does not know.
  for (const call of [() => client.models.list(), () => client.images.generate({ model, prompt })]) {
    await assert.rejects(call(), (error) => {
      assert.ok(error instanceof OpenAI.AuthenticationError, `got ${error.constructor.name}`);
      assert.equal(error.status, 401);
      return true;
    });
  }
  pass("a wrong key raises AuthenticationError on models.list and images.generate");
  process.exit(0);
}

const models = await client.models.list();
const ids = models.data.map((m) => m.id);
assert.ok(ids.includes(model), `models.list: ${ids}`);
const size = models.data.find((m) => m.id === model).mulo.size;
pass(`models.list lists ${model} (${size})`);

const result = await client.images.generate({ model, prompt, n: 2, seed: 3 });
assert.equal(result.data.length, 2);
for (const image of result.data) assert.equal(pngSize(image.b64_json), size);
assert.equal(result.usage.output_tokens, 2 * result.mulo.images[0].image_tokens.length);
pass("images.generate returns n decodable PNGs of the family's size");

const stream = await client.images.generate({ model, prompt, seed: 3, stream: true, partial_images: 2 });
const types = [];
let completed = null;
for await (const event of stream) {
  types.push(event.type);
  if (event.type === "image_generation.partial_image") {
    assert.equal(event.partial_image_index, types.length - 1);
    assert.ok(event.b64_json.length > 0);
  } else {
    completed = event;
  }
}
assert.deepEqual(types, ["image_generation.partial_image", "image_generation.partial_image",
                         "image_generation.completed"]);
assert.equal(pngSize(completed.b64_json), size);
// Seed 3 streamed is the first image of the n = 2 request above.
assert.deepEqual(completed.mulo.images[0].image_tokens, result.mulo.images[0].image_tokens);
pass("stream yields its partial images, then completed with the same tokens");

// WebP width and height (lossless VP8L, or lossy VP8, headers).
function webpSize(b64) {
  const bytes = Buffer.from(b64, "base64");
  assert.equal(bytes.subarray(0, 4).toString("latin1"), "RIFF", "not a RIFF file");
  assert.equal(bytes.subarray(8, 12).toString("latin1"), "WEBP", "not a WebP");
  const chunk = bytes.subarray(12, 16).toString("latin1");
  if (chunk === "VP8L") {
    const bits = bytes.readUInt32LE(21);
    return `${(bits & 0x3fff) + 1}x${((bits >> 14) & 0x3fff) + 1}`;
  }
  assert.equal(chunk, "VP8 ", `chunk ${chunk}`);
  return `${bytes.readUInt16LE(26) & 0x3fff}x${bytes.readUInt16LE(28) & 0x3fff}`;
}

// Every parameter the SDK types, at values its users send (OpenAI's own sizes included).
const every = await client.images.generate({
  model, prompt, n: 3, size: "1792x1024", quality: "hd", style: "natural",
  response_format: "b64_json", output_format: "webp", output_compression: 90,
  background: "opaque", moderation: "low", user: "sdk-test", stream: false,
});
assert.equal(every.data.length, 3);
for (const image of every.data) assert.equal(webpSize(image.b64_json), "1792x1024");
assert.equal(every.size, "1792x1024");
assert.equal(every.quality, "hd");
assert.equal(every.output_format, "webp");
pass("images.generate with every typed parameter: 3 WebPs of the size asked (resized)");

// Parameters left unset as null (as openai-python sends None) and no model: the defaults.
const nulls = await client.images.generate({
  prompt, model: null, n: null, size: null, quality: null, style: null, background: null,
  moderation: null, output_format: null, output_compression: null, response_format: null,
});
assert.equal(nulls.data.length, 1);
assert.equal(pngSize(nulls.data[0].b64_json), size);
pass("null parameters and no model: one PNG of the default family");

// response_format url: fetched with the same key the SDK uses.
const byUrl = await client.images.generate({ model, prompt, response_format: "url", n: 2 });
assert.equal(byUrl.data.length, 2);
for (const image of byUrl.data) {
  assert.ok(image.url.startsWith(baseURL.replace(/\/v1$/, "") + "/v1/images/files/"), image.url);
  const response = await fetch(image.url, {
    headers: { Authorization: `Bearer ${process.env.MULO_API_KEY || "unused"}` },
  });
  assert.equal(response.status, 200, image.url);
  assert.equal(response.headers.get("content-type"), "image/png");
  assert.equal(pngSize(Buffer.from(await response.arrayBuffer()).toString("base64")), size);
}
pass("response_format url: each URL serves the PNG");

await assert.rejects(client.images.generate({ model, prompt, background: "transparent" }),
                     (error) => {
  assert.ok(error instanceof OpenAI.BadRequestError, `got ${error.constructor.name}`);
  assert.equal(error.param, "background");
  return true;
});
pass("a transparent background raises BadRequestError naming background");

await assert.rejects(client.images.generate({ model, prompt, temperature: 500 }), (error) => {
  assert.ok(error instanceof OpenAI.BadRequestError, `got ${error.constructor.name}`);
  assert.equal(error.status, 400);
  assert.equal(error.param, "temperature");
  return true;
});
pass("a bad field raises BadRequestError naming it");

await assert.rejects(client.images.generate({ model: "no-such-model", prompt }), (error) => {
  assert.ok(error instanceof OpenAI.NotFoundError, `got ${error.constructor.name}`);
  assert.equal(error.param, "model");
  return true;
});
pass("an unknown model raises NotFoundError");

console.log(`all ${checks} checks passed`);
