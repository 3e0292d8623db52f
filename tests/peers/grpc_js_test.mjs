// gRPC's own Node client (@grpc/grpc-js with @grpc/proto-loader reading our .proto; pinned in
// tests/peers/package-lock.json) against a mulo_server started with --api_keys_file: without
// `authorization` metadata, or with a wrong key, ListModels and Generate end UNAUTHENTICATED;
// with the key, Generate streams its rows and the image.
//   node tests/peers/grpc_js_test.mjs HOST:PORT PROTO_ROOT KEY MODEL
import assert from "node:assert/strict";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

const [address, protoRoot, key, model] = process.argv.slice(2);
const definition = protoLoader.loadSync("mulo/v1/image_generation.proto", {
  includeDirs: [protoRoot], keepCase: true, longs: Number, defaults: false });
const mulo = grpc.loadPackageDefinition(definition).mulo.v1;
const client = new mulo.ImageGeneration(address, grpc.credentials.createInsecure());

function metadata(value) {
  const m = new grpc.Metadata();
  if (value) m.set("authorization", value);
  return m;
}

function listModels(m) {
  return new Promise((resolve) => client.ListModels({}, m, (error, response) => resolve({ error, response })));
}

function generate(m) {
  return new Promise((resolve) => {
    const events = { rows: 0, image: null };
    const call = client.Generate({ model, prompt: "a red circle", sampling: { seed: 2 } }, m);
    call.on("data", (response) => {
      if (response.rows) events.rows++;
      if (response.image) events.image = response.image;
    });
    call.on("error", (error) => resolve({ error, events }));
    call.on("end", () => resolve({ error: null, events }));
  });
}

let checks = 0;
const pass = (what) => console.log(`ok ${++checks} - ${what}`);

for (const [what, value] of [["no metadata", ""], ["a wrong key", "Bearer sk-wrong"],
                             ["no Bearer", key]]) {
  const list = await listModels(metadata(value));
  assert.equal(list.error?.code, grpc.status.UNAUTHENTICATED, `ListModels with ${what}`);
  const stream = await generate(metadata(value));
  assert.equal(stream.error?.code, grpc.status.UNAUTHENTICATED, `Generate with ${what}`);
  assert.match(stream.error.details, /^authorization: /);
  pass(`${what}: UNAUTHENTICATED`);
}
const list = await listModels(metadata(`Bearer ${key}`));
assert.equal(list.error, null);
assert.ok(list.response.models.some((m) => m.name === model));
const stream = await generate(metadata(`Bearer ${key}`));
assert.equal(stream.error, null, String(stream.error));
assert.ok(stream.events.rows > 0);
const grid = list.response.models.find((m) => m.name === model).grid_size;
assert.equal(stream.events.image.tokens.length, grid * grid);
pass(`the key: ${stream.events.rows} rows events and a ${grid}x${grid}-token image`);
client.close();
