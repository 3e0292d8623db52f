#!/usr/bin/env bash
# Headless Chromium opens the playground page served at GET / by a server that asks for a key,
# and runs ar and mulo side by side (tests/peers/playground_test.mjs; puppeteer-core from
# tests/peers/package-lock.json).
set -euo pipefail
source tests/tools/serve_lib.sh
peers=$(dirname "$(readlink -f tests/peers/playground_test.mjs)")
[[ -d "$peers/node_modules/puppeteer-core" ]] ||
  fail "puppeteer-core is not installed in $peers (run tools/setup.sh)"
command -v chromium >/dev/null || fail "chromium is not installed (run tools/setup.sh)"
work=$(mktemp -d)
echo "playground-test-key" >"$work/keys"
start_server tests/data/repository "$work" --api_keys_file="$work/keys"
out=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
HOME=$work node "$peers/playground_test.mjs" "http://127.0.0.1:$http_port" tiny \
  playground-test-key "$out" ar mulo || { tail -20 "$work/server.log"; fail "playground"; }
grep -q "protocol=http" "$work/server.log" || fail "no HTTP request in the server's log"
