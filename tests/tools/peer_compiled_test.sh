#!/usr/bin/env bash
# tools/gpu/peer_compiled.py, the compiled PyTorch peer of issue 63, checked on the CPU where it
# can be, on both of its architectures: a tiny Janus-Pro and a tiny Tar AR-DTok in the upstream
# layouts, converted by convert.py janus-family / tar-family (convert_tiny_families.py); mulo's
# logits of a fixed condition and codes (bench/token_model_bench --logits_out); the peer reads
# the converted weights and its float32 forward of the same tokens agrees within 1e-4 of the
# largest logit in both guidance rows (Tar's conditioned row from the feature rows the bench
# drew and wrote beside its logits), and its eager step runs a whole image. The control, per
# family: the same check against mulo's logits with one value of the conditioned row moved by
# 1% of the largest must fail (exit 1, "agrees": false).
# (torch.compile needs PyTorch 2; Debian's 1.13 skips those modes, so they run on GPUs only.)
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
out="$TEST_TMPDIR"
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 tests/tools/convert_tiny_families.py "$out" > "$out/convert.log" 2>&1 ||
  { cat "$out/convert.log"; fail "convert_tiny_families.py"; }

# check NAME FAMILY ROW CODES ROWS: NAME's check and control (a value of guidance row ROW moved);
# the report must name CODES image codes and the compared rows ROWS.
check() {
  local name=$1 family="$out/repository/$2" row=$3 codes=$4 rows=$5
  bench/token_model_bench --family="$family" --contexts=0 --windows=1 --repeats=1 --prompt=6 \
    --logits_out="$out/$name.mulo.safetensors" > "$out/$name.bench.log" 2>&1 ||
    { cat "$out/$name.bench.log"; fail "$name: token_model_bench --logits_out"; }
  peer() {  # peer LOGITS JSON: the peer's check against LOGITS, one image's eager steps
    /usr/bin/python3 tools/gpu/peer_compiled.py --family "$family" --device cpu \
      --dtype float32 --prompt 6 --steps 4 --repeats 1 --modes eager,reduce-overhead \
      --tolerance 1e-4 --check "$1" --json "$2"
  }
  peer "$out/$name.mulo.safetensors" "$out/$name.peer.json" ||
    fail "$name: the peer disagrees with mulo's logits"
  /usr/bin/python3 - "$out/$name.peer.json" "$codes" "$rows" <<'PY' || fail "$name: peer.json"
import json, sys
r = json.load(open(sys.argv[1]))
print(r)
assert r["check"]["agrees"] and r["check"]["relative_error"] <= 1e-4, r["check"]
assert r["check"]["logits"] == [2, 8, 64], r["check"]  # both rows, 8 codes, 64 image codes
assert r["check"]["rows"] == json.loads(sys.argv[3]), r["check"]
assert r["codes"] == int(sys.argv[2]) and r["modes"]["eager"]["s_per_image"] > 0, r
PY
  # The control: mulo's logits with one compared value moved.
  PYTHONPATH=tools/reference /usr/bin/python3 - "$out/$name.mulo.safetensors" \
    "$out/$name.moved.safetensors" "$row" <<'PY'
import sys
import safetensors_io
t = safetensors_io.load(sys.argv[1])
t["logits"][int(sys.argv[3]), 3, 5] += 0.01 * t["logits"].abs().max()
safetensors_io.save(t, sys.argv[2])
PY
  if peer "$out/$name.moved.safetensors" "$out/$name.moved.json"; then
    fail "$name: the control passed the check"
  fi
  grep -q '"agrees": false' "$out/$name.moved.json" ||
    fail "$name: the control's report does not say it disagrees"
  echo "$name: the peer agrees with mulo; its control fails"
}

check janus janus-pro 0 16 '[0, 1]'  # a 4 x 4 grid
check tar tar 0 64 '[0, 1]'          # the target's 8 x 8 grid
echo "PASS"
