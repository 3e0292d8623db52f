#!/usr/bin/env bash
# tools/gpu/peer_compiled.py, the compiled PyTorch peer of issue 63, checked on the CPU where it
# can be: a tiny Janus-Pro in the upstream layout, converted by convert.py janus-family; mulo's
# logits of a fixed prompt and codes (bench/token_model_bench --logits_out); the peer reads the
# converted weights and its float32 forward of the same tokens agrees within 1e-4 of the largest
# logit, and its eager step runs a whole image. The control: the same check against mulo's
# logits with one value moved by 1% of the largest must fail (exit 1, "agrees": false).
# (torch.compile needs PyTorch 2; Debian's 1.13 skips those modes, so they run on GPUs only.)
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
out="$TEST_TMPDIR"
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 tests/tools/convert_tiny_families.py "$out" > "$out/convert.log" 2>&1 ||
  { cat "$out/convert.log"; fail "convert_tiny_families.py"; }
family="$out/repository/janus-pro"
bench/token_model_bench --family="$family" --contexts=0 --windows=1 --repeats=1 --prompt=6 \
  --logits_out="$out/mulo.safetensors" > "$out/bench.log" 2>&1 ||
  { cat "$out/bench.log"; fail "token_model_bench --logits_out"; }
peer() {  # peer LOGITS JSON: the peer's check against LOGITS, one image's eager steps
  /usr/bin/python3 tools/gpu/peer_compiled.py --family "$family" --device cpu --dtype float32 \
    --prompt 6 --steps 4 --repeats 1 --modes eager,reduce-overhead --tolerance 1e-4 \
    --check "$1" --json "$2"
}
peer "$out/mulo.safetensors" "$out/peer.json" || fail "the peer disagrees with mulo's logits"
/usr/bin/python3 - "$out/peer.json" <<'PY' || fail "peer.json (above)"
import json, sys
r = json.load(open(sys.argv[1]))
print(r)
assert r["check"]["agrees"] and r["check"]["relative_error"] <= 1e-4, r["check"]
assert r["check"]["logits"] == [2, 8, 64], r["check"]  # both rows, 8 codes, 64 image codes
assert r["codes"] == 16 and r["modes"]["eager"]["s_per_image"] > 0, r
PY
# The control: mulo's logits with one value moved.
PYTHONPATH=tools/reference /usr/bin/python3 - "$out/mulo.safetensors" "$out/moved.safetensors" <<'PY'
import sys
import safetensors_io
t = safetensors_io.load(sys.argv[1])
t["logits"][0, 3, 5] += 0.01 * t["logits"].abs().max()
safetensors_io.save(t, sys.argv[2])
PY
if peer "$out/moved.safetensors" "$out/moved.json"; then fail "the control passed the check"; fi
grep -q '"agrees": false' "$out/moved.json" || fail "the control's report does not say it disagrees"
echo "PASS"
