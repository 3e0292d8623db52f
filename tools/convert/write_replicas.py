#!/usr/bin/env python3
"""Writes full-size random-weight replicas of the upstream checkpoints, in the upstream file
layouts, and converts them with convert.py into a model repository the server loads:

  OUT/upstream/   ar_dtok_lp_512px.pth  ar_dtok_lp_256px.pth  ta_tok.pth  vq_ds16_t2i.pt
                  c2i_XL_384.pt  vq_ds16_c2i.pt
  OUT/repository/tar/           Tar AR-DTok LP 512 px target + 256 px drafter + TA-Tok + VQ-16
  OUT/repository/llamagen-c2i/  LlamaGen GPT-XL class-to-image at 384 px + VQ-16
  OUT/upstream/tar-mllm/, OUT/repository/tar-mllm/   Tar's MLLM (--only tar-mllm)
  OUT/upstream/flan-t5-xl/, OUT/repository/flan-t5-xl-encoder/   (--only flan-t5-xl)
  OUT/upstream/janus-pro-1b/, OUT/repository/janus-pro-1b/   Janus-Pro-1B (--only janus-pro-1b)

  /usr/bin/python3 tools/convert/write_replicas.py --out out/replicas \
      [--only tar|llamagen-c2i|tar-mllm|flan-t5-xl|janus-pro-1b]

The weights are random (std 0.02, as the upstream initialisers), so the images are noise;
what a replica gives is the exact tensor shapes, counts and bytes of the real files: the
server's load time, resident memory and forward cost at real scale (bench/replica_bench.sh),
and the same figures on a GPU (issue 23). About 10 GB of disk and 6 GB of memory at peak.

Sizes (tools/convert/tar_ar.py, llamagen_gpt.py, vq16.py registries):
  AR-DTok llama-abs-LP: 30 layers, 20 heads, dim 1280, FFN 3584, vocabulary 16384,
    729 TA-Tok condition rows of width 1152; 32x32 grid at 512 px, 16x16 at 256 px.
  TA-Tok de-quantiser: 65536 SimVQ codes of width 1536 (an assumption: Tar initialises the
    codebook from Qwen2.5-1.5B's 1536-wide word embeddings; a real ta_tok.pth's args say it),
    3 SigLIP2 layers of width 1152 with 12 heads (what the converter takes for that width),
    MLP 4304, a 27x27 position table.
  GPT-XL: 36 layers, 20 heads, dim 1280, 1000 classes, 24x24 grid at 384 px.
  VQ-16: 16384 x 8 codebook, ch 128, ch_mult 1,1,2,2,4, z 256 (encoder kept).
  Tar's MLLM (text stage, only with --only tar-mllm): Qwen2.5-1.5B-Instruct (28 layers, 1536
    wide, 12 / 2 heads, FFN 8960, theta 1e6, tied head) with Tar's added tokens: a vocabulary
    of 217,206 (Qwen2.5's 151,665 tokens, <im_start>, <im_end>, <S0>-<S2>, <I0>-<I65535>; the
    count is inferred from Tar's code, its released config is not read here), Hugging Face
    layout, bfloat16 safetensors, and a byte-level tokenizer.json with those added tokens (so
    the converted component names its 65,536 image tokens).
  FLAN-T5-XL's encoder (only with --only flan-t5-xl): 24 blocks, 2048 wide, 32 heads of 64,
    FFN 5120, vocabulary 32,128; the decoder of the real checkpoint is not written (the
    converter drops it).
  Janus-Pro-1B (only with --only janus-pro-1b): the LLaMA of its language_config (24 layers,
    2048 wide, 16 heads, FFN 5632, vocabulary 102,400, 16,384 positions; the Janus-Pro paper's
    table and the published config.json agree on these), gen_embed 16,384 x 8, gen_aligner
    (depth 2 to 2048), gen_head (2048 -> 2048 -> 16,384), the text head, a VQ-16 as
    gen_vision_model, all as one bfloat16 pytorch_model.bin (DeepSeek ships .bin); the
    understanding path (SigLIP-L, aligner) as small stand-ins, which the converter skips
    either way; a byte-level tokenizer.json with Janus-Pro's special tokens at 100,000..
Transformers are written as bfloat16 (the converter keeps them so: >= 100 M parameters); the
VQ and TA-Tok as float32.
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import convert  # noqa: E402
import json  # noqa: E402
import qwen2  # noqa: E402  (tools/reference/qwen2.py)
import safetensors_io  # noqa: E402
import t5  # noqa: E402  (tools/reference/t5.py)
import llamagen_gpt  # noqa: E402
import ta_tok as ta_tok_reference  # noqa: E402  (tools/reference/ta_tok.py)
import tar_ar  # noqa: E402
import transformer as tr  # noqa: E402
import upstream_layouts  # noqa: E402
import vq16  # noqa: E402
import vq_decoder as vq  # noqa: E402
from random_init import upstream_init  # noqa: E402

VOCAB = 16384
TA_TOK_ROWS = 729  # Tar's <S0> scale: 27 x 27 TA-Tok ids per image
TA_TOK = dict(codebook_size=65536, bottleneck_dim=1536, l2_normalized=True, in_dim=1152,
              hidden=1152, n_layer=3, n_head=12, intermediate=4304, num_patches=729,
              layer_norm_eps=1e-6)
C2I_IMAGE_SIZE = 384


def log(message, start):
    print(f"[replicas {time.monotonic() - start:6.1f} s] {message}", flush=True)


def tar_ar_file(path, grid, gen, start):
    n_layer, n_head, dim = tar_ar.REGISTRY["llama-abs-LP"]
    cfg = dict(dim=dim, n_layer=n_layer, n_head=n_head, vocab_size=VOCAB, grid_size=grid,
               position_mode="abs_pe", condition_mode="clip_cond", cls_token_num=TA_TOK_ROWS,
               cond_dim=TA_TOK["hidden"], multiple_of=256, norm_eps=1e-5)
    model = tr.Transformer(cfg).eval()
    upstream_init(model, gen)
    count = sum(p.numel() for p in model.parameters())
    upstream_layouts.tar_ar(path, model, "llama-abs-LP", grid * grid, TA_TOK_ROWS,
                            dtype=torch.bfloat16)
    log(f"{path}: llama-abs-LP {grid}x{grid}, {count / 1e6:.0f} M parameters", start)


def write_tar(out, gen, start):
    files = dict(target=os.path.join(out, "upstream", "ar_dtok_lp_512px.pth"),
                 drafter=os.path.join(out, "upstream", "ar_dtok_lp_256px.pth"),
                 ta_tok=os.path.join(out, "upstream", "ta_tok.pth"),
                 vq=os.path.join(out, "upstream", "vq_ds16_t2i.pt"))
    tar_ar_file(files["target"], 32, gen, start)
    tar_ar_file(files["drafter"], 16, gen, start)
    dequantizer = ta_tok_reference.TaTokDequantizer(TA_TOK).eval()
    upstream_init(dequantizer, gen)
    upstream_layouts.ta_tok(files["ta_tok"], dequantizer, gen, TA_TOK_ROWS)
    del dequantizer
    log(f"{files['ta_tok']}: TA-Tok de-quantiser", start)
    write_vq(files["vq"], gen, start)
    return convert.main(["tar-family", "--out", os.path.join(out, "repository", "tar"),
                         "--name", "tar-replica", "--target", files["target"],
                         "--drafter", files["drafter"], "--ta-tok", files["ta_tok"],
                         "--ta-tok-heads", str(TA_TOK["n_head"]), "--vq", files["vq"]])


def write_vq(path, gen, start):
    model = vq.VQModel(vq16.vq_config("VQ-16", VOCAB, 8)).eval()
    upstream_init(model, gen)
    upstream_layouts.llamagen_vq(path, model)
    log(f"{path}: VQ-16, {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M "
        f"parameters", start)


def write_llamagen_c2i(out, gen, start):
    gpt = os.path.join(out, "upstream", f"c2i_XL_{C2I_IMAGE_SIZE}.pt")
    vq_file = os.path.join(out, "upstream", "vq_ds16_c2i.pt")
    n_layer, n_head, dim = llamagen_gpt.REGISTRY["GPT-XL"]
    cfg = dict(dim=dim, n_layer=n_layer, n_head=n_head, vocab_size=VOCAB,
               grid_size=C2I_IMAGE_SIZE // 16, position_mode="rope_2d",
               condition_mode="class_label", cls_token_num=1, num_classes=1000,
               multiple_of=256, norm_eps=1e-5)
    model = tr.Transformer(cfg).eval()
    upstream_init(model, gen)
    count = sum(p.numel() for p in model.parameters())
    upstream_layouts.llamagen_gpt(gpt, model, gen, dtype=torch.bfloat16)
    del model
    log(f"{gpt}: GPT-XL c2i, {count / 1e6:.0f} M parameters", start)
    write_vq(vq_file, gen, start)
    return convert.main(["llamagen-family", "--out",
                         os.path.join(out, "repository", "llamagen-c2i"),
                         "--name", "llamagen-c2i-replica", "--gpt", gpt, "--gpt-model", "GPT-XL",
                         "--gpt-type", "c2i", "--image-size", str(C2I_IMAGE_SIZE),
                         "--vq", vq_file])


TAR_MLLM = dict(model_type="qwen2", hidden_size=1536, num_hidden_layers=28,
                num_attention_heads=12, num_key_value_heads=2, intermediate_size=8960,
                vocab_size=151665 + 2 + 3 + 65536, rms_norm_eps=1e-6, rope_theta=1000000.0,
                tie_word_embeddings=True, max_position_embeddings=32768)
FLAN_T5_XL = dict(model_type="t5", feed_forward_proj="gated-gelu", d_model=2048, d_kv=64,
                  d_ff=5120, num_layers=24, num_heads=32, vocab_size=32128,
                  relative_attention_num_buckets=32, relative_attention_max_distance=128,
                  layer_norm_epsilon=1e-6)


def write_hf(directory, cfg, model, gen, start):
    upstream_init(model, gen)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    state = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    count = sum(v.numel() for v in state.values())
    del model
    safetensors_io.save(state, os.path.join(directory, "model.safetensors"))
    log(f"{directory}: {count / 1e6:.0f} M parameters", start)


def tar_mllm_tokenizer():
    """A byte-level tokenizer.json with Qwen2.5's chat tokens and Tar's added tokens at their
    ids (<im_start>, <im_end>, <S0>-<S2>, <I0>-<I65535> from 151,665); the merges are not
    Qwen2.5's (ids 256-151,642 are never produced): enough for the converter and the server."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
                 + list(range(0xAE, 0xFF + 1)))
    alphabet, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in alphabet:
            alphabet[b] = chr(256 + extra)
            extra += 1
    added = [dict(id=151643 + i, content=t, special=True)
             for i, t in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])]
    tar = ["<im_start>", "<im_end>", "<S0>", "<S1>", "<S2>"] + [f"<I{k}>" for k in range(65536)]
    added += [dict(id=151665 + i, content=t, special=False) for i, t in enumerate(tar)]
    assert added[-1]["id"] == TAR_MLLM["vocab_size"] - 1
    return dict(model=dict(type="BPE", vocab={alphabet[b]: b for b in range(256)}, merges=[]),
                normalizer=None, pre_tokenizer=dict(type="ByteLevel", add_prefix_space=False),
                added_tokens=added)


def write_tar_mllm(out, gen, start):
    hf = os.path.join(out, "upstream", "tar-mllm")
    write_hf(hf, TAR_MLLM, qwen2.CausalLm(TAR_MLLM).eval(), gen, start)
    with open(os.path.join(hf, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tar_mllm_tokenizer(), f)
    return convert.main(["hf-causal-lm", "--dir", hf, "--out",
                         os.path.join(out, "repository", "tar-mllm")])


def write_flan_t5_xl(out, gen, start):
    hf = os.path.join(out, "upstream", "flan-t5-xl")
    write_hf(hf, FLAN_T5_XL, t5.T5Encoder(FLAN_T5_XL).eval(), gen, start)
    return convert.main(["hf-t5-encoder", "--dir", hf, "--out",
                         os.path.join(out, "repository", "flan-t5-xl-encoder")])


JANUS_PRO_1B = dict(
    model_type="multi_modality",
    language_config=dict(hidden_size=2048, intermediate_size=5632, num_attention_heads=16,
                         num_hidden_layers=24, num_key_value_heads=16, vocab_size=102400,
                         max_position_embeddings=16384, torch_dtype="bfloat16"),
    gen_vision_config=dict(cls="VQ-16", model_type="gen_vision",
                           params=dict(image_token_size=VOCAB, n_embed=8)),
    gen_aligner_config=dict(cls="MlpProjector", model_type="gen_aligner",
                            params=dict(depth=2, input_dim=8, n_embed=2048,
                                        projector_type="mlp_gelu")),
    gen_head_config=dict(cls="vision_head", model_type="gen_head",
                         params=dict(image_token_embed=2048, image_token_size=VOCAB,
                                     n_embed=2048)),
    vision_config=dict(cls="CLIPVisionTower", model_type="vision",
                       params=dict(image_size=384, model_name="siglip_large_patch16_384")),
    aligner_config=dict(cls="MlpProjector", model_type="aligner",
                        params=dict(depth=2, input_dim=1024, n_embed=2048,
                                    projector_type="gelu")))


def write_janus_pro_1b(out, gen, start):
    import janus  # tools/reference/janus.py
    hf = os.path.join(out, "upstream", "janus-pro-1b")
    os.makedirs(hf, exist_ok=True)
    model = janus.Janus(JANUS_PRO_1B).eval()
    upstream_init(model, gen)
    count = sum(p.numel() for p in model.parameters())
    vq_model = vq.VQModel(vq16.vq_config("VQ-16", VOCAB, 8), with_encoder=True).eval()
    upstream_init(vq_model, gen)
    state = janus.upstream_state(model, gen, vq_model.state_dict())
    del model, vq_model
    torch.save({k: v.to(torch.bfloat16) for k, v in state.items()},
               os.path.join(hf, "pytorch_model.bin"))
    del state
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(JANUS_PRO_1B, f, indent=2)
    tokenizer = janus.tiny_tokenizer()
    for i, token in enumerate(tokenizer["added_tokens"]):
        token["id"] = 100000 + i
    with open(os.path.join(hf, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    log(f"{hf}: Janus-Pro-1B generation path, {count / 1e6:.0f} M parameters (+ VQ-16)", start)
    return convert.main(["janus-family", "--dir", hf, "--out",
                         os.path.join(out, "repository", "janus-pro-1b"),
                         "--name", "janus-pro-1b-replica"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", choices=["tar", "llamagen-c2i", "tar-mllm", "flan-t5-xl",
                                       "janus-pro-1b"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "upstream"), exist_ok=True)
    gen = torch.Generator().manual_seed(a.seed)
    start = time.monotonic()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    writers = (("tar", write_tar), ("llamagen-c2i", write_llamagen_c2i),
               ("tar-mllm", write_tar_mllm), ("flan-t5-xl", write_flan_t5_xl),
               ("janus-pro-1b", write_janus_pro_1b))
    for name, write in writers:
        # The text stages' models are written only when asked for (issue 43's sizes).
        if a.only == name or (a.only is None and name in ("tar", "llamagen-c2i")):
            rc = write(a.out, gen, start)
            if rc:
                return rc
    log(f"done: {os.path.join(a.out, 'repository')}", start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
