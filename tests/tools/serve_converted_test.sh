#!/usr/bin/env bash
# Upstream-layout files -> tools/convert (its command line) -> mulo_server -> mulo_client: a
# tiny Tar family answers a text prompt (its MLLM stage, converted by tar-family --mllm: the
# family's tokenizer.json and Tar's chat prompt -> a tiny Qwen2 writing the TA-Tok ids; two
# captions give different images under the same seed) and a request carrying TA-Tok ids, a tiny
# LlamaGen t2i family a text prompt (its converted FLAN-T5 and sentencepiece model; the image
# equals the one from the same caption's features computed outside) and one carrying T5-shaped
# features with a shortened caption, a tiny LlamaGen c2i family one
# carrying a class label, a tiny Janus-Pro (converted from pytorch_model.bin) a text prompt
# through its tokenizer and template, greedily the same image with ar, sjd, gsd, mc_sjd, sjd_pac
# and zipar (window = the grid's width), the methods that need a drafter refused; bad condition
# fields are refused
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
# Converted targets without drafters: the training-free methods only.
needs_drafters=(speculative mulo eagle lantern lantern++ peanut)
expect_methods_without tar "$models" "${needs_drafters[@]}"
expect_methods_without janus-pro "$models" "${needs_drafters[@]}"
grep -q "^tar .*conditions prompt,condition,condition_tokens (9 x 24)" <<<"$models" ||
  fail "tar's listing"
grep -q "^llamagen-t2i .*cfg 7.5 .*conditions prompt,condition (6 x 32)" <<<"$models" ||
  fail "llamagen-t2i's listing"
grep -q "^llamagen-c2i .*cfg 4.0 .*conditions class_label (10 classes)" <<<"$models" ||
  fail "llamagen-c2i's listing"
grep -q "^janus-pro .*cfg 5.0 .*conditions prompt (up to 48 prompt tokens)" <<<"$models" ||
  fail "janus-pro's listing"

# Janus-Pro from text: 4 x 4 codes over VQ-tiny (2 px each) -> 8 x 8 pixels; the training-free
# methods give ar's greedy image; the prompt decides it; a seed decides a sampled one.
for method in ar sjd gsd mc_sjd sjd_pac zipar:window=4; do
  "$client" generate --server="$addr" --model=janus-pro --seed=3 --temperature=0 \
    --prompt="a red fox in the snow" --method=$method --format=raw \
    --out="$work/janus_${method%%:*}.rgb"
  [[ $(stat -c %s "$work/janus_${method%%:*}.rgb") == $((8 * 8 * 3)) ]] || fail "janus image size"
  cmp -s "$work/janus_ar.rgb" "$work/janus_${method%%:*}.rgb" || fail "janus: $method differs from ar"
done
"$client" generate --server="$addr" --model=janus-pro --seed=3 --temperature=0 \
  --prompt="two dogs playing in a green field" --format=raw --out="$work/janus_dogs.rgb"
! cmp -s "$work/janus_ar.rgb" "$work/janus_dogs.rgb" || fail "janus: the prompt had no effect"
for run in 1 2; do
  "$client" generate --server="$addr" --model=janus-pro --seed=5 --prompt="a cat" --format=raw \
    --out="$work/janus_sampled_$run.rgb"
done
cmp -s "$work/janus_sampled_1.rgb" "$work/janus_sampled_2.rgb" || fail "janus: seeded images differ"
# The same family over OpenAI's Images API: a PNG for a prompt; a method it lacks is a 400
# naming `method`.
[[ -n "$http_port" ]] || fail "no HTTP port"
http=$(curl -s -w '\n%{http_code}' "127.0.0.1:$http_port/v1/images/generations" \
  -d '{"model": "janus-pro", "prompt": "a red fox", "method": "sjd", "seed": 3}')
[[ $(tail -1 <<<"$http") == 200 ]] || fail "janus over HTTP: $http"
grep -q '"b64_json":"iVBORw0KGgo' <<<"$http" || fail "janus over HTTP: no PNG: $http"
http=$(curl -s -w '\n%{http_code}' "127.0.0.1:$http_port/v1/images/generations" \
  -d '{"model": "janus-pro", "prompt": "a red fox", "method": "eagle"}')
[[ $(tail -1 <<<"$http") == 400 ]] && grep -q '"param":"method"' <<<"$http" ||
  fail "janus over HTTP, eagle: $http"

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
# The prompt decides the image: the caption drives the tiny MLLM's TA-Tok ids
# (convert_tiny_families.write_tiny_mllm), so under the same seed two captions give different
# images for (nearly) every seed; the same caption and seed, the same image.
changed=0
for seed in $(seq 1 10); do
  for caption in fox dogs; do
    [[ $caption == fox ]] && text="a red fox in the snow" || text="two dogs playing in a green field"
    "$client" generate --server="$addr" --model=tar --seed=$seed --prompt="$text" --format=raw \
      --out="$work/tar_${caption}_$seed.rgb" >/dev/null
  done
  cmp -s "$work/tar_fox_$seed.rgb" "$work/tar_dogs_$seed.rgb" || changed=$((changed + 1))
done
echo "tar: the caption changed the image for $changed of 10 seeds"
((changed >= 8)) || fail "tar: the caption changed the image for only $changed of 10 seeds"
"$client" generate --server="$addr" --model=tar --seed=7 --prompt="two dogs playing in a green field" \
  --format=raw --out="$work/tar_dogs_7_again.rgb" >/dev/null
cmp -s "$work/tar_dogs_7.rgb" "$work/tar_dogs_7_again.rgb" || fail "tar: the same prompt and seed differ"
# The request picks the stage's method; the response counts the stage's ids and forwards.
for stage in ar sjd; do
  out=$("$client" generate --server="$addr" --model=tar --seed=3 --prompt="a red fox" \
    --text_stage_method=$stage --out="$work/tar_$stage.png")
  grep -q "text stage 9 tokens in [1-9] forwards" <<<"$out" || fail "text stage $stage: $out"
done

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

# LlamaGen t2i from text: the server cleans the caption, cuts it into the family's FLAN-T5
# pieces (5 fit, then the end token) and encodes them with the converted T5. The same
# caption's features computed outside (spm_encode's ids, tools/reference/t5.py on the upstream
# weights, upstream's left padding), sent as condition features, give the same greedy image.
# Two captions clean_caption leaves as they are: 3 pieces (left-padded) and 15 (truncated).
for caption in "a cat" "a red fox in the snow"; do
  "$client" generate --server="$addr" --model=llamagen-t2i --seed=3 --temperature=0 \
    --prompt="$caption" --format=raw --out="$work/t2i_prompt_${#caption}.rgb"
  [[ $(stat -c %s "$work/t2i_prompt_${#caption}.rgb") == $((16 * 16 * 3)) ]] || fail "t2i prompt image size"
  ids=$(echo "$caption" | spm_encode --model="$work/upstream/flan_t5/spiece.model" --output_format=id)
  length=$(/usr/bin/python3 - "$work/upstream/flan_t5" "$ids" "$work/t2i_features.txt" <<'PY'
import json, os, sys
sys.path.insert(0, "tools/reference")
import torch, safetensors_io, t5
directory, ids, out = sys.argv[1], [int(t) for t in sys.argv[2].split()], sys.argv[3]
cfg = json.load(open(os.path.join(directory, "config.json")))
model = t5.T5Encoder(cfg).eval()
state = safetensors_io.load(os.path.join(directory, "model.safetensors"))
model.load_state_dict({k: v for k, v in state.items() if k != "encoder.embed_tokens.weight"})
rows = 6
tokens = ids[:rows - 1] + [1]  # truncated, then </s>
n = len(tokens)
with torch.no_grad():
    f = model(torch.tensor([tokens + [0] * (rows - n)]), torch.tensor([[1] * n + [0] * (rows - n)]))[0]
f = torch.cat([torch.zeros(rows - n, f.shape[1]), f[:n]])  # left padding, pads zeroed
open(out, "w").write(" ".join("%.9g" % x for x in f.flatten().tolist()))
print(n)
PY
  )
  "$client" generate --server="$addr" --model=llamagen-t2i --seed=3 --temperature=0 \
    --condition=@"$work/t2i_features.txt" --caption_length="$length" --format=raw \
    --out="$work/t2i_features_${#caption}.rgb"
  cmp -s "$work/t2i_prompt_${#caption}.rgb" "$work/t2i_features_${#caption}.rgb" ||
    fail "t2i: the prompt's image differs from its features' image"
done
! cmp -s "$work/t2i_prompt_5.rgb" "$work/t2i_prompt_21.rgb" || fail "t2i: the caption had no effect"

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
refused text_stage_method --model=tar --prompt="a fox" --text_stage_method=mulo
refused text_stage_method --model=llamagen-t2i --prompt="a fox" --text_stage_method=sjd
refused condition_tokens --model=tar --condition_tokens=1,2,3,4,5,6,7,8,96
refused condition_tokens --model=llamagen-t2i --condition_tokens=1,2,3,4,5,6
refused caption_length --model=llamagen-t2i --condition=@"$work/caption.txt" --caption_length=7
refused caption_length --model=tar --condition_tokens=1,2,3,4,5,6,7,8,9 --caption_length=2
refused method --model=tar --condition_tokens=1,2,3,4,5,6,7,8,9 --method=mulo
refused class_label --model=llamagen-c2i --prompt="a goldfish"
refused class_label --model=llamagen-c2i --class_label=10
refused condition --model=llamagen-c2i --class_label=1 --condition=@"$work/caption.txt"
refused class_label --model=tar --condition_tokens=1,2,3,4,5,6,7,8,9 --class_label=1
refused method --model=janus-pro --prompt="a fox" --method=speculative
refused method --model=janus-pro --prompt="a fox" --method=mulo
refused condition --model=janus-pro --condition=@"$work/caption.txt"
refused prompt --model=janus-pro --prompt="$(printf 'a%.0s' $(seq 1 60))"
refused text_stage_method --model=janus-pro --prompt="a fox" --text_stage_method=sjd
kill -0 $pid || fail "the server died"
echo "PASS"
