#!/usr/bin/env bash
# Writes the fuzz targets' seed corpus (tests/fuzz/corpus/<target>/) from the repository's own
# files: small hand-made safetensors files, the tiny test family's JSON, requests encoded by
# protoc from text, and held-out captions. Re-running gives the same files.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus
rm -rf "$out"/{safetensors,config,request,caption}_fuzzer
mkdir -p "$out"/{safetensors,config,request,caption}_fuzzer

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
echo "fuzz corpus: $(find "$out" -type f | wc -l) files in $out"
