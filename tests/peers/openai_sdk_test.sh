#!/usr/bin/env bash
# The official openai npm SDK against mulo_server's HTTP API (tests/peers/openai_sdk_test.mjs).
# Its package comes from tests/peers/package-lock.json, installed by tools/setup.sh.
set -euo pipefail
source tests/tools/serve_lib.sh
peers=$(dirname "$(readlink -f tests/peers/openai_sdk_test.mjs)")
[[ -d "$peers/node_modules/openai" ]] ||
  fail "the openai package is not installed in $peers (run tools/setup.sh)"
work=$(mktemp -d)
start_server tests/data/repository "$work"
node "$peers/openai_sdk_test.mjs" "http://127.0.0.1:$http_port/v1" tiny ||
  { tail -20 "$work/server.log"; fail "openai SDK checks"; }
