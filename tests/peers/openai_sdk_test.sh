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
kill $pid

# With API keys: a wrong key gets the SDK's AuthenticationError, the right one works. A fresh
# directory, so that nothing of the first server's output is read as the second's.
work=$(mktemp -d)
echo "sk-sdk-test" >"$work/keys"
start_server tests/data/repository "$work" --api_keys_file="$work/keys"
MULO_API_KEY=sk-wrong MULO_EXPECT_UNAUTHORIZED=1 \
  node "$peers/openai_sdk_test.mjs" "http://127.0.0.1:$http_port/v1" tiny ||
  fail "openai SDK with a wrong key"
MULO_API_KEY=sk-sdk-test node "$peers/openai_sdk_test.mjs" "http://127.0.0.1:$http_port/v1" tiny ||
  fail "openai SDK with the right key"
