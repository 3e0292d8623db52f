#!/usr/bin/env bash
# text/t5_tokenizer against sentencepiece's own command-line encoder (Debian's spm_encode) on a
# model trained here with spm_train (unigram, T5's special ids: <pad> 0, </s> 1, <unk> 2), over
# the tokenizer corpus; and LlamaGen t2i's padding of the ids: the end token, truncated to
# max_length (first max_length - 1 ids + </s>), padded with <pad> to max_length, with the mask.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v spm_train >/dev/null || fail "spm_train is not installed (run tools/setup.sh)"
work=$(mktemp -d)
corpus=tests/text/tokenizer_corpus.jsonl
/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    text = json.loads(line)
    if text.strip():
        print(text.replace("\r", " ").replace("\n", " "))
' "$corpus" >"$work/train.txt"
for i in $(seq 1 30); do
  echo "a photo of a red cube on a blue sphere number $i, watercolor, high detail" >>"$work/train.txt"
done
spm_train --input="$work/train.txt" --model_prefix="$work/spiece" --vocab_size=300 \
  --model_type=unigram --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1 \
  --character_coverage=1.0 --minloglevel=2 >"$work/train.log" 2>&1 || {
  tail -5 "$work/train.log"; fail "spm_train"; }
/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    print(json.loads(line).replace("\r", " ").replace("\n", " "))
' "$corpus" >"$work/plain.txt"
spm_encode --model="$work/spiece.model" --output_format=id <"$work/plain.txt" >"$work/reference.txt"
for length in 8 120; do
  /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1], newline="\n"):
    print(json.dumps(line.rstrip("\n"), ensure_ascii=False))
' "$work/plain.txt" | text/tokenize --sentencepiece="$work/spiece.model" --max_length=$length \
    >"$work/ours_$length.jsonl" || fail "text/tokenize --sentencepiece"
  /usr/bin/python3 - "$work/reference.txt" "$work/ours_$length.jsonl" "$length" <<'PY' ||
import json, sys
reference = [[int(t) for t in line.split()] for line in open(sys.argv[1])]
ours = [json.loads(line) for line in open(sys.argv[2])]
length = int(sys.argv[3])
assert len(reference) == len(ours), (len(reference), len(ours))
for i, (ids, got) in enumerate(zip(reference, ours)):
    tokens = ids[: length - 1] + [1]
    want = {"ids": tokens + [0] * (length - len(tokens)),
            "mask": [1] * len(tokens) + [0] * (length - len(tokens))}
    assert got == want, f"line {i + 1} at max_length {length}: want {want} got {got}"
print(f"max_length {length}: {len(ours)} texts as spm_encode, padded as LlamaGen")
PY
    fail "ids differ from spm_encode's (max_length $length)"
done
echo "PASS"
