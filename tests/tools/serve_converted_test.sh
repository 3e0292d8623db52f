#!/usr/bin/env bash
# Upstream-layout files -> tools/convert (its command line) -> mulo_server -> mulo_client: a
# tiny Tar family answers a text prompt (its MLLM stage: the family's tokenizer.json and Tar's
# chat prompt -> a tiny Qwen2 writing the TA-Tok ids) and a request carrying TA-Tok ids, a tiny
# LlamaGen t2i family one
# carrying T5-shaped features with a shortened caption, a tiny LlamaGen c2i family one
# carrying a class label; bad condition fields are refused
# naming the field, and the Tar family without U_2 / D_2 does not offer MuLo-SD.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="${TEST_TMPDIR}/converted"
/usr/bin/python3 tests/tools/convert_tiny_families.py "$work" >"$work.log" 2>&1 ||
  { cat "$work.log"; exit 1; }

source tests/tools/serve_lib.sh
start_server "$work/repository" "$work"
client=client/mulo_client
models=$("$client" models --server="$addr")
echo "$models"
grep -q "^tar .*methods ar,sjd,gsd,zipar,mc_sjd,sjd_pac,auto .*conditions prompt,condition,condition_tokens (9 x 24)" \
  <<<"$models" || fail "tar's listing"
grep -q "^llamagen-t2i .*cfg 7.5 .*conditions condition (6 x 32)" <<<"$models" ||
  fail "llamagen-t2i's listing"
grep -q "^llamagen-c2i .*cfg 4.0 .*conditions class_label (10 classes)" <<<"$models" ||
  fail "llamagen-c2i's listing"

# Tar: a Tar MLLM's output text works as it is.
"$client" generate --server="$addr" --model=tar --seed=3 --out="$work/tar.png" \
  --condition_tokens="<I1><I5><I90><I3><I4><I5><I6><I7><I8>"
[[ "$(head -c 8 "$work/tar.png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
  fail "tar.png is not a PNG"

# Tar from text: the MLLM writes the 9 TA-Tok ids (sampled as upstream: temperature 1, top-p
# 0.95, top-k 1200), the seed decides them: the same seed gives the same image.
for run in 1 2; do
  "$client" generate --server="$addr" --model=tar --seed=3 --prompt="a red fox in the snow" \
    --format=raw --out="$work/tar_prompt_$run.rgb"
done
[[ $(stat -c %s "$work/tar_prompt_1.rgb") -gt 0 ]] || fail "tar prompt image"
cmp -s "$work/tar_prompt_1.rgb" "$work/tar_prompt_2.rgb" || fail "tar prompt: seeded images differ"

# LlamaGen t2i: 6 x 32 features, the last 3 rows a real caption.
/usr/bin/python3 -c "import random; random.seed(1); print(' '.join('%.4f' % random.gauss(0, 1) for _ in range(6 * 32)))" \
  >"$work/caption.txt"
for length in 3 0; do
  "$client" generate --server="$addr" --model=llamagen-t2i --seed=3 --temperature=0 \
    --condition=@"$work/caption.txt" --caption_length=$length --format=raw \
    --out="$work/t2i_$length.rgb"
  [[ $(stat -c %s "$work/t2i_$length.rgb") == $((16 * 16 * 3)) ]] || fail "t2i image size"
done
# The padding mask changes what the model sees: greedy images differ.
! cmp -s "$work/t2i_3.rgb" "$work/t2i_0.rgb" || fail "caption_length had no effect"

# LlamaGen c2i: a class label; the class decides the (greedy) image.
for label in 0 9; do
  "$client" generate --server="$addr" --model=llamagen-c2i --seed=3 --temperature=0 \
    --class_label=$label --format=raw --out="$work/c2i_$label.rgb"
  [[ $(stat -c %s "$work/c2i_$label.rgb") == $((16 * 16 * 3)) ]] || fail "c2i image size"
done
! cmp -s "$work/c2i_0.rgb" "$work/c2i_9.rgb" || fail "class_label had no effect"

refused() {  # expected field, then client flags
  local field=$1; shift
  local out
  if out=$("$client" generate --server="$addr" --out="$work/x.png" "$@" 2>&1); then
    fail "accepted: $*"
  fi
  grep -q "INVALID_ARGUMENT: $field" <<<"$out" || fail "$* -> $out"
}
refused condition_tokens --model=tar --condition_tokens=1,2,3
refused prompt --model=tar --prompt="$(printf 'a%.0s' $(seq 1 600))"
refused condition_tokens --model=tar --condition_tokens=1,2,3,4,5,6,7,8,96
refused condition_tokens --model=llamagen-t2i --condition_tokens=1,2,3,4,5,6
refused caption_length --model=llamagen-t2i --condition=@"$work/caption.txt" --caption_length=7
refused caption_length --model=tar --condition_tokens=1,2,3,4,5,6,7,8,9 --caption_length=2
refused method --model=tar --condition_tokens=1,2,3,4,5,6,7,8,9 --method=mulo
refused class_label --model=llamagen-c2i --prompt="a goldfish"
refused class_label --model=llamagen-c2i --class_label=10
refused condition --model=llamagen-c2i --class_label=1 --condition=@"$work/caption.txt"
refused class_label --model=tar --condition_tokens=1,2,3,4,5,6,7,8,9 --class_label=1
kill -0 $pid || fail "the server died"
echo "PASS"
