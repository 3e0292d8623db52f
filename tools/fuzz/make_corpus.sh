#!/usr/bin/env bash
# Writes the fuzz targets' seed corpus (tests/fuzz/corpus/<target>/) from the repository's own
# files: small hand-made safetensors files, the tiny test family's JSON, requests encoded by
# protoc from text, and held-out captions. Re-running gives the same files.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus
mkdir -p "$out"/{safetensors,config,request,caption,grpc_surface}_fuzzer
# The seeds are rewritten; committed crash reproducers (crash-*) stay.
find "$out"/{safetensors,config,request,caption,grpc_surface}_fuzzer -type f ! -name 'crash-*' -delete

/usr/bin/python3 - "$out/safetensors_fuzzer" <<'PY'
import json, struct, sys
out = sys.argv[1]
def write(name, tensors):
    header, data = {}, b""
    for key, (dtype, shape, raw) in tensors.items():
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    open(f"{out}/{name}", "wb").write(struct.pack("<Q", len(text)) + text + data)
write("f32_2x3", {"w": ("F32", [2, 3], struct.pack("<6f", *range(6)))})
write("mixed", {"h": ("F16", [2], struct.pack("<2e", 1.0, -2.0)),
                "b": ("BF16", [2], bytes([0x80, 0x3f, 0x00, 0xc0])),
                "i": ("I64", [3], struct.pack("<3q", 1, 2, 3)),
                "u": ("U8", [1, 2], bytes([7, 9]))})
write("empty_tensor", {"e": ("F32", [0, 4], b"")})
write("no_tensors", {})
PY

for f in tests/data/repository/tiny/family.json tests/data/repository/tiny/*/config.json; do
  cp "$f" "$out/config_fuzzer/$(echo "$f" | tr / _)"
done
echo '{"tau": 0.5, "pooling": "multiplicative", "k": 4, "lambda": 2, "radius": 1}' \
  > "$out/config_fuzzer/mulo_options.json"

proto=proto/mulo/v1/image_generation.proto
encode() { protoc --encode=mulo.v1.GenerateRequest -I. "$proto" > "$out/request_fuzzer/$1"; }
encode ar <<<'model: "tiny" prompt: "a red circle in the center on a blue background" sampling { seed: 3 }'
encode mulo <<<'model: "tiny" prompt: "red circle at top left, over a white background" mulo { tau: 0.4 k: 8 radius: 2 draft_rows: 4 resample: WAVEFRONT resample_window: 4 }'
encode eagle <<<'model: "tiny" prompt: "a blue square in the top right on a green background" eagle { total_tokens: 8 depth: 4 top_k: 2 }'
encode peanut <<<'model: "tiny" prompt: "a blue square in the top right on a green background" peanut { l_d: 1 l_k: 3 init: VERTICAL_REPEAT lantern_delta: 0.1 }'
encode gsd <<<'model: "tiny" prompt: "a small pink circle in the center on a purple background" gsd { window: 4 group_size: 3 }'
encode features <<<'model: "tiny" condition: [0.5, -1, 2] stream { rows: false preview_every_rows: 4 } image_format: JPEG'

/usr/bin/python3 - "$out/caption_fuzzer" <<'PY'
import json, sys
out = sys.argv[1]
for i, line in enumerate(open("models/synth/heldout_prompts.jsonl")):
    if i >= 8:
        break
    open(f"{out}/prompt_{i}", "w").write(json.loads(line)["prompt"])
PY
# grpc_surface_fuzzer's programs (the format is in tests/fuzz/grpc_surface_fuzzer.cc): each
# reaches one part of the surface, and the issue-38 sequences are among them.
/usr/bin/python3 - "$out/grpc_surface_fuzzer" <<'PY'
import sys
out = sys.argv[1]
GENERATE, LIST, GET, CHECK, WATCH, REFLECT_V1, REFLECT_V1ALPHA, NO_METHOD, NO_SERVICE = range(9)
NONE, MS30, MS150, S1 = range(4)
def open_(slot, method, deadline=NONE): return [0, slot, method, deadline]
def template(slot, index, how=0, where=0): return [1, slot, index, how, where]
def raw(slot, data): return [2, slot, len(data)] + list(data)
def half_close(slot): return [3, slot]
def cancel(slot): return [4, slot]
def read(slot, ms=19): return [5, slot, ms]
def await_end(slot, tenths=1): return [6, slot, tenths - 1]
seeds = {
    # Issue 38: a truncated field, alone and after a valid request, on both reflection versions.
    "reflection_v1_truncated": open_(0, REFLECT_V1) + raw(0, b"\x0a") + read(0) + await_end(0),
    "reflection_v1_valid_then_truncated": open_(0, REFLECT_V1) + template(0, 0) + raw(0, b"\x0a") + read(0) + read(0) + await_end(0),
    "reflection_v1alpha_valid_then_truncated": open_(0, REFLECT_V1ALPHA) + template(0, 0) + raw(0, b"\x0a") + read(0) + half_close(0) + await_end(0),
    "reflection_v1_every_request": open_(0, REFLECT_V1) + sum((template(0, i) for i in range(6)), []) + half_close(0) + sum((read(0) for _ in range(6)), []) + await_end(0),
    "reflection_v1_cancel_between": open_(0, REFLECT_V1) + template(0, 1) + read(0) + cancel(0) + template(0, 2) + await_end(0),
    "reflection_v1_deadline": open_(0, REFLECT_V1, MS30) + template(0, 2) + read(0) + read(0) + await_end(0),
    "generate_to_completion": open_(0, GENERATE) + template(0, 0) + half_close(0) + await_end(0, 20) + open_(1, GENERATE) + template(1, 1) + half_close(1) + await_end(1, 20),
    "generate_ar_deadline": open_(0, GENERATE, MS150) + template(0, 0) + half_close(0) + read(0) + read(0) + await_end(0),
    "generate_preview_cancel": open_(0, GENERATE) + template(0, 1) + half_close(0) + read(0) + read(0) + cancel(0) + await_end(0),
    "generate_methods": sum((open_(i % 4, GENERATE, MS150) + template(i % 4, i) + half_close(i % 4) for i in range(2, 7)), []) + read(0) + await_end(1),
    "generate_refusals": open_(0, GENERATE) + template(0, 7) + half_close(0) + await_end(0) + open_(0, GENERATE) + template(0, 8) + half_close(0) + await_end(0),
    "generate_cut_and_flipped": open_(0, GENERATE) + template(0, 0, 150, 9) + half_close(0) + await_end(0) + open_(1, GENERATE) + template(1, 0, 250, 4) + half_close(1) + await_end(1),
    "generate_two_messages": open_(0, GENERATE, S1) + template(0, 0) + template(0, 0) + half_close(0) + await_end(0),
    "generate_no_message": open_(0, GENERATE) + half_close(0) + await_end(0),
    "models": open_(0, LIST) + template(0, 0) + half_close(0) + await_end(0) + open_(1, GET) + template(1, 0) + half_close(1) + await_end(1) + open_(2, GET) + raw(2, b"\x0a\x05ti") + half_close(2) + await_end(2),
    "health_check_and_watch": open_(0, CHECK) + template(0, 1) + half_close(0) + await_end(0) + open_(1, WATCH) + template(1, 0) + half_close(1) + read(1) + cancel(1) + await_end(1),
    "health_watch_unknown": open_(0, WATCH, MS150) + template(0, 2) + half_close(0) + read(0) + await_end(0),
    "unknown_methods": open_(0, NO_METHOD) + raw(0, b"abc") + await_end(0) + open_(1, NO_SERVICE) + half_close(1) + await_end(1),
    "four_at_once": open_(0, REFLECT_V1) + open_(1, GENERATE, S1) + open_(2, WATCH) + open_(3, GET) + template(0, 0) + template(1, 3) + template(2, 0) + template(3, 0) + half_close(1) + half_close(3) + read(0) + raw(0, bytes(range(7))) + read(2) + await_end(3),
}
for name, program in seeds.items():
    open(f"{out}/{name}", "wb").write(bytes(program))
PY
echo "fuzz corpus: $(find "$out" -type f | wc -l) files in $out"
