#!/usr/bin/env bash
# synth_eval on a PNG: exit 0 and PASS for the true caption, exit 1 and the failing attribute
# for a mismatched one, exit 2 for a caption outside the grammar or a missing image.
set -uo pipefail

png="${TEST_TMPDIR:-/tmp}/scene.png"
out="${TEST_TMPDIR:-/tmp}/out.txt"
fail() { echo "FAIL: $*"; cat "$out" 2>/dev/null; exit 1; }

tests/synth/write_scene_png 3 64 "$png" > "$out" || fail "write_scene_png"
prompt=$(sed -n 1p "$out")
shape_caption=$(sed -n 's/^shape\t//p' "$out")
[[ -n "$prompt" && -n "$shape_caption" ]] || fail "no captions"

synth/synth_eval --caption="$prompt" "$png" > "$out" 2>&1
[[ $? -eq 0 ]] || fail "true caption: want exit 0"
grep -q '^PASS' "$out" || fail "true caption: want PASS"

synth/synth_eval --caption="$shape_caption" "$png" > "$out" 2>&1
[[ $? -eq 1 ]] || fail "mismatched shape: want exit 1"
grep -q 'shape=FAIL' "$out" || fail "mismatched shape: want shape=FAIL"

synth/synth_eval --caption="a red dog in the center on a blue background" "$png" > "$out" 2>&1
[[ $? -eq 2 ]] || fail "bad caption: want exit 2"
grep -q 'unknown word "dog"' "$out" || fail "bad caption: want the reason"

synth/synth_eval --caption="$prompt" "$png.missing" > "$out" 2>&1
[[ $? -eq 2 ]] || fail "missing image: want exit 2"

echo "PASS"
