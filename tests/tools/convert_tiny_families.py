#!/usr/bin/env python3
"""Writes tiny upstream-layout files and converts them with the converter's command line into
a model repository holding a Tar family and LlamaGen t2i and c2i families:

  /usr/bin/python3 tests/tools/convert_tiny_families.py OUT_DIR
writes OUT_DIR/upstream/* and OUT_DIR/repository/{tar,llamagen-t2i,llamagen-c2i}/.

The Tar family gets an MLLM stage too: a tiny Hugging Face Qwen2 directory (random weights,
tokenizer.json with the byte-level alphabet and no merges, Qwen2's chat tokens and Tar's added
tokens <im_start>, <im_end>, <S0>-<S2>, <I0>-<I95> for the 96 TA-Tok codes; its image-token
logits driven by the caption: write_tiny_mllm) converted by `convert.py tar-family --mllm` into
repository/tar/mllm.

A tiny Janus-Pro in the Hugging Face layout (tools/reference/janus.py's tiny config with 64 image
codes: config.json, pytorch_model.bin written by torch.save with the understanding path's
stand-ins and a VQ-tiny gen_vision_model, tokenizer.json with Janus-Pro's special tokens)
converted with `convert.py janus-family` into repository/janus-pro (grid 4).

The LlamaGen t2i family gets its text encoder too: a tiny Hugging Face FLAN-T5 directory
(random weights, 32 wide as the GPT's captions, and a sentencepiece model trained here with
Debian's spm_train, T5's special ids) through `convert.py llamagen-family --t5`.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_upstream  # noqa: E402
import convert  # noqa: E402  (tools/convert/convert.py, on the path through tiny_upstream)


def byte_level_alphabet():
    """GPT-2's byte -> printable character map (what Qwen2's tokenizer.json vocabulary uses)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    chars, extra = dict((b, chr(b)) for b in printable), 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


TAR_SYSTEM = "You are a helpful assistant."  # text/tar_prompt's system message


def tar_prompt_ids(caption, scale=0):
    """The ids the server gives the tiny MLLM for a caption (text/tar_prompt over this
    tokenizer: one id per byte, the added tokens by their ids)."""
    special = {"<|im_start|>": 257, "<|im_end|>": 258, "<im_start>": 259, f"<S{scale}>": 261 + scale}
    text = (f"<|im_start|>system\n{TAR_SYSTEM}<|im_end|>\n<|im_start|>user\n{caption}"
            f"<|im_end|>\n<|im_start|>assistant\n<im_start><S{scale}>")
    ids, i = [], 0
    while i < len(text):
        for token, token_id in special.items():
            if text.startswith(token, i):
                ids.append(token_id)
                i += len(token)
                break
        else:
            ids += list(text[i].encode())
            i += 1
    return ids


def write_tiny_mllm(directory, codes):
    """A tiny Qwen2 MLLM in the Hugging Face layout with Tar's added tokens, whose image-token
    logits the caption drives: layer 0's attention has zero queries, so every position reads
    the mean of the values before it, and the value bias cancels the chat template's own mean,
    so what reaches the head is the caption's bytes (a bag of bytes; the other sublayers keep
    random weights). The untied head's image rows turn that into TA-Tok id logits with a few
    nats of spread: different captions give different ids under the same seed."""
    import math
    import torch
    import qwen2
    import safetensors_io
    os.makedirs(directory, exist_ok=True)
    alphabet = byte_level_alphabet()
    added = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tar = ["<im_start>", "<im_end>", "<S0>", "<S1>", "<S2>"] + [f"<I{k}>" for k in range(codes)]
    tokens = [dict(id=256 + i, content=t, special=True) for i, t in enumerate(added)]
    tokens += [dict(id=256 + len(added) + i, content=t, special=False)
               for i, t in enumerate(tar)]
    tokenizer = dict(
        model=dict(type="BPE", vocab={alphabet[b]: b for b in range(256)}, merges=[]),
        normalizer=None, pre_tokenizer=dict(type="ByteLevel", add_prefix_space=False),
        added_tokens=tokens)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f)
    cfg = dict(model_type="qwen2", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, intermediate_size=48, vocab_size=384, rms_norm_eps=1e-6,
               rope_theta=1000000.0, tie_word_embeddings=False, max_position_embeddings=512)
    assert 256 + len(tokens) <= cfg["vocab_size"]
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    torch.manual_seed(7)
    model = qwen2.CausalLm(cfg).eval()
    gen = torch.Generator().manual_seed(7)
    first = 256 + len(added) + 5  # <I0>
    dim = cfg["hidden_size"]
    kv = cfg["num_key_value_heads"] * dim // cfg["num_attention_heads"]
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed.copy_(torch.randn(embed.shape, generator=gen))
        attention = model.model.layers[0].self_attn
        attention.q_proj.weight.zero_()
        attention.q_proj.bias.zero_()
        attention.v_proj.weight.copy_(torch.randn(kv, dim, generator=gen) / math.sqrt(dim))
        template = model.model.layers[0].input_layernorm(embed[tar_prompt_ids("")])
        attention.v_proj.bias.copy_(-(template @ attention.v_proj.weight.t()).mean(0))
        attention.o_proj.weight.copy_(torch.randn(dim, dim, generator=gen) * 8 / math.sqrt(kv))
        model.model.norm.weight.fill_(1.0)
        head = model.lm_head.weight
        head.copy_(torch.randn(head.shape, generator=gen) * 0.1)
        head[first:first + codes] = torch.randn(codes, dim, generator=gen) * 0.6
    safetensors_io.save(dict(model.state_dict()), os.path.join(directory, "model.safetensors"))


T5_TINY = dict(model_type="t5", feed_forward_proj="gated-gelu", d_model=32, d_kv=8, d_ff=48,
               num_layers=2, num_heads=4, vocab_size=128, relative_attention_num_buckets=32,
               relative_attention_max_distance=128, layer_norm_epsilon=1e-6)
T5_CAPTIONS = ["a red fox in the snow", "a photo of a cat on a mat", "a blue sphere and a cube",
               "an oil painting of a lighthouse at night", "two dogs playing in a green field"]


def write_tiny_t5(directory):
    """A tiny FLAN-T5 in the Hugging Face layout: config.json, model.safetensors, spiece.model."""
    import torch
    import safetensors_io
    import t5
    os.makedirs(directory, exist_ok=True)
    corpus = os.path.join(directory, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("\n".join(T5_CAPTIONS * 4) + "\n")
    subprocess.run(["spm_train", f"--input={corpus}",
                    f"--model_prefix={os.path.join(directory, 'spiece')}", "--vocab_size=60",
                    "--hard_vocab_limit=false", "--model_type=unigram", "--pad_id=0",
                    "--eos_id=1", "--unk_id=2", "--bos_id=-1", "--character_coverage=1.0",
                    "--minloglevel=2"], check=True, capture_output=True)
    os.remove(corpus)
    os.remove(os.path.join(directory, "spiece.vocab"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(T5_TINY, f)
    torch.manual_seed(11)
    model = t5.T5Encoder(T5_TINY).eval()
    state = dict(model.state_dict())
    state["encoder.embed_tokens.weight"] = state["shared.weight"]
    safetensors_io.save(state, os.path.join(directory, "model.safetensors"))


def write_tiny_janus(directory):
    """A tiny Janus-Pro in the Hugging Face layout, its VQ a VQ-tiny over VOCAB codes."""
    import copy
    import torch
    import janus
    import vq_decoder
    from random_init import spread_init
    os.makedirs(directory, exist_ok=True)
    cfg = copy.deepcopy(janus.TINY_CONFIG)
    codes = tiny_upstream.VOCAB
    cfg["gen_vision_config"]["params"]["image_token_size"] = codes
    cfg["gen_head_config"]["params"]["image_token_size"] = codes
    gen = torch.Generator().manual_seed(13)
    model = janus.Janus(cfg).eval()
    spread_init(model, gen)
    vq_model = vq_decoder.VQModel(dict(tiny_upstream.VQ_ARCH, codebook_size=codes,
                                       codebook_embed_dim=8), with_encoder=True).eval()
    spread_init(vq_model, gen)
    vq_state = dict(vq_model.state_dict())
    vq_state["quantize.codebook_used"] = torch.zeros(codes)  # upstream's usage counter
    torch.save(janus.upstream_state(model, gen, vq_state),
               os.path.join(directory, "pytorch_model.bin"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(janus.tiny_tokenizer(), f, ensure_ascii=False)


def run(argv):
    """convert.py's command line, in this process (the tiny registry names are registered);
    the command is printed as a user would type it."""
    print("+ convert.py " + " ".join(argv), flush=True)
    return convert.main(argv)


def main():
    out = sys.argv[1]
    tiny_upstream.register_tiny_sizes()
    files = tiny_upstream.write_files(os.path.join(out, "upstream"))
    repo = os.path.join(out, "repository")
    mllm_dir = os.path.join(out, "upstream", "tar_mllm")
    write_tiny_mllm(mllm_dir, tiny_upstream.TA_TOK["codebook_size"])
    rc = run(["tar-family", "--out", os.path.join(repo, "tar"),
              "--target", files["tar_512"], "--drafter", files["tar_256"],
              "--ta-tok", files["ta_tok"], "--vq", files["vq"], "--vq-model", "VQ-tiny",
              "--ta-tok-heads", str(tiny_upstream.TA_TOK["n_head"]), "--mllm", mllm_dir])
    if rc:
        return rc
    t5_dir = os.path.join(out, "upstream", "flan_t5")
    write_tiny_t5(t5_dir)
    rc = run(["llamagen-family", "--out", os.path.join(repo, "llamagen-t2i"),
              "--gpt", files["t2i"], "--vq", files["vq"], "--t5", t5_dir] + tiny_upstream.t2i_flags())
    if rc:
        return rc
    rc = run(["llamagen-family", "--out", os.path.join(repo, "llamagen-c2i"),
              "--gpt", files["c2i"], "--vq", files["vq"]] + tiny_upstream.c2i_flags())
    if rc:
        return rc
    janus_dir = os.path.join(out, "upstream", "janus_pro")
    write_tiny_janus(janus_dir)
    # 8 px over VQ-tiny's 2 px per code: a 4 x 4 grid.
    return run(["janus-family", "--dir", janus_dir, "--out", os.path.join(repo, "janus-pro"),
                "--vq-model", "VQ-tiny", "--image-size", "8", "--dtype", "f32"])


if __name__ == "__main__":
    sys.exit(main())
