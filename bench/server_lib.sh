# shellcheck shell=bash
# Shared by the server benchmarks (sourced, not run): starting mulo_server and reading the
# client's markdown tables.
#
#   start_server LOG PORTS COMMAND...
#     runs COMMAND (a mulo_server command line) in the background, its stdout (the port line)
#     into PORTS and its stderr into LOG; waits up to server_start_timeout_s (default 60) s for
#     the "serving" log line (returns 1 with the log on stderr if the server dies first: a
#     caller under set -e stops there); sets server_pid, server_port, server_metrics_port and
#     server_http_port (empty if the server never said where it listens). Every server started is killed when
#     the script exits.
#   column ROW I
#     the I-th |-separated cell of a markdown table row, spaces removed.

server_pids=()
trap 'kill "${server_pids[@]}" 2>/dev/null || true' EXIT

start_server() {
  local log=$1 ports=$2
  shift 2
  rm -f "$log" "$ports"  # a stale log would say "serving" at once
  # nor may a dead server leave the last one's ports
  server_port="" server_metrics_port="" server_http_port=""
  "$@" >"$ports" 2>"$log" &
  server_pid=$!
  server_pids+=("$server_pid")
  for _ in $(seq 1 $((${server_start_timeout_s:-60} * 10))); do
    grep -q "serving" "$log" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.1
  done
  # shellcheck disable=SC2034  # read by the sourcing script
  server_port=$(sed -n 's/.*listening on port \([0-9]*\) (metrics.*/\1/p' "$ports")
  # shellcheck disable=SC2034
  server_metrics_port=$(sed -n 's/.*(metrics on port \([0-9]*\)).*/\1/p' "$ports")
  # shellcheck disable=SC2034
  server_http_port=$(sed -n 's/.*HTTP API on port \([0-9]*\).*/\1/p' "$ports")
}

column() { echo "$1" | awk -F'|' -v i="$2" '{gsub(/ /, "", $i); print $i}'; }
