// The official `openai` npm package (tests/peers/package-lock.json) against a running
// mulo_server's HTTP API: images.generate with n, with stream and partial_images, a bad field
// and an unknown model raising the SDK's own errors, and models.list.
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
