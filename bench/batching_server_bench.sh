#!/usr/bin/env bash
# Continuous batching through the server (issue 24): images/s and p50 / p95 latency at each
# concurrency for each method, batching off (--max_batch=1) against on (--max_batch=16), one
# worker each. Both servers are pinned to the same single core (taskset) and take turns, level
# by level, round after round, so the machine's drift falls on both alike; the table gives the
# median over rounds. Prints markdown and writes it to out/bench/batching_server.md. A
# benchmark, not a test.
#
#   bench/batching_server_bench.sh [--methods=ar,speculative,mulo] [--concurrency=1,4,8,16]
#                                  [--requests=16] [--rounds=2] [--core=0] [--max_batch=16]
#                                  [--on_flags="--batch_methods=ar,mulo ..."]
# --on_flags: more server flags for the "on" server (e.g. the shipped method policy).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/server_lib.sh
source bench/server_lib.sh
methods=ar,speculative,mulo
levels=1,4,8,16
requests=16
rounds=2
core=0
max_batch=16
on_flags=""
repository=models
model=synth
for arg in "$@"; do
  case "$arg" in
    --methods=*) methods="${arg#*=}" ;;
    --concurrency=*) levels="${arg#*=}" ;;
    --requests=*) requests="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --core=*) core="${arg#*=}" ;;
    --max_batch=*) max_batch="${arg#*=}" ;;
    --on_flags=*) on_flags="${arg#*=}" ;;
    --model_repository=*) repository="${arg#*=}" ;;
    --model=*) model="${arg#*=}" ;;
    *) echo "batching_server_bench: unknown argument $arg" >&2; exit 2 ;;
  esac
done
bazel build //server:mulo_server //client:mulo_client >&2
mkdir -p out/bench
declare -A port
start() {  # start NAME FLAGS...
  local name=$1; shift
  start_server "out/bench/batching_$name.log" "out/bench/batching_$name.ports" \
    taskset -c "$core" bazel-bin/server/mulo_server --model_repository="$repository" \
    --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=0 --workers=1 --max_queue=64 "$@"
  port[$name]=$server_port
}
start off --max_batch=1
# shellcheck disable=SC2086  # on_flags is a list of flags
start on --max_batch="$max_batch" $on_flags

declare -A rate p50 p95
for round in $(seq 1 "$rounds"); do
  for method in ${methods//,/ }; do
    for c in ${levels//,/ }; do
      for name in off on; do
        row=$(bazel-bin/client/mulo_client --server="127.0.0.1:${port[$name]}" --model="$model" \
          --method="$method" --prompts_file="$repository/$model/heldout_prompts.jsonl" \
          bench --requests="$requests" --concurrency="$c" | tail -1)
        key="$method,$c,$name"
        rate[$key]+="$(column "$row" 10) "
        p50[$key]+="$(column "$row" 7) "
        p95[$key]+="$(column "$row" 8) "
      done
      echo "round $round: $method at concurrency $c done" >&2
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
  echo "Batching off (--max_batch=1) vs on (--max_batch=$max_batch${on_flags:+ $on_flags}), one worker, one core," \
    "$requests requests per run, median of $rounds paired rounds"
  echo
  echo "| method | concurrency | off images/s | on images/s | on / off | off p50 s | on p50 s | off p95 s | on p95 s |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for method in ${methods//,/ }; do
    for c in ${levels//,/ }; do
      off_rate=$(echo "${rate[$method,$c,off]}" | median)
      on_rate=$(echo "${rate[$method,$c,on]}" | median)
      ratio=$(awk -v a="$on_rate" -v b="$off_rate" 'BEGIN {printf "%.2f", a / b}')
      echo "| $method | $c | $off_rate | $on_rate | $ratio |" \
        "$(echo "${p50[$method,$c,off]}" | median) | $(echo "${p50[$method,$c,on]}" | median) |" \
        "$(echo "${p95[$method,$c,off]}" | median) | $(echo "${p95[$method,$c,on]}" | median) |"
    done
  done
} | tee out/bench/batching_server.md
