#!/usr/bin/env bash
# Popular OpenAI clients' request bodies replayed against mulo_server
# (tests/peers/client_payloads_test.mjs), with API keys on and the clients' model names mapped
# to the tiny family by --model_aliases.
set -euo pipefail
source tests/tools/serve_lib.sh
peers=$(dirname "$(readlink -f tests/peers/client_payloads_test.mjs)")
work=$(mktemp -d)
echo "sk-clients" >"$work/keys"
aliases=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(",".join(sorted({json.loads(p["body"]).get("model") for p in d["payloads"]} - {None})))' \
  "$peers/client_payloads.json" | tr ',' '\n' | sed 's/$/=tiny/' | paste -sd, -)
start_server tests/data/repository "$work" --api_keys_file="$work/keys" --model_aliases="$aliases"
node "$peers/client_payloads_test.mjs" "http://127.0.0.1:$http_port" sk-clients ||
  { tail -20 "$work/server.log"; fail "client payloads"; }
kill $pid
