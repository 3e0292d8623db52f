#!/usr/bin/env bash
# Everything the GPU engine issue measures, on a GPU machine, in steps:
#
#   tools/gpu/run.sh [STEP...]     (default: every step, in this order)
#     info      the GPU, driver, PyTorch
#     ceilings  copy bandwidth and matrix rates (tools/gpu/ceilings.py)
#     build     tools/build_engine.sh out/gpu (engine, ar_bench, gpu_engine_test, methods_bench,
#               mulo_server, mulo_client; one compile pool of JOBS)
#     test      out/gpu/gpu_engine_test: CUDA vs CPU parity, greedy equality on the GPU
#     methods   methods_bench on the bundled family, every method, CUDA with graphs (with
#               per-request forward traces): LIMIT prompts, the tree methods TREE_LIMIT; CUDA
#               eager and the machine's CPU when EAGER_LIMIT / CPU_LIMIT are set
#     buckets   graph buckets paired on one machine: the fast methods (BUCKET_LIMIT prompts) and
#               the tree methods (TREE_BUCKET_LIMIT) with exact-shape graphs, then with buckets
#               (padded rows, masked forwards captured: forward_graphs.h)
#     pool      issue 61: every method with the KV-cache pools and their graphs made at load
#               (methods_bench --kv_pool: ar's rows, speculative's drafts and verification, SJD's
#               window in graphs), POOL_LIMIT prompts (TREE_POOL_LIMIT for the tree methods),
#               beside ar with per-request graphs (today's path) on the same prompts
#     pool_ops  operators and host reads per step with the pools (OPS_LIMIT prompts)
#     filters   issue 61: requests with top-k and top-p (FILTER_TOP_K, FILTER_TOP_P; default
#               50 and 0.9) over the pools' filtered graphs, FILTER_METHODS beside ar with the
#               same filters (FILTER_LIMIT prompts), then their operators and reads per step
#     peer      issue 63: the compiled PyTorch peer (tools/gpu/peer_compiled.py) on the
#               Janus-Pro-1B and Tar LP 512 replicas in bf16 (PEER_REPLICAS, default "janus
#               tar") beside mulo's step (token_model_bench, eager and graphs), the peer's
#               logits checked against mulo's (PEER_MODES: eager and torch.compile modes,
#               default eager,reduce-overhead)
#     fused     issue 63: the fused decode kernels (engine/kernels): gpu_engine_test's fused cases
#               (each kernel against its reference; whole forwards against the CPU), then
#               kernels per layer, the AR step and s per image with the kernels off and on, eager
#               and graphs side by side (ar_bench --fused=both) on the bundled target (fp32) and
#               the Tar LP 512 replica (bf16), and token_model_bench's step on the Janus-Pro-1B
#               replica (bf16, graphs) with them off and on (FUSED_REPLICAS="tar janus"; a dry
#               run anywhere: FUSED_DEVICE=cpu FUSED_REPLICAS= with out/gpu's programs linked
#               to the Bazel builds)
#     ops       methods_bench --count_ops: operators and host reads per decode step, one prompt
#     auto      tools/synth/calibrate_auto.py --device=cuda on AUTO_LIMIT validation prompts
#               (default 16) into a copy of the bundled family (RESULTS/auto_family/family.json):
#               the table `method: auto` chooses from on CUDA, to commit into models/synth
#     costs     ar_bench cost tables of the bundled family's transformers on CUDA
#     replicas  full-size random replicas in the upstream layouts, converted by tools/convert
#               (write_replicas.py: Tar AR-DTok LP 512 px with its 256 px drafter, LlamaGen GPT-XL
#               c2i 384 px) in bf16: cost table, AR step vs the bandwidth floor, s per image
#     janus     the Janus-Pro-1B replica (write_replicas.py --only janus-pro-1b, converted by
#               convert.py janus-family), token_model_bench on CUDA in bf16, eager and graphs:
#               s per CFG decode step and per Jacobi window at 0 and 288 cached codes
#     eagle     EAGLE-head training cost on the Janus-Pro-1B replica (tools/gpu/eagle_cost.py:
#               train_eagle_head.py's step on random code sequences; EAGLE_BATCH images per step)
#     serve     mulo_server on CUDA: the bundled family through mulo_client bench (ar, mulo,
#               eagle, zipar at concurrency 1; ar and mulo at concurrency 8 on eight workers or
#               batched on one)
#     serve_workers  ar and mulo at concurrency 8 on eight workers, CUDA graphs on and off
#     serve_replica  the converted Tar replica through the server (s per 512 px image, the
#               second warm), batched and alone, with and without graphs
#     loop      one worker's engine loop (issue 60): images/s at concurrency 1, 8 and 32 for
#               ar, sjd and mulo (the family's methods among them) on the bundled family and
#               the Janus-Pro-1B replica, one server each: KV-cache pools and CUDA graphs made
#               at load, shared GEMMs, every method batching (LOOP_FAMILIES="synth janus",
#               LOOP_METHODS="ar sjd mulo", LOOP_CONCURRENCY="1 8 32")
#
# Results go to RESULTS (default out/gpu/results): one log / JSON per step, summary.md with
# every table, and, when OUT is set (the device tool), OUT/results.tar.gz and OUT/summary.md
# after every step, so a run cut short still returns what it measured.
#   LIMIT=16 TREE_LIMIT=4 EAGER_LIMIT=0 CPU_LIMIT=0 OPS_LIMIT=1 IMAGES=1 REQUESTS=8 (methods /
#   replicas / serve sizes; a limit of 0 skips that run)  METHODS / TREE_METHODS (the lists)
#   REPLICAS=/tmp/replicas (written once, ~10 GB)  ONLY_REPLICA=tar|llamagen-c2i (default both)
#   SERVE_DEVICE=cuda METHODS_DEVICE=cuda (cpu: a dry run of serve / methods anywhere)
#   SERVE_METHODS="ar mulo eagle zipar" (concurrency 1)
#   BUDGET_S=0: with N > 0, the whole run ends within N seconds: a step starts only when what
#   is left covers its least useful time (NEED), and each program runs under `timeout` with
#   what is left less a margin for publishing, so a lease of minutes returns every table it
#   could measure and says which steps it skipped.
# Needs: the machine's python3 with a CUDA PyTorch; .gpu/ from tools/gpu/fetch_deps.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
results=${RESULTS:-out/gpu/results}
mkdir -p "$results"
summary=$results/summary.md
steps=("$@")
((${#steps[@]})) || steps=(info ceilings build test methods ops costs replicas serve serve_workers serve_replica)
replicas=${REPLICAS:-/tmp/replicas}
export PYTHONUNBUFFERED=1
# shellcheck source=bench/server_lib.sh
source bench/server_lib.sh  # start_server, for the serve step
budget=${BUDGET_S:-0}
began=$SECONDS
# methods_bench's selectors, from the method registry: the methods without the EAGLE head
# (chains, windows, SJD-PAC's tree) run fast; the head's tree methods draft eagerly.
fast_methods=without:eagle
tree_methods=with:eagle
all_methods=available
# The least time, in seconds, in which a step measures something worth returning.
declare -A need=([info]=5 [ceilings]=25 [build]=150 [test]=40 [methods]=60 [buckets]=60
                 [pool]=60 [pool_ops]=40 [filters]=60 [peer]=150 [fused]=120
                 [ops]=40 [auto]=90 [costs]=60
                 [replicas]=240 [janus]=150 [eagle]=90 [serve]=60 [serve_workers]=60 [serve_replica]=120
                 [loop]=120)

left() { if ((budget)); then echo $((budget - (SECONDS - began))); else echo 1000000; fi; }

# bounded CMD...: CMD under a timeout of what is left of the budget, less 15 s for publishing.
bounded() {
  local seconds=$(($(left) - 15))
  if ((seconds < 5)); then
    echo "run.sh: out of time, not run: $*"
    return 124
  fi
  timeout --kill-after=5 "$seconds" "$@"
}

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
  bounded python3 tools/gpu/ceilings.py --json "$results/ceilings.json" 2>&1 | tee -a "$summary"
}

step_build() {
  section "build"
  local start=$SECONDS
  rm -f out/gpu/methods_bench out/gpu/mulo_server out/gpu/mulo_client
  bounded tools/build_engine.sh out/gpu > "$results/build.log" 2>&1
  local rc=$?
  grep -m 20 -E 'FAILED|error' "$results/build.log" | tee -a "$summary"
  tail -2 "$results/build.log" | tee -a "$summary"
  echo "build rc $rc in $((SECONDS - start)) s" | tee -a "$summary"
  return $rc
}

step_test() {
  section "gpu_engine_test"
  bounded out/gpu/gpu_engine_test > "$results/gpu_engine_test.log" 2>&1
  local rc=$?
  grep -E '^\[(gpu|  PASSED|  FAILED|  SKIPPED|==========)|gpu parity|Failure|error' \
    "$results/gpu_engine_test.log" | tee -a "$summary"
  echo "gpu_engine_test rc $rc" | tee -a "$summary"
}

methods_run() {  # name device graphs limit
  local name=$1 device=$2 graphs=$3 limit=$4
  shift 4  # the rest: more methods_bench flags
  ((limit > 0)) || return 0
  mkdir -p "$results/methods_$name"
  echo "### $name" | tee -a "$summary"
  bounded out/gpu/methods_bench --models=models/synth \
    --prompts=models/synth/heldout_prompts.jsonl --methods="${METHODS:-$all_methods}" \
    --limit="$limit" --device="$device" --cuda_graphs="$graphs" \
    --out_dir="$results/methods_$name" --trace_out="$results/methods_$name/trace.jsonl" "$@" \
    > "$results/methods_$name.log" 2>&1
  echo "rc $?" >> "$results/methods_$name.log"
  # The progress bar's carriage returns put its last line before the first table's header.
  tr '\r' '\n' < "$results/methods_$name.log" |
    sed -n '/^| method/,/^$/p;/held-out prompts/p;/^rc/p;/error/p' |
    tee -a "$summary"
}

step_methods() {
  section "methods on the bundled family"
  local device=${METHODS_DEVICE:-cuda}  # cpu: a dry run anywhere
  # The tree methods dispatch 7,000-27,000 operators per step (docs/gpu.md), so on a lease of
  # minutes they get fewer prompts than the others; each run has its own ar baseline.
  METHODS=${METHODS:-$fast_methods} methods_run cuda_graphs "$device" true "${LIMIT:-16}"
  publish
  METHODS=${TREE_METHODS:-$tree_methods} methods_run cuda_graphs_trees "$device" true \
    "${TREE_LIMIT:-4}"
  publish
  methods_run cuda_eager "$device" false "${EAGER_LIMIT:-0}"
  publish
  methods_run cpu cpu false "${CPU_LIMIT:-0}"
}

step_buckets() {
  section "graph buckets: exact shapes, then buckets (paired, this machine)"
  local device=${METHODS_DEVICE:-cuda} shapes
  for shapes in exact buckets; do
    local on=true
    [[ $shapes == exact ]] && on=false
    METHODS=${BUCKET_METHODS:-ar,mulo,sjd,zipar,speculative} methods_run "graphs_$shapes" \
      "$device" true "${BUCKET_LIMIT:-8}" --cuda_graph_buckets=$on
    publish
  done
  for shapes in exact buckets; do
    local on=true
    [[ $shapes == exact ]] && on=false
    METHODS=${TREE_BUCKET_METHODS:-ar,eagle,lantern,peanut} methods_run "graphs_trees_$shapes" \
      "$device" true "${TREE_BUCKET_LIMIT:-2}" --cuda_graph_buckets=$on
    publish
  done
}

# Issue 61's table: every method with the pools' graphs, and ar with per-request graphs (the
# path before the pools) on the same prompts, then the pools' operators and host reads per step.
step_pool() {
  section "KV-cache pools and graphs made at load (issue 61)"
  local device=${METHODS_DEVICE:-cuda}
  METHODS=ar methods_run cuda_graphs_ar "$device" true "${POOL_LIMIT:-4}"
  publish
  # POOL_ROWS: MuLo-SD's ZipAR drafter too (its wavefront forwards from the drafter pool's
  # graphs, one read per step; benchmarks.md, "MuLo-SD's ZipAR drafter from graphs").
  METHODS=${METHODS:-$fast_methods} methods_run cuda_pool "$device" true "${POOL_LIMIT:-4}" \
    --kv_pool --rows="${POOL_ROWS:-mulo:zipar_window=2}"
  publish
  METHODS=${TREE_METHODS:-$tree_methods} methods_run cuda_pool_trees "$device" true \
    "${TREE_POOL_LIMIT:-1}" --kv_pool
}

step_pool_ops() {
  section "operators and host reads per decode step with the pools (issue 61)"
  methods_run cuda_pool_ops "${METHODS_DEVICE:-cuda}" true "${OPS_LIMIT:-1}" --kv_pool --count_ops \
    --rows="${POOL_ROWS:-mulo:zipar_window=2}"
}

# Issue 61: requests that filter by top-k and top-p (upstream's published settings do) replay
# the pools' filtered graphs (row_graphs.h, Shape::filters); each run has its own filtered ar.
step_filters() {
  section "top-k and top-p requests in the pools' graphs (issue 61)"
  local device=${METHODS_DEVICE:-cuda}
  local methods=${FILTER_METHODS:-ar,speculative,mulo,sjd,mc_sjd,zipar}
  local filters=(--kv_pool --top_k="${FILTER_TOP_K:-50}" --top_p="${FILTER_TOP_P:-0.9}")
  METHODS=$methods methods_run cuda_pool_filters "$device" true "${FILTER_LIMIT:-4}" \
    "${filters[@]}"
  publish
  METHODS=$methods methods_run cuda_pool_filters_ops "$device" true 1 "${filters[@]}" --count_ops
}

# Issue 63: mulo's step and the compiled peer's on the same weights, the peer checked against
# mulo's logits of a fixed sequence; on each of PEER_REPLICAS (janus: Janus-Pro-1B; tar: the
# Tar LP 512 px target, whose check compares the null row: the bench's features are random).
step_peer() {
  local name title family graphs check=()
  for name in ${PEER_REPLICAS:-janus tar}; do
    case $name in
      janus) title="Janus-Pro-1B" family=$replicas/repository/janus-pro-1b ;;
      tar) title="Tar LP 512" family=$replicas/repository/tar ;;
      *) echo "peer: unknown replica $name (janus, tar)" | tee -a "$summary"; continue ;;
    esac
    section "the compiled PyTorch peer: $title replica, bf16, guidance batch 2 (issue 63)"
    if [[ $name == janus ]]; then write_janus_replica; else ONLY_REPLICA=tar write_replicas; fi ||
      continue
    for graphs in on off; do
      check=()  # mulo's logits for the peer's check, once
      [[ $graphs == on ]] && check=(--logits_out="$results/${name}_mulo_logits.safetensors")
      bounded out/gpu/token_model_bench --family="$family" --device="${PEER_DEVICE:-cuda}" \
        --dtype=bfloat16 --graphs=$graphs --contexts=0,288 --windows=1 --repeats=10 "${check[@]}" \
        > "$results/peer_${name}_mulo_graphs_$graphs.log" 2>&1
      echo "rc $?" >> "$results/peer_${name}_mulo_graphs_$graphs.log"
      echo "mulo, graphs $graphs:" | tee -a "$summary"
      grep -E '^\| [0-9]+ \| 1 \||^wrote|^rc|rror' \
        "$results/peer_${name}_mulo_graphs_$graphs.log" | tee -a "$summary"
    done
    publish
    bounded python3 tools/gpu/peer_compiled.py --family "$family" --device="${PEER_DEVICE:-cuda}" \
      --check "$results/${name}_mulo_logits.safetensors" \
      --modes "${PEER_MODES:-eager,reduce-overhead}" \
      --json "$results/peer_$name.json" > "$results/peer_$name.log" 2>&1
    echo "rc $?" >> "$results/peer_$name.log"
    grep -vE '^\{' "$results/peer_$name.log" | tail -20 | tee -a "$summary"
    publish
  done
}

# Issue 63: the fused kernels' parity first (a wrong kernel makes the timings moot), then the
# step with them off and on, paired in one program per model.
step_fused() {
  section "fused decode kernels (issue 63): parity"
  bounded out/gpu/gpu_engine_test --gtest_filter='*Fused*' > "$results/fused_test.log" 2>&1
  echo "rc $?" >> "$results/fused_test.log"
  grep -E '^\[(fused|gpu fused)|^\[  (PASSED|FAILED|SKIPPED)|Failure|^rc' \
    "$results/fused_test.log" | tee -a "$summary"
  publish
  section "fused decode kernels: kernels per layer, AR step, s per image (off / on)"
  echo "### synth target, fp32" | tee -a "$summary"
  local ceilings=()  # the floor's bandwidth, when the ceilings step ran
  [[ -f $results/ceilings.json ]] && ceilings=(--ceilings="$results/ceilings.json")
  bounded out/gpu/ar_bench --model_dir=models/synth/target --device="${FUSED_DEVICE:-cuda}" \
    --cfg_scale=1.25 --fused=both --new_tokens=1 --repeats=20 --images=2 "${ceilings[@]}" \
    --json_out="$results/fused_synth.json" > "$results/fused_synth.log" 2>&1
  echo "rc $?" >> "$results/fused_synth.log"
  grep -E '^\||^Full|^AR step|^operators|^rc|rror' "$results/fused_synth.log" | tee -a "$summary"
  publish
  local name
  for name in ${FUSED_REPLICAS-tar janus}; do
    if [[ $name == tar ]]; then
      ONLY_REPLICA=tar write_replicas || continue
      echo "### Tar LP 512 replica, bf16" | tee -a "$summary"
      bounded out/gpu/ar_bench --model_dir="$replicas/repository/tar/target" \
        --device="${FUSED_DEVICE:-cuda}" --dtype=bfloat16 --fused=both --new_tokens=1 \
        --repeats=10 --images="${IMAGES:-1}" "${ceilings[@]}" --json_out="$results/fused_tar.json" \
        > "$results/fused_tar.log" 2>&1
      echo "rc $?" >> "$results/fused_tar.log"
      grep -E '^\||^Full|^AR step|^operators|^rc|rror' "$results/fused_tar.log" | tee -a "$summary"
    else
      write_janus_replica || continue
      local fused janus_graphs=on
      [[ ${FUSED_DEVICE:-cuda} == cuda ]] || janus_graphs=off
      for fused in off on; do
        echo "### Janus-Pro-1B replica, bf16, graphs, fused $fused" | tee -a "$summary"
        bounded out/gpu/token_model_bench --family="$replicas/repository/janus-pro-1b" \
          --device="${FUSED_DEVICE:-cuda}" --dtype=bfloat16 --graphs="$janus_graphs" \
          --fused=$fused --contexts=0,288 --windows=1 \
          --repeats=10 > "$results/fused_janus_$fused.log" 2>&1
        echo "rc $?" >> "$results/fused_janus_$fused.log"
        grep -E '^\| [0-9]+ \| 1 \||^rc|rror' "$results/fused_janus_$fused.log" | tee -a "$summary"
      done
    fi
    publish
  done
}

# Operators and host reads per decode step, every method on one prompt (the observer slows
# every operator: no timings).
step_auto() {
  section "auto: the CUDA calibration table"
  local family="$results/auto_family"
  mkdir -p "$family"
  # The bundled family's folders, linked; its family.json copied, for the tool to write.
  local entry
  for entry in models/synth/*; do
    [[ $(basename "$entry") == family.json ]] || ln -sfn "$PWD/$entry" "$family/"
  done
  cp models/synth/family.json "$family/family.json"
  # AUTO_DEVICE=cpu AUTO_BENCH=bazel-bin/bench/methods_bench: a dry run anywhere.
  bounded python3 tools/synth/calibrate_auto.py --models="$family" \
    --device="${AUTO_DEVICE:-cuda}" --count="${AUTO_LIMIT:-16}" \
    --bench="${AUTO_BENCH:-out/gpu/methods_bench}" \
    --out_dir="$results/calibrate_auto" 2>&1 | tee -a "$summary"
}

step_ops() {
  section "operators per decode step"
  methods_run cuda_ops "${METHODS_DEVICE:-cuda}" true "${OPS_LIMIT:-1}" --count_ops
}

step_costs() {
  section "cost tables of the bundled family (CUDA, fp32)"
  for model in target drafter chain; do
    echo "### $model" | tee -a "$summary"
    bounded out/gpu/ar_bench --model_dir="models/synth/$model" --device=cuda --cfg_scale=1.25 \
      --repeats=20 --images=3 --ceilings="$results/ceilings.json" \
      --json_out="$results/cost_synth_$model.json" > "$results/cost_synth_$model.log" 2>&1
    echo "rc $?" >> "$results/cost_synth_$model.log"
    # ar_bench's "operators of one 1-token forward" line: kernels per layer on the device.
    grep -E '^\||^Full|^AR step|^operators|^rc|error' "$results/cost_synth_$model.log" | tee -a "$summary"
  done
}

write_replicas() {
  local want=${ONLY_REPLICA:-tar llamagen-c2i} family missing=0
  for family in $want; do [[ -f $replicas/repository/$family/family.json ]] || missing=1; done
  ((missing)) || return 0
  bounded python3 tools/convert/write_replicas.py --out "$replicas" ${ONLY_REPLICA:+--only "$ONLY_REPLICA"} > "$results/write_replicas.log" 2>&1
  local rc=$?
  tail -2 "$results/write_replicas.log" | tee -a "$summary"
  return $rc
}

step_replicas() {
  section "full-size replicas (bf16, CFG batch 2)"
  write_replicas || return 1
  local entry name
  for entry in tar_lp_512:tar/target tar_lp_256:tar/drafter llamagen_xl_c2i_384:llamagen-c2i/target; do
    name=${entry%%:*}
    [[ -f $replicas/repository/${entry#*:}/config.json ]] || continue
    echo "### $name" | tee -a "$summary"
    bounded out/gpu/ar_bench --model_dir="$replicas/repository/${entry#*:}" --device=cuda \
      --dtype=bfloat16 --repeats=10 --images="${IMAGES:-1}" --ceilings="$results/ceilings.json" \
      --json_out="$results/cost_$name.json" > "$results/cost_$name.log" 2>&1
    echo "rc $?" >> "$results/cost_$name.log"
    grep -E '^\||^Full|^AR step|^model|^rc|error' "$results/cost_$name.log" | tee -a "$summary"
    publish
  done
}

step_janus() {
  section "Janus-Pro-1B replica (bf16, CFG batch 2)"
  write_janus_replica || return 1
  local graphs
  for graphs in off on; do
    bounded out/gpu/token_model_bench --family="$replicas/repository/janus-pro-1b" --device=cuda \
      --dtype=bfloat16 --graphs=$graphs --contexts=0,288 --windows=1,16,32 --repeats=10 \
      > "$results/janus_$graphs.log" 2>&1
    echo "rc $?" >> "$results/janus_$graphs.log"
    cat "$results/janus_$graphs.log" | tee -a "$summary"
    publish
  done
}

write_janus_replica() {
  [[ -f $replicas/repository/janus-pro-1b/family.json ]] && return 0
  bounded python3 tools/convert/write_replicas.py --out "$replicas" --only janus-pro-1b \
    > "$results/write_janus.log" 2>&1
  local rc=$?
  tail -3 "$results/write_janus.log" | tee -a "$summary"
  return $rc
}

step_eagle() {
  section "EAGLE-head training cost, Janus-Pro-1B replica"
  write_janus_replica || return 1
  local batch
  for batch in ${EAGLE_BATCH:-4 16}; do
    bounded python3 tools/gpu/eagle_cost.py --family "$replicas/repository/janus-pro-1b" \
      --batch "$batch" --steps "${EAGLE_STEPS:-10}" --device "${EAGLE_DEVICE:-cuda}" \
      > "$results/eagle_cost_$batch.log" 2>&1
    echo "rc $?" >> "$results/eagle_cost_$batch.log"
    cat "$results/eagle_cost_$batch.log" | tee -a "$summary"
    publish
  done
}

# Stops the server start_server started: SIGINT, and a drain that outlasts 10 s is cut (the
# lease's seconds go to measuring).
stop_server() {
  kill -INT "$server_pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
}

# serve_bench NAME RUNS SERVER_FLAGS CLIENT_ARGS: one server, the client RUNS times against it.
serve_bench() {
  local name=$1 runs=$2 server_flags=$3 client_args=$4 run
  local log=$results/serve_$name.server.log
  local server_start_timeout_s=$(($(left) > 330 ? 300 : $(left) - 30))  # a replica loads slowly
  echo "### $name" | tee -a "$summary"
  # shellcheck disable=SC2086  # the flag lists split on purpose
  start_server "$log" "$results/serve_$name.ports" out/gpu/mulo_server --port=0 \
    --metrics_port=0 --http_port=0 --device="${SERVE_DEVICE:-cuda}" $server_flags 2>/dev/null
  if [[ -z $server_port ]]; then  # it died or never said where it listens
    tail -5 "$log" | tee -a "$summary"
    kill "$server_pid" 2>/dev/null
    return 1
  fi
  for run in $(seq 1 "$runs"); do
    # shellcheck disable=SC2086
    bounded out/gpu/mulo_client $client_args --server="localhost:$server_port" \
      >> "$results/serve_$name.log" 2>&1
    echo "rc $? (run $run)" >> "$results/serve_$name.log"
  done
  # One streamed request over the HTTP API too (OpenAI's Images API on this device): its
  # status, time and server-sent events.
  if [[ -n $server_http_port && $name == synth_*_c1 ]]; then
    curl -sN --max-time 60 -o "$results/serve_$name.http.txt" \
      -w "http: %{http_code} in %{time_total} s\n" \
      "http://127.0.0.1:$server_http_port/v1/images/generations" \
      -d '{"model": "synth", "prompt": "a red circle", "stream": true, "partial_images": 2}' \
      >> "$results/serve_$name.log" 2>&1
    echo "http events: $(grep '^event: ' "$results/serve_$name.http.txt" 2>/dev/null | cut -d' ' -f2 | paste -sd' ')" \
      >> "$results/serve_$name.log"
  fi
  grep -E '^\||^latency|^rc|rror|^http' "$results/serve_$name.log" | tee -a "$summary"
  stop_server
  publish
}

step_serve() {
  section "mulo_server on CUDA"
  [[ -x out/gpu/mulo_server && -x out/gpu/mulo_client ]] || {
    echo "mulo_server / mulo_client were not built (see build.log)" | tee -a "$summary"
    return 1
  }
  local n=${REQUESTS:-8} method config
  local bench="bench --model=synth --prompts_file=models/synth/heldout_prompts.jsonl"
  # Concurrency 1: ar, MuLo-SD, a tree method (EAGLE-2) and the parallel decoder.
  for method in ${SERVE_METHODS:-ar mulo eagle zipar}; do
    (($(left) > 45)) || { echo "serve: out of time before $method" | tee -a "$summary"; return 1; }
    serve_bench "synth_${method}_c1" 1 --model_repository=models \
      "$bench --method=$method --requests=$n --concurrency=1"
  done
  # Concurrency 8: eight workers with a request each, against one worker batching all eight
  # (batching is per worker) with shared GEMMs (the GPU's case: the weights are read once for
  # the whole batch).
  for method in ar mulo; do
    for config in "w8_unbatched:--workers=8 --max_batch=1" \
        "w1_batched_shared:--workers=1 --max_batch=8 --batch_gemms=shared"; do
      (($(left) > 45)) || { echo "serve: out of time before $method ${config%%:*}" | tee -a "$summary"; return 1; }
      serve_bench "synth_${method}_c8_${config%%:*}" 1 "--model_repository=models ${config#*:}" \
        "$bench --method=$method --requests=$((2 * n)) --concurrency=8"
    done
  done
}

# Concurrency 8 on eight workers (no batching), CUDA graphs on and off: each worker captures
# its own requests' graphs while the others run.
step_serve_workers() {
  section "mulo_server on CUDA: eight workers"
  local n=${REQUESTS:-8} method graphs
  local bench="bench --model=synth --prompts_file=models/synth/heldout_prompts.jsonl"
  for method in ar mulo; do
    for graphs in on off; do
      (($(left) > 45)) || { echo "serve_workers: out of time" | tee -a "$summary"; return 1; }
      serve_bench "synth_${method}_c8_w8_graphs_$graphs" 1 \
        "--model_repository=models --workers=8 --max_batch=1 --cuda_graphs=$graphs" \
        "$bench --method=$method --requests=$((2 * n)) --concurrency=8"
      grep -m 3 -E 'terminat|rror' "$results/serve_synth_${method}_c8_w8_graphs_$graphs.server.log" |
        tee -a "$summary"
    done
  done
  return 0
}

# The Tar replica through the server: requests of 1024 tokens at 512 px, with the server's
# forward paths side by side (REPLICA_PATHS): batched (the default: a worker's forwards go
# through its batcher), alone (--max_batch=1: the graphs of Transformer::ForwardTokens) and
# alone_eager (--max_batch=1 --cuda_graphs=off), alone_eager_t16 (the same with 16 intra-op
# threads, as ar_bench runs). REPLICA_REQUESTS each (the second is warm);
# a request cut by REPLICA_TIMEOUT still logs its first row's time (32 tokens).
step_serve_replica() {
  section "mulo_server on CUDA: the Tar replica"
  write_replicas || return 1
  local tar=$replicas/repository/tar ids=$results/tar_condition_ids.txt name path flags
  # 729 random TA-Tok ids as the condition.
  python3 -c "import random; random.seed(1); print(''.join('<I%d>' % random.randrange(65536) for _ in range(729)))" \
    > "$ids"
  name=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['name'])" "$tar/family.json")
  for path in ${REPLICA_PATHS:-batched alone alone_eager alone_eager_t16}; do
    case $path in
      batched) flags="" ;;
      alone) flags="--max_batch=1" ;;
      alone_eager) flags="--max_batch=1 --cuda_graphs=off" ;;
      # The server's eager step was about 7x ar_bench's on the H200; ar_bench ran 16 threads.
      alone_eager_t16) flags="--max_batch=1 --cuda_graphs=off --torch_threads=16" ;;
      *) echo "serve_replica: unknown path $path" | tee -a "$summary"; return 1 ;;
    esac
    (($(left) > 60)) || { echo "serve_replica: out of time before $path" | tee -a "$summary"; return 1; }
    serve_bench "tar_replica_ar_$path" "${REPLICA_REQUESTS:-2}" \
      "--model_repository=$replicas/repository --dtype=bfloat16 --max_decode_time=0 $flags" \
      "generate --model=$name --method=ar --condition_tokens=@$ids --timeout=${REPLICA_TIMEOUT:-600} --out=$results/tar_$path.png"
    grep -E 'request id=' "$results/serve_tar_replica_ar_$path.server.log" | cut -c1-220 |
      tee -a "$summary"
  done
  return 0
}

# Issue 60: one server per family, one worker whose engine loop steps up to 32 requests, each
# method at concurrency 1, 8 and 32 after one warm-up request (8, 16 and 64 requests: the c32
# run keeps the batch full twice over). On the replica, ar at c32 should be at least 8x c1 (the
# weights are read once per step for the whole batch); on the bundled family, c8 at least 15
# images/s (eight graphed workers did 14.99 on the H200).
step_loop() {
  section "one engine loop per worker: images/s by concurrency"
  local family model repository flags method c n log
  for family in ${LOOP_FAMILIES:-synth janus}; do
    case $family in
      synth) repository=models model=synth flags="" ;;
      janus)
        write_janus_replica || continue
        repository=$replicas/repository
        model=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['name'])" \
          "$repository/janus-pro-1b/family.json")
        flags="--dtype=bfloat16 --max_decode_time=0"
        ;;
      *) echo "loop: unknown family $family" | tee -a "$summary"; continue ;;
    esac
    (($(left) > 60)) || { echo "loop: out of time before $family" | tee -a "$summary"; return 1; }
    log=$results/loop_$family.server.log
    local server_start_timeout_s=$(($(left) > 330 ? 300 : $(left) - 30))  # graphs capture at load
    echo "### $family" | tee -a "$summary"
    # shellcheck disable=SC2086  # the flag list splits on purpose
    start_server "$log" "$results/loop_$family.ports" out/gpu/mulo_server --port=0 \
      --metrics_port=0 --http_port=0 --device="${SERVE_DEVICE:-cuda}" \
      --model_repository="$repository" --workers=1 --max_batch=32 --max_queue=64 \
      --batch_gemms=shared --batch_methods=all $flags 2>/dev/null
    if [[ -z $server_port ]]; then
      tail -5 "$log" | tee -a "$summary"
      kill "$server_pid" 2>/dev/null
      continue
    fi
    grep -E 'KV-cache pools|CUDA graphs' "$log" | cut -c1-240 | tee -a "$summary"
    : > "$results/loop_$family.log"
    local served
    served=$(out/gpu/mulo_client models --server="localhost:$server_port" 2>/dev/null |
      grep -m1 "^$model" || true)
    for method in ${LOOP_METHODS:-ar sjd mulo}; do
      if [[ $served != *"$method"* ]]; then
        echo "$family: $method is not served by this family" | tee -a "$summary"
        continue
      fi
      local bench=(bench --server="localhost:$server_port" --model="$model" --method="$method"
                   --prompts_file=models/synth/heldout_prompts.jsonl --timeout=600)
      bounded out/gpu/mulo_client "${bench[@]}" --requests=1 --concurrency=1 \
        > "$results/loop_${family}_${method}_warmup.log" 2>&1
      for c in ${LOOP_CONCURRENCY:-1 8 32}; do
        (($(left) > 30)) || { echo "loop: out of time" | tee -a "$summary"; break 2; }
        n=$((c == 1 ? 8 : 2 * c))
        echo "$family $method concurrency $c" >> "$results/loop_$family.log"
        bounded out/gpu/mulo_client "${bench[@]}" --requests=$n --concurrency=$c \
          >> "$results/loop_$family.log" 2>&1
        echo "rc $?" >> "$results/loop_$family.log"
      done
    done
    # Method, concurrency and images/s, one line each (the client's table's ninth column).
    awk '/ concurrency [0-9]+$/ {what = $1 " " $2 " c" $4}
         /^\| [0-9]/ {split($0, cell, "|"); print what ": " cell[10] "images/s, p50 latency" cell[7] "s"}
         /^rc [1-9]|^error|first error/ {print}' "$results/loop_$family.log" | tee -a "$summary"
    # Calls per batched forward, by component, over the whole run.
    curl -s --max-time 5 "http://127.0.0.1:$server_metrics_port/metrics" |
      grep -E '^mulo_batch_size_(sum|count)' | tee -a "$summary"
    stop_server
    publish
  done
  return 0
}

for step in "${steps[@]}"; do
  if ! declare -f "step_$step" >/dev/null; then
    echo "run.sh: unknown step '$step'" >&2
    exit 2
  fi
  if (($(left) < ${need[$step]:-0})); then
    echo "run.sh: step $step skipped: $(left) s left, it needs ${need[$step]} s" | tee -a "$summary"
    continue
  fi
  echo "=== $step ($(date +%T), $(left) s left)"
  "step_$step" || { echo "run.sh: step $step failed"; publish; [[ $step == build ]] && exit 1; }
  publish
done
echo "=== done ($(date +%T))"
