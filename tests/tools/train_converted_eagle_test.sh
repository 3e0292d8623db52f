#!/usr/bin/env bash
# tools/convert/train_eagle_head.py on converted families, end to end: the tiny Janus-Pro, Tar
# and LlamaGen t2i families converted by the CLI get EAGLE heads trained from a few drawn images (agreement,
# determinism and refusals in the Python test), then mulo_server lists eagle and the methods
# built on its head for both; the lossless ones (eagle, peanut) give ar's greedy image, the
# relaxed lantern++ an image of the right size.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="${TEST_TMPDIR}/converted"
/usr/bin/python3 tests/tools/convert_tiny_families.py "$work" >"$work.log" 2>&1 ||
  { cat "$work.log"; exit 1; }
/usr/bin/python3 tests/tools/train_converted_eagle_test.py "$work" >"$work.train.log" 2>&1 ||
  { cat "$work.train.log"; exit 1; }
grep -E "(janus-pro|tar|llamagen-t2i) \{" "$work.train.log"

source tests/tools/serve_lib.sh
start_server "$work/repository" "$work"
client=client/mulo_client
models=$("$client" models --server="$addr")
echo "$models"
for name in janus-pro tar llamagen-t2i; do
  grep -q "^$name .*methods ar,eagle,lantern,lantern++,peanut,sjd," <<<"$models" ||
    fail "$name's listing"
done
for name in janus-pro tar llamagen-t2i; do
  if [[ $name == tar ]]; then
    condition=(--condition_tokens="<I1><I5><I90><I3><I4><I5><I6><I7><I8>")
  else
    condition=(--prompt="a red fox in the snow")
  fi
  for method in ar eagle peanut lantern++; do
    out=$("$client" generate --server="$addr" --model=$name --method=$method --seed=3 \
      --temperature=0 --format=raw "${condition[@]}" --out="$work/${name}_$method.rgb")
    [[ $method == lantern++ ]] || cmp -s "$work/${name}_ar.rgb" "$work/${name}_$method.rgb" ||
      fail "$name: greedy $method differs from ar"
  done
  [[ $(stat -c %s "$work/${name}_lantern++.rgb") == $(stat -c %s "$work/${name}_ar.rgb") ]] ||
    fail "$name: lantern++ image size"
  # A here-string, not a pipe: under pipefail, head leaving early could end `echo` with
  # SIGPIPE and the test with status 141 (it did on a busy machine).
  head -3 <<<"$name: $out"
done
kill -0 $pid || fail "the server died"
echo "PASS"
