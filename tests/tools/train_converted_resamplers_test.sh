#!/usr/bin/env bash
# tools/convert/train_resamplers.py on a converted family, end to end: the tiny Tar family
# converted by the CLI gets U_2 / D_2 trained from a few drawn images (in place, and through
# --out + convert.py --resamplers into a second family; refusals checked in the Python test),
# then mulo_server lists `mulo` for both and answers a MuLo-SD request.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="${TEST_TMPDIR}/converted"
/usr/bin/python3 tests/tools/convert_tiny_families.py "$work" >"$work.log" 2>&1 ||
  { cat "$work.log"; exit 1; }
/usr/bin/python3 tests/tools/train_converted_resamplers_test.py "$work" >"$work.train.log" 2>&1 ||
  { cat "$work.train.log"; exit 1; }
grep "held-out agreement" "$work.train.log"

source tests/tools/serve_lib.sh
start_server "$work/repository" "$work"
client=client/mulo_client
models=$("$client" models --server="$addr")
echo "$models"
for name in tar tar-resampled; do
  # Trained resamplers add MuLo-SD (its drafter is the target itself); still no chain or head.
  expect_methods_without $name "$models" speculative eagle lantern lantern++ peanut
  grep -qx mulo <<<"$(listed_methods $name "$models")" || fail "$name lists no mulo"
  "$client" generate --server="$addr" --model=$name --method=mulo --seed=3 --format=raw \
    --condition_tokens="<I1><I5><I90><I3><I4><I5><I6><I7><I8>" --out="$work/$name.rgb"
  [[ $(stat -c %s "$work/$name.rgb") == $((16 * 16 * 3)) ]] || fail "$name: image size"
done
kill -0 $pid || fail "the server died"
echo "PASS"
