#!/usr/bin/env bash
# Headless Chromium opens the playground page served at GET / and generates an image
# (tests/peers/playground_test.mjs; puppeteer-core from tests/peers/package-lock.json).
set -euo pipefail
source tests/tools/serve_lib.sh
peers=$(dirname "$(readlink -f tests/peers/playground_test.mjs)")
[[ -d "$peers/node_modules/puppeteer-core" ]] ||
  fail "puppeteer-core is not installed in $peers (run tools/setup.sh)"
command -v chromium >/dev/null || fail "chromium is not installed (run tools/setup.sh)"
work=$(mktemp -d)
start_server tests/data/repository "$work"
out=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
HOME=$work node "$peers/playground_test.mjs" "http://127.0.0.1:$http_port" tiny mulo "$out" ||
  { tail -20 "$work/server.log"; fail "playground"; }
grep -q "protocol=http" "$work/server.log" || fail "no HTTP request in the server's log"
