#!/usr/bin/env bash
# curl, a client nobody here wrote, against the HTTP API: `curl -N` sees the stream's
# server-sent events in order as they come (two partial images, then completed), and a plain
# request returns a PNG of the family's size.
set -euo pipefail
source tests/tools/serve_lib.sh
command -v curl >/dev/null || fail "curl is missing (run tools/setup.sh)"
work=$(mktemp -d)
start_server tests/data/repository "$work"
url="http://127.0.0.1:$http_port/v1/images/generations"

curl -sSN --max-time 60 "$url" -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "prompt": "a red circle", "stream": true, "partial_images": 2}' \
  >"$work/stream.txt"
events=$(grep '^event: ' "$work/stream.txt" | cut -d' ' -f2 | paste -sd' ')
expected="image_generation.partial_image image_generation.partial_image image_generation.completed"
[[ "$events" == "$expected" ]] || fail "events: '$events', expected '$expected'"
indices=$(grep -o '"partial_image_index":[0-9]*' "$work/stream.txt" | cut -d: -f2 | paste -sd' ')
[[ "$indices" == "0 1" ]] || fail "partial_image_index: '$indices'"

curl -sS --max-time 60 "$url" -d '{"model": "tiny", "prompt": "a red circle"}' >"$work/plain.json"
/usr/bin/python3 - "$work/plain.json" <<'PY' || fail "the plain response"
import base64, json, struct, sys
response = json.load(open(sys.argv[1]))
png = base64.b64decode(response["data"][0]["b64_json"])
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", png[16:24])
assert f"{width}x{height}" == response["size"], (width, height, response["size"])
PY
echo "ok: curl -N saw $expected; the plain response is a PNG"
