#!/usr/bin/env bash
# The whole path from upstream files to an image for a text prompt, on tiny files made on the
# spot in the upstream layouts (random weights: the images are noise; the path is the real one):
#
#   tools/convert/try_tiny.sh [OUT]          (OUT defaults to out/try_tiny)
#
# (seconds after the build; the build itself takes minutes the first time)
#
# 1. builds the server and the client (bazel build //server:mulo_server //client:mulo_client);
# 2. writes tiny upstream files into OUT/upstream (tests/tools/tiny_upstream.py and
#    convert_tiny_families.py): Tar's AR-DTok at 512 and 256 px (.pth), TA-Tok (.pth), a VQ
#    (.pt) and its MLLM (a Hugging Face Qwen2 directory with Tar's tokenizer.json); a LlamaGen t2i
#    GPT with a FLAN-T5 directory; a LlamaGen c2i GPT; a Janus-Pro directory;
# 3. converts them with convert.py into the model repository OUT/repository (each command is
#    printed; the tiny sizes llama-abs-tiny, GPT-tiny and VQ-tiny are added to convert.py's
#    registries for the run, where real files use upstream's names: llama-abs-LP, GPT-XL, VQ-16);
# 4. starts mulo_server on free ports, sends "a red fox in the snow" to Tar (its MLLM writes the
#    TA-Tok ids), LlamaGen t2i (FLAN-T5) and Janus-Pro, and a class label to LlamaGen c2i, with
#    mulo_client; writes the images to OUT/images/*.png; stops the server.
#
# MULO_SERVER and MULO_CLIENT name binaries to use instead of building them (the test does).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-out/try_tiny}
prompt="a red fox in the snow"
step() { echo; echo "== $*"; }

if [[ -n ${MULO_SERVER:-} && -n ${MULO_CLIENT:-} ]]; then
  server=$MULO_SERVER client=$MULO_CLIENT
else
  step "building the server and the client"
  echo "+ bazel build //server:mulo_server //client:mulo_client"
  bazel build //server:mulo_server //client:mulo_client
  server=bazel-bin/server/mulo_server client=bazel-bin/client/mulo_client
fi

step "writing tiny upstream files into $out/upstream and converting them into $out/repository"
rm -rf "$out/upstream" "$out/repository" "$out/images"
mkdir -p "$out/images"
if ! /usr/bin/python3 tests/tools/convert_tiny_families.py "$out" >"$out/convert.log" 2>&1; then
  cat "$out/convert.log"
  echo "try_tiny: the conversion failed (above)" >&2
  exit 1
fi
grep -v '^  wrote ' "$out/convert.log"

step "starting mulo_server on free ports"
echo "+ $server --model_repository=$out/repository --host=127.0.0.1 --port=0 --http_port=0 --metrics_port=0"
"$server" --model_repository="$out/repository" --host=127.0.0.1 --port=0 --http_port=0 \
  --metrics_port=0 >"$out/ports" 2>"$out/server.log" &
pid=$!
stop() {
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "stopped mulo_server (pid $pid); its log: $out/server.log"
  fi
}
trap stop EXIT
for _ in $(seq 1 300); do
  grep -q "listening on port" "$out/ports" 2>/dev/null && grep -q "serving" "$out/server.log" &&
    break
  if ! kill -0 "$pid" 2>/dev/null; then
    cat "$out/server.log"
    echo "try_tiny: mulo_server exited (its log above)" >&2
    exit 1
  fi
  sleep 0.1
done
grep -q "serving" "$out/server.log" || { cat "$out/server.log"; echo "try_tiny: mulo_server did not start" >&2; exit 1; }
addr="127.0.0.1:$(sed -n 's/.*listening on port \([0-9]*\) .*/\1/p' "$out/ports")"
grep "serving" "$out/server.log"
echo "+ $client models --server=$addr"
"$client" models --server="$addr"

step "asking each family for an image"
generate() {  # family, then the condition flags
  local family=$1
  shift
  echo "+ $(printf '%q ' "$client" generate --server="$addr" --model="$family" "$@" --seed=1 \
    --out="$out/images/$family.png")"
  "$client" generate --server="$addr" --model="$family" "$@" --seed=1 \
    --out="$out/images/$family.png"
}
generate tar --prompt="$prompt"
generate llamagen-t2i --prompt="$prompt"
generate janus-pro --prompt="$prompt"
generate llamagen-c2i --class_label=3

step "done"
stop
trap - EXIT
ls -l "$out"/images/*.png
echo "try_tiny: 4 images in $out/images (tar, llamagen-t2i and janus-pro from the prompt" \
  "\"$prompt\", llamagen-c2i from class 3); upstream files in $out/upstream, the families in" \
  "$out/repository"
