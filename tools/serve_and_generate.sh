#!/usr/bin/env bash
# One command from a fresh clone to a generated image: installs what is missing, builds the
# server and the client, starts mulo_server with the bundled models, generates an image with
# mulo_client and says where the PNG is. The server keeps running (its PID and log are
# printed) so more requests can follow; stop it with `kill <pid>`.
#
#   tools/serve_and_generate.sh ["prompt"] [--model_repository=DIR] [--model=NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt="a large red circle in the center on a blue background"
repository=models
model=synth
for arg in "$@"; do
  case "$arg" in
    --model_repository=*) repository="${arg#*=}" ;;
    --model=*) model="${arg#*=}" ;;
    *) prompt="$arg" ;;
  esac
done

tools/setup.sh
bazel build //server:mulo_server //client:mulo_client
if [[ ! -f "$repository/$model/family.json" || ! -f "$repository/$model/target/model.safetensors" ]]; then
  echo "serve: $repository/$model has no trained weights yet (train them with" \
       "/usr/bin/python3 tools/synth/train_all.py); to try the server on random weights use" \
       "--model_repository=tests/data/repository --model=tiny" >&2
  exit 1
fi

mkdir -p out
log=out/mulo_server.log
source tools/blas_env.sh  # OpenBLAS's fast kernels where it would pick its generic ones
# The conventional ports (HTTP 8000, gRPC 8001, metrics 8002, as the README's commands use)
# when all three are free; otherwise free ones, printed below.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports=(--http_port=8000 --port=8001 --metrics_port=8002)
if in_use 8000 || in_use 8001 || in_use 8002; then
  echo "serve: a port of 8000-8002 is taken; serving on free ports instead" >&2
  ports=(--http_port=0 --port=0 --metrics_port=0)
fi
bazel-bin/server/mulo_server --model_repository="$repository" --host=127.0.0.1 "${ports[@]}" \
  >out/mulo_server.ports 2>"$log" &
pid=$!
for _ in $(seq 1 600); do
  if grep -q "listening on port" out/mulo_server.ports 2>/dev/null && grep -q "serving" "$log"; then
    break
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "serve: mulo_server exited; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
port=$(sed -n 's/.*listening on port \([0-9]*\) (metrics on port \([0-9]*\)).*/\1/p' out/mulo_server.ports)
metrics_port=$(sed -n 's/.*(metrics on port \([0-9]*\)).*/\1/p' out/mulo_server.ports)
http_port=$(sed -n 's/.*HTTP API on port \([0-9]*\).*/\1/p' out/mulo_server.ports)
echo "mulo_server (pid $pid) serves $repository: gRPC on 127.0.0.1:$port, the OpenAI API and" \
     "playground on http://127.0.0.1:$http_port/, metrics on" \
     "http://127.0.0.1:$metrics_port/metrics; log in $log"
bazel-bin/client/mulo_client generate --server="127.0.0.1:$port" --model="$model" \
  --prompt="$prompt" --seed=1 --out=out/image.png
echo "image: $(pwd)/out/image.png"
echo "stop the server with: kill $pid"
