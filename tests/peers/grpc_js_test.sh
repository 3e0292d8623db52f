#!/usr/bin/env bash
# gRPC's own Node client against mulo_server with API keys (tests/peers/grpc_js_test.mjs).
set -euo pipefail
source tests/tools/serve_lib.sh
peers=$(dirname "$(readlink -f tests/peers/grpc_js_test.mjs)")
[[ -d "$peers/node_modules/@grpc/grpc-js" ]] ||
  fail "@grpc/grpc-js is not installed in $peers (run tools/setup.sh)"
work=$(mktemp -d)
echo "sk-grpc-js" >"$work/keys"
start_server tests/data/repository "$work" --api_keys_file="$work/keys"
proto_root=$(dirname "$(dirname "$(dirname "$(readlink -f proto/mulo/v1/image_generation.proto)")")")
node "$peers/grpc_js_test.mjs" "$addr" "$proto_root" sk-grpc-js tiny ||
  { tail -20 "$work/server.log"; fail "grpc-js checks"; }
