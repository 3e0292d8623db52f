#!/usr/bin/env bash
# Full-size upstream replicas on this machine (issue 22): random weights with the exact sizes of
# Tar AR-DTok LP 512 px (+ its 256 px drafter, TA-Tok, VQ-16) and LlamaGen GPT-XL c2i 384 px,
# written in the upstream layouts and converted by tools/convert (write_replicas.py). For each
# family and compute dtype:
#   1. mulo_server loads it alone: seconds until it serves, resident memory after loading and
#      its peak (VmRSS / VmHWM), the weight bytes it reports;
#   2. one AR request through the client with a deadline (a whole image takes minutes on one
#      core): the time to its first streamed row (for Tar: the TA-Tok de-quantiser, the
#      729-row condition prefill and one row of 32 tokens), then DEADLINE_EXCEEDED;
#   3. ar_bench on the target alone: ms per CFG forward of 1, 16, 64 new tokens at an empty
#      and a half-full KV cache.
# Everything runs on one core with one torch thread (taskset -c 0). A benchmark, not a test:
# it prints markdown and writes out/bench/replica.md.
#
#   bench/replica_bench.sh [--replicas=out/replicas] [--families=tar,llamagen-c2i]
#                          [--dtypes=float32,bfloat16] [--repeats=3] [--request_seconds=60]
set -euo pipefail
cd "$(dirname "$0")/.."
replicas=out/replicas
families=tar,llamagen-c2i
dtypes=float32,bfloat16
repeats=3
request_seconds=60
for arg in "$@"; do
  case "$arg" in
    --replicas=*) replicas="${arg#*=}" ;;
    --families=*) families="${arg#*=}" ;;
    --dtypes=*) dtypes="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --request_seconds=*) request_seconds="${arg#*=}" ;;
    *) echo "replica_bench: unknown argument $arg" >&2; exit 2 ;;
  esac
done

if [[ ! -f "$replicas/repository/tar/family.json" ||
      ! -f "$replicas/repository/llamagen-c2i/family.json" ]]; then
  echo "[replica_bench] writing the replicas into $replicas (~80 s, ~10 GB)" >&2
  /usr/bin/python3 tools/convert/write_replicas.py --out "$replicas" >&2
fi
bazel build //server:mulo_server //client:mulo_client //bench:ar_bench >&2
mkdir -p out/bench
report=out/bench/replica.md
: >"$report"
say() { echo "$@" | tee -a "$report"; }
kib_of() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }

pid=
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true' EXIT
load_rows=()
request_rows=()
IFS=, read -r -a family_list <<<"$families"
IFS=, read -r -a dtype_list <<<"$dtypes"
for family in "${family_list[@]}"; do
  # A repository holding this family only, so the load time is its own.
  repo="out/bench/replica_repository_$family"
  rm -rf "$repo" && mkdir -p "$repo"
  ln -s "$(realpath "$replicas/repository/$family")" "$repo/$family"
  name=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['name'])" \
    "$repo/$family/family.json")
  for dtype in "${dtype_list[@]}"; do
    echo "[replica_bench] $family ($dtype): loading" >&2
    log="out/bench/replica_server_$family.log"
    start=$(date +%s.%N)
    taskset -c 0 bazel-bin/server/mulo_server --model_repository="$repo" --host=127.0.0.1 \
      --port=0 --metrics_port=0 --http_port=0 --dtype="$dtype" --max_decode_time=0 >"$log.ports" 2>"$log" &
    pid=$!
    until grep -q "serving" "$log" 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
      sleep 0.1
    done
    load_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
    rss=$(kib_of "$pid" VmRSS)
    peak=$(kib_of "$pid" VmHWM)
    port=$(sed -n 's/.*listening on port \([0-9]*\) .*/\1/p' "$log.ports")
    metrics_port=$(sed -n 's/.*(metrics on port \([0-9]*\)).*/\1/p' "$log.ports")
    weights=$(curl -s "http://127.0.0.1:$metrics_port/metrics" |
      awk '/^mulo_model_weight_bytes/ {printf "%.2f", $2 / 2^30}')
    load_rows+=("| $name | $dtype | $load_s | $(awk -v k="$rss" 'BEGIN {printf "%.2f", k / 2^20}') | $(awk -v k="$peak" 'BEGIN {printf "%.2f", k / 2^20}') | $weights |")

    # One AR request with a deadline: a 512 px image takes minutes on one core.
    if [[ "$family" == tar ]]; then
      /usr/bin/python3 -c "import random; random.seed(1); print(''.join('<I%d>' % random.randrange(65536) for _ in range(729)))" \
        >out/bench/replica_ta_tok_ids.txt
      condition=(--condition_tokens=@out/bench/replica_ta_tok_ids.txt)
    else
      condition=(--class_label=207)
    fi
    echo "[replica_bench] $family ($dtype): one request, ${request_seconds} s deadline" >&2
    bazel-bin/client/mulo_client generate --server="127.0.0.1:$port" --model="$name" \
      "${condition[@]}" --timeout="$request_seconds" --out=out/bench/replica.png \
      >/dev/null 2>out/bench/replica_client.log || true
    sleep 1
    line=$(grep "request id=" "$log" | tail -1)
    first_row=$(sed -n 's/.* first_row=\([0-9.]*\)s.*/\1/p' <<<"$line")
    status=$(sed -n 's/.* status=\([A-Z_]*\) .*/\1/p' <<<"$line")
    request_rows+=("| $name | $dtype | $first_row | $status |")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=

    echo "[replica_bench] $family ($dtype): ar_bench on the target" >&2
    grid=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['grid_size'])" \
      "$replicas/repository/$family/target/config.json")
    taskset -c 0 bazel-bin/bench/ar_bench --model_dir="$replicas/repository/$family/target" \
      --new_tokens=1,16,64 --contexts="0,$((grid * grid / 2))" --repeats="$repeats" --images=0 \
      --threads=1 --graphs=off --dtype="$dtype" >"out/bench/replica_ar_${family}_${dtype}.txt"
    say ""
    say "### $name ($dtype): target forward, batch 2 (CFG)"
    say ""
    grep -E "^model:|^\|" "out/bench/replica_ar_${family}_${dtype}.txt" | tee -a "$report"
  done
done
say ""
say "### Loading (mulo_server, one family per repository, --torch_threads=1, one core)"
say ""
say "| family | dtype | s to serving | RSS GiB | peak RSS GiB | weights GiB (reported) |"
say "|---|---|---:|---:|---:|---:|"
for row in "${load_rows[@]}"; do say "$row"; done
say ""
say "### One AR request (${request_seconds} s deadline)"
say ""
say "| family | dtype | s to the first row of tokens | status at the deadline |"
say "|---|---|---:|---|"
for row in "${request_rows[@]}"; do say "$row"; done
echo "[replica_bench] wrote $report" >&2
