#!/usr/bin/env bash
# The acceptance counters each method adds per image, read from a real mulo_server's /metrics:
# the numbers behind tests/deploy/alerts_test.yml (the MuloAcceptanceCollapsed alert must stay
# quiet for every healthy method and fire when drafts stop being accepted).
#
#   bench/acceptance_series.sh [REQUESTS]   (default 8 per method; temperature 1, one worker)
#
# Two families: the bundled one (healthy), and a copy whose drafters no longer match the target
# (a collapse as an operator would meet it: the chain and MuLo-SD drafters' vocabularies permuted,
# as if trained for another codebook, and an EAGLE head with random weights). Prints per method and family:
# drafted / accepted tokens and decoding rounds per image, and the ratios the old and the new
# alert compare (accepted / drafted, accepted / round).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-8}
source bench/server_lib.sh
bazel build //server:mulo_server //client:mulo_client >&2
mismatched=out/bench/mismatched_repository/synth
rm -rf "$(dirname "$mismatched")" && mkdir -p "$mismatched"
for entry in models/synth/*; do ln -s "$(realpath "$entry")" "$mismatched/$(basename "$entry")"; done
for component in chain drafter eagle; do
  rm "$mismatched/$component" && mkdir "$mismatched/$component"
  cp "models/synth/$component/config.json" "$mismatched/$component/"
done
/usr/bin/python3 - models/synth "$mismatched" <<'PY'
import sys
import torch
sys.path.insert(0, "tools/reference")
import safetensors_io
source, out = sys.argv[1], sys.argv[2]
gen = torch.Generator().manual_seed(38)
for component in ("chain", "drafter"):  # speculative's and MuLo-SD's drafters
    drafter = safetensors_io.load(f"{source}/{component}/model.safetensors")
    order = torch.randperm(drafter["output.weight"].shape[0], generator=gen)
    for name in ("tok_embeddings.weight", "output.weight"):  # one relabelling of the codebook
        drafter[name] = drafter[name][order].clone()
    safetensors_io.save(drafter, f"{out}/{component}/model.safetensors")
eagle = safetensors_io.load(f"{source}/eagle/model.safetensors")
for name, t in eagle.items():
    fresh = torch.ones(t.shape) if name.endswith("norm.weight") else \
        torch.randn(t.shape, generator=gen) * 0.02
    eagle[name] = fresh.to(t.dtype)
safetensors_io.save(eagle, f"{out}/eagle/model.safetensors")
PY

echo "| family | method | images | drafted / image | accepted / image | rounds / image | accepted / drafted | accepted / round |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for family in bundled mismatched; do
  repository=models
  methods=(ar speculative mulo eagle lantern lantern++ peanut sjd gsd zipar)
  if [[ $family == mismatched ]]; then
    repository=$(dirname "$mismatched")
    methods=(speculative mulo eagle lantern lantern++ peanut)  # the ones with a drafter
  fi
  start_server "out/bench/acceptance_$family.log" "out/bench/acceptance_$family.ports" \
    bazel-bin/server/mulo_server --model_repository="$repository" --host=127.0.0.1 --port=0 \
    --metrics_port=0 --http_port=0 --max_batch=1
  counter() {  # counter NAME METHOD: the counter's value for this method
    curl -s "http://127.0.0.1:$server_metrics_port/metrics" |
      awk -v n="$1" -v m="method=\"$2\"" '$1 ~ "^"n"\\{" && index($1, m) {s += $2} END {printf "%d", s}'
  }
  for method in "${methods[@]}"; do
    bazel-bin/client/mulo_client bench --server="127.0.0.1:$server_port" --model=synth \
      --method="$method" --requests="$requests" --concurrency=1 \
      --prompts_file=models/synth/heldout_prompts.jsonl >/dev/null
    drafted=$(counter mulo_spec_drafted_tokens_total "$method")
    accepted=$(counter mulo_spec_accepted_tokens_total "$method")
    rounds=$(counter mulo_decode_iterations_total "$method")
    awk -v f="$family" -v m="$method" -v n="$requests" -v d="$drafted" -v a="$accepted" \
      -v r="$rounds" 'BEGIN {
      printf "| %s | %s | %d | %.1f | %.1f | %.1f | %s | %s |\n", f, m, n, d / n, a / n, r / n,
        (d > 0 ? sprintf("%.3f", a / d) : "-"), (r > 0 ? sprintf("%.2f", a / r) : "-") }'
  done
  kill "$server_pid"
done
