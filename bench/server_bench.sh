#!/usr/bin/env bash
# The server's own cost, measured on a model family (issue #4's numbers):
#   1. the engine alone (bench/methods_bench --methods=ar) for N held-out prompts and seeds,
#      taking turns with the same prompts and seeds through mulo_server + mulo_client bench at
#      concurrency 1 (overhead = client latency / engine-alone time - 1, median of rounds);
#   2. the server at concurrency 4;
#   3. resident memory (process_resident_memory_bytes from /metrics) after 10 requests and
#      after 200, to show that serving does not leak.
# Prints markdown tables and writes them to out/bench/server.md. A benchmark, not a test.
#
#   bench/server_bench.sh [--model_repository=models] [--model=synth] [--requests=32]
#                         [--workers=1] [--rss_requests=200] [--rounds=5] [--method=ar]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/server_lib.sh
source bench/server_lib.sh
repository=models
model=synth
requests=32
workers=1
rss_requests=200
rounds=5
method=ar
prompts=models/synth/heldout_prompts.jsonl
for arg in "$@"; do
  case "$arg" in
    --model_repository=*) repository="${arg#*=}" ;;
    --model=*) model="${arg#*=}" ;;
    --requests=*) requests="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --rss_requests=*) rss_requests="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --method=*) method="${arg#*=}" ;;
    --prompts=*) prompts="${arg#*=}" ;;
    *) echo "server_bench: unknown argument $arg" >&2; exit 2 ;;
  esac
done

bazel build //server:mulo_server //client:mulo_client //bench:methods_bench >&2
mkdir -p out/bench
report=out/bench/server.md
: >"$report"
say() { echo "$@" | tee -a "$report"; }

start_server out/bench/server_bench_server.log out/bench/server_bench.ports \
  bazel-bin/server/mulo_server --model_repository="$repository" --host=127.0.0.1 --port=0 \
  --metrics_port=0 --http_port=0 --workers="$workers" --max_queue=64
port=$server_port
metrics_port=$server_metrics_port
client=(bazel-bin/client/mulo_client --server="127.0.0.1:$port" --model="$model"
        --method="$method" --prompts_file="$prompts")
rss_mib() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" |
    awk '/^process_resident_memory_bytes / {printf "%.1f", $2 / 1048576}'
}

# The engine alone and the server take turns on the same prompts and seeds, round after
# round: a shared or throttled CPU drifts by tens of percent over minutes, and pairing in
# time keeps that drift out of the comparison. The overhead is the median of the rounds.
echo "[1/3] engine alone vs the server at concurrency 1: $rounds rounds of $requests requests" >&2
round_rows=()
for round in $(seq 1 "$rounds"); do
  bazel-bin/bench/methods_bench --models="$repository/$model" --prompts="$prompts" \
    --methods="$method" --limit="$requests" --out_dir=out/bench/engine_alone \
    >out/bench/engine_alone.txt
  # methods_bench always runs ar as its baseline; take the row of the method asked for.
  engine_s=$(awk -F'|' -v m="$method" '$2 ~ "^ "m"( |$)" {gsub(/ /, "", $3); print $3; exit}' \
    out/bench/engine_alone.txt)
  c1=$("${client[@]}" bench --requests="$requests" --concurrency=1 | tail -1)
  latency=$(column "$c1" 6)  # mean client latency
  decode=$(column "$c1" 11)  # mean decode time inside the server
  overhead=$(awk -v a="$latency" -v e="$engine_s" 'BEGIN {printf "%+.2f", 100 * (a / e - 1)}')
  round_rows+=("| $round | $engine_s | $latency | $decode | $overhead% |")
  echo "  round $round: engine $engine_s s, server $latency s ($overhead%)" >&2
done
median_overhead=$(printf '%s\n' "${round_rows[@]}" |
  awk -F'|' '{gsub(/[ %+]/, "", $6); print $6}' | sort -g |
  awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                         printf "%+.2f", m}')

echo "[2/3] through the server: $requests requests at concurrency 1 and 4" >&2
c4=$("${client[@]}" bench --requests="$requests" --concurrency=4 | tail -1)

echo "[3/3] resident memory after 10 and after $rss_requests requests" >&2
# A fresh count: the requests above already ran, so 'after 10' is measured on a server that
# has served 2 x $requests + 10; the growth between the two readings is what matters.
"${client[@]}" bench --requests=10 --concurrency=2 --seed=5000 >/dev/null
rss_10=$(rss_mib)
"${client[@]}" bench --requests=$((rss_requests - 10)) --concurrency=2 --seed=6000 >/dev/null
rss_200=$(rss_mib)
served=$(curl -s "http://127.0.0.1:$metrics_port/metrics" |
  awk '/^mulo_requests_total\{/ && /code="OK"/ {s += $2} END {print s + 0}')

say "model family $repository/$model, method $method, server --workers=$workers --torch_threads=1"
say ""
say "| requests | concurrency | ok | errors | mean latency s | p50 latency s | p95 latency s | mean first row s | images/s | mean server decode s | mean overhead s (latency - queue - decode) |"
say "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
say "$c1"
say "$c4"
say ""
say "| round | engine alone s / image | server: mean client latency s (concurrency 1) | of which decode in the server s | server overhead vs engine alone |"
say "|---:|---:|---:|---:|---:|"
for row in "${round_rows[@]}"; do say "$row"; done
say ""
say "median server overhead vs engine alone over $rounds rounds: $median_overhead%"
say ""
say "| resident memory after 10 requests (MiB) | after $rss_requests requests (MiB) | growth | requests served in all |"
say "|---:|---:|---:|---:|"
say "| $rss_10 | $rss_200 | $(awk -v a="$rss_10" -v b="$rss_200" 'BEGIN {printf "%+.1f MiB", b - a}') | $served |"
echo "wrote $report" >&2
