#!/usr/bin/env bash
# The playground's screenshots in docs/playground/ (shown in docs/http.md): the bundled family
# served with a key, ar and the family's `auto` choice side by side, captured by the playground
# test itself (tests/peers/playground_test.mjs) before, during and after the run.
#
#   tools/playground_screenshots.sh [DRAFTING_METHOD]   (default mulo)
set -euo pipefail
cd "$(dirname "$0")/.."
drafting=${1:-mulo}
tools/setup.sh
bazel build //server:mulo_server
source tools/blas_env.sh
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
echo "screenshots-key" >"$work/keys"
bazel-bin/server/mulo_server --model_repository=models --host=127.0.0.1 --port=0 \
  --metrics_port=0 --http_port=0 --api_keys_file="$work/keys" >"$work/ports" 2>"$work/log" &
pid=$!
for _ in $(seq 1 600); do
  grep -q "serving" "$work/log" 2>/dev/null && break
  kill -0 $pid 2>/dev/null || { cat "$work/log"; exit 1; }
  sleep 0.1
done
http_port=$(sed -n 's/.*HTTP API on port \([0-9]*\).*/\1/p' "$work/ports")
mkdir -p docs/playground "$work/shots"
node tests/peers/playground_test.mjs "http://127.0.0.1:$http_port" synth screenshots-key \
  "$work/shots" ar "$drafting"
for shot in key before during after; do
  [[ -f "$work/shots/playground_$shot.png" ]] || { echo "no $shot screenshot" >&2; exit 1; }
  cp "$work/shots/playground_$shot.png" docs/playground/
done
echo "screenshots: docs/playground/playground_{key,before,during,after}.png"
