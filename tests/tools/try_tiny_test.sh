#!/usr/bin/env bash
# tools/convert/try_tiny.sh, the documented way to try the whole path on tiny upstream-layout
# files, run as a user runs it (with the built binaries instead of its bazel build): it converts
# every family with convert.py (Tar with its MLLM through tar-family --mllm, no hand edit),
# serves them, writes one PNG per family from a text prompt (a class label for c2i) and stops
# the server.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
out="${TEST_TMPDIR}/try_tiny"
log="${TEST_TMPDIR}/try_tiny.log"
fail() { echo "FAIL: $*" >&2; exit 1; }
MULO_SERVER=server/mulo_server MULO_CLIENT=client/mulo_client tools/convert/try_tiny.sh "$out" \
  >"$log" 2>&1 || { cat "$log"; fail "try_tiny.sh failed (above)"; }
cat "$log"
grep -q "^+ convert.py tar-family .* --mllm $out/upstream/tar_mllm" "$log" || fail "tar-family --mllm"
grep -q "family.json: tar, components target, drafter, ta_tok, vq, mllm" "$log" ||
  fail "tar's family.json does not name its mllm"
grep -q "^tar .*conditions prompt," "$log" || fail "tar does not take a prompt"
for family in tar llamagen-t2i janus-pro llamagen-c2i; do
  png="$out/images/$family.png"
  [[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
    fail "$png is not a PNG"
done
grep -q "text stage 9 tokens" "$log" || fail "Tar's image did not come through its MLLM"
grep -q "^stopped mulo_server (pid \([0-9]*\))" "$log" || fail "the server was not stopped"
server_pid=$(sed -n 's/^stopped mulo_server (pid \([0-9]*\)).*/\1/p' "$log")
! kill -0 "$server_pid" 2>/dev/null || fail "mulo_server (pid $server_pid) still runs"
echo "PASS"
