# Sourced by the shell tests that serve a model repository (run from the runfiles root).
#   start_server REPOSITORY WORK: starts server/mulo_server on free ports, waits until it
#   serves (printing its log and failing if it exits first), stops it when the test exits, and
#   sets $pid, $addr (127.0.0.1:PORT, gRPC) and $http_port (the OpenAI API). Extra arguments
#   after WORK go to the server. Its log is WORK/server.log.
#   fail MESSAGE: prints FAIL: MESSAGE and exits 1.
fail() { echo "FAIL: $*" >&2; exit 1; }

# The methods `mulo_client models` lists for family $1 in listing $2, one per line.
listed_methods() {
  sed -n "s/^$1 .* methods \([^ ]*\) .*/\1/p" <<<"$2" | tr , '\n'
}

# Checks that family $1 of listing $2 runs ar and auto and none of the methods that need a
# component it lacks (the other arguments): what a family serves follows from its components,
# whatever methods the registry gains.
expect_methods_without() {
  local family=$1 listing=$2 methods
  shift 2
  methods=$(listed_methods "$family" "$listing")
  grep -qx ar <<<"$methods" && grep -qx auto <<<"$methods" || fail "$family's listing: $methods"
  for method in "$@"; do
    ! grep -qx -- "$method" <<<"$methods" || fail "$family lists $method without its component"
  done
}

start_server() {
  local repository=$1 work=$2
  shift 2
  server/mulo_server --model_repository="$repository" --host=127.0.0.1 --port=0 \
    --metrics_port=0 --http_port=0 "$@" >"$work/ports" 2>"$work/server.log" &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do
    grep -q "listening on port" "$work/ports" 2>/dev/null && grep -q "serving" "$work/server.log" &&
      break
    kill -0 $pid 2>/dev/null || { cat "$work/server.log"; exit 1; }
    sleep 0.1
  done
  addr="127.0.0.1:$(sed -n 's/.*listening on port \([0-9]*\) .*/\1/p' "$work/ports")"
  http_port=$(sed -n 's/.*HTTP API on port \([0-9]*\).*/\1/p' "$work/ports")
}
