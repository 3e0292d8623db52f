#!/usr/bin/env bash
# Everything the GPU engine issue measures, on a GPU machine, in steps:
#
#   tools/gpu/run.sh [STEP...]     (default: every step, in this order)
#     info      the GPU, driver, PyTorch
#     ceilings  copy bandwidth and matrix rates (tools/gpu/ceilings.py)
#     build     tools/build_engine.sh out/gpu (engine, ar_bench, gpu_engine_test, methods_bench)
#     test      out/gpu/gpu_engine_test: CUDA vs CPU parity, greedy equality on the GPU
#     methods   methods_bench on the bundled family: CUDA with graphs, CUDA eager, and the CPU
#               of the same machine, each with per-request forward traces
#     costs     ar_bench cost tables of the bundled family's transformers on CUDA
#     replicas  full-size random replicas (Tar AR-DTok LP 512 px, LlamaGen-XL t2i 512 px) in
#               bf16: cost table, AR step vs the bandwidth floor, seconds per image
#
# Results go to RESULTS (default out/gpu/results): one log / JSON per step, summary.md with
# every table, and, when OUT is set (the device tool), OUT/results.tar.gz and OUT/summary.md
# after every step, so a run cut short still returns what it measured.
#   LIMIT=32 EAGER_LIMIT=16 CPU_LIMIT=16 IMAGES=1 (methods / replicas sizes)
# Needs: the machine's python3 with a CUDA PyTorch; .gpu/ from tools/gpu/fetch_deps.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
results=${RESULTS:-out/gpu/results}
mkdir -p "$results"
summary=$results/summary.md
steps=("$@")
((${#steps[@]})) || steps=(info ceilings build test methods costs replicas)
export PYTHONUNBUFFERED=1

publish() {
  if [[ -n "${OUT:-}" ]]; then
    tar czf "$OUT/results.tar.gz" -C "$(dirname "$results")" "$(basename "$results")"
    cp "$summary" "$OUT/summary.md"
  fi
}

section() { printf '\n## %s\n\n' "$1" | tee -a "$summary"; }

step_info() {
  section "machine"
  {
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    nproc
  } 2>&1 | tee -a "$summary"
}

step_ceilings() {
  section "ceilings"
  python3 tools/gpu/ceilings.py --json "$results/ceilings.json" 2>&1 | tee -a "$summary"
}

step_build() {
  section "build"
  local start=$SECONDS
  rm -f out/gpu/methods_bench
  tools/build_engine.sh out/gpu > "$results/build.log" 2>&1
  local rc=$?
  tail -3 "$results/build.log" | tee -a "$summary"
  echo "build rc $rc in $((SECONDS - start)) s" | tee -a "$summary"
  return $rc
}

step_test() {
  section "gpu_engine_test"
  out/gpu/gpu_engine_test > "$results/gpu_engine_test.log" 2>&1
  local rc=$?
  grep -E '^\[(gpu|  PASSED|  FAILED|  SKIPPED|==========)|gpu parity|Failure|error' \
    "$results/gpu_engine_test.log" | tee -a "$summary"
  echo "gpu_engine_test rc $rc" | tee -a "$summary"
}

methods_run() {  # name device graphs limit
  local name=$1 device=$2 graphs=$3 limit=$4
  echo "### $name" | tee -a "$summary"
  out/gpu/methods_bench --models=models/synth --prompts=models/synth/heldout_prompts.jsonl \
    --limit="$limit" --device="$device" --cuda_graphs="$graphs" \
    --out_dir="$results/methods_$name" --trace_out="$results/methods_$name/trace.jsonl" \
    > "$results/methods_$name.log" 2>&1
  echo "rc $?" >> "$results/methods_$name.log"
  sed -n '/^| method/,/^$/p;/held-out prompts/p;/^rc/p;/error/p' "$results/methods_$name.log" |
    tee -a "$summary"
}

step_methods() {
  section "methods on the bundled family"
  mkdir -p "$results"/methods_{cuda_graphs,cuda_eager,cpu}
  methods_run cuda_graphs cuda true "${LIMIT:-32}"
  publish
  methods_run cuda_eager cuda false "${EAGER_LIMIT:-16}"
  publish
  methods_run cpu cpu false "${CPU_LIMIT:-16}"
}

step_costs() {
  section "cost tables of the bundled family (CUDA, fp32)"
  for model in target drafter chain; do
    echo "### $model" | tee -a "$summary"
    out/gpu/ar_bench --model_dir="models/synth/$model" --device=cuda --cfg_scale=1.25 \
      --repeats=20 --images=3 --ceilings="$results/ceilings.json" \
      --json_out="$results/cost_synth_$model.json" > "$results/cost_synth_$model.log" 2>&1
    echo "rc $?" >> "$results/cost_synth_$model.log"
    grep -E '^\||^Full|^AR step|^rc|error' "$results/cost_synth_$model.log" | tee -a "$summary"
  done
}

step_replicas() {
  section "full-size replicas (bf16, CFG batch 2)"
  mkdir -p /tmp/replicas
  for name in tar_lp_512 llamagen_xl_t2i_512; do
    [[ -f /tmp/replicas/$name/model.safetensors ]] ||
      python3 tools/reference/random_checkpoint.py --config "tools/gpu/replicas/$name.json" \
        --out "/tmp/replicas/$name" --dtype BF16 2>&1 | tee -a "$summary"
    echo "### $name" | tee -a "$summary"
    out/gpu/ar_bench --model_dir="/tmp/replicas/$name" --device=cuda --dtype=bfloat16 \
      --repeats=10 --images="${IMAGES:-1}" --ceilings="$results/ceilings.json" \
      --json_out="$results/cost_$name.json" > "$results/cost_$name.log" 2>&1
    echo "rc $?" >> "$results/cost_$name.log"
    grep -E '^\||^Full|^AR step|^model|^rc|error' "$results/cost_$name.log" | tee -a "$summary"
    publish
  done
}

for step in "${steps[@]}"; do
  if ! declare -f "step_$step" >/dev/null; then
    echo "run.sh: unknown step '$step'" >&2
    exit 2
  fi
  echo "=== $step ($(date +%T))"
  "step_$step" || { echo "run.sh: step $step failed"; publish; [[ $step == build ]] && exit 1; }
  publish
done
echo "=== done ($(date +%T))"
