"""Tiny random-weight models saved in the upstream layouts (tools/convert/upstream_layouts.py),
and the registry names their sizes go by, for the converter and serving tests.

  write_files(dir) -> {name: path}: tar_512.pth (8x8 grid, 9 TA-Tok conditions),
  tar_256.pth (4x4, MuLo-SD's drafter), ta_tok.pth, vq.pt, t2i.pt (LlamaGen t2i, 8x8, 6
  caption rows of width 32), c2i.pt (LlamaGen c2i, 8x8, 10 classes)
  register_tiny_sizes(): adds the tiny names to the converter's registries (the only thing a
  tiny model needs beyond the upstream layout)
"""
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "convert"))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
import llamagen_gpt  # noqa: E402
import ta_tok as ta_tok_reference  # noqa: E402  (tools/reference/ta_tok.py)
import tar_ar  # noqa: E402
import transformer as tr  # noqa: E402
import upstream_layouts  # noqa: E402
import vq16  # noqa: E402
import vq_decoder as vq  # noqa: E402
from random_init import spread_init  # noqa: E402

VOCAB = 64
TAR = dict(dim=32, n_layer=1, n_head=2, vocab_size=VOCAB, position_mode="abs_pe",
           condition_mode="clip_cond", cls_token_num=9, cond_dim=24, multiple_of=32,
           norm_eps=1e-5)
T2I = dict(dim=32, n_layer=1, n_head=2, vocab_size=VOCAB, grid_size=8, position_mode="rope_2d",
           condition_mode="caption", cls_token_num=6, cond_dim=32, multiple_of=256, norm_eps=1e-5)
# LlamaGen c2i: one class-label position (upstream's c2i_*.pt layout, no saved args).
C2I = dict(T2I, condition_mode="class_label", cls_token_num=1, num_classes=10)
del C2I["cond_dim"]
TA_TOK = dict(codebook_size=96, bottleneck_dim=8, l2_normalized=True, in_dim=16, hidden=24,
              n_layer=2, n_head=2, intermediate=40, num_patches=16, layer_norm_eps=1e-6)
VQ_ARCH = dict(z_channels=8, ch=8, ch_mult=[1, 1], num_res_blocks=1, norm_groups=4,
               codebook_l2_norm=True, out_channels=3)


def register_tiny_sizes():
    tar_ar.REGISTRY["llama-abs-tiny"] = (TAR["n_layer"], TAR["n_head"], TAR["dim"])
    llamagen_gpt.REGISTRY["GPT-tiny"] = (T2I["n_layer"], T2I["n_head"], T2I["dim"])
    vq16.REGISTRY["VQ-tiny"] = dict(VQ_ARCH)


def write_files(out_dir, seed=7):
    os.makedirs(out_dir, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    paths = {}
    for name, grid in (("tar_512", 8), ("tar_256", 4)):
        model = tr.Transformer(dict(TAR, grid_size=grid)).eval()
        spread_init(model, gen)
        paths[name] = os.path.join(out_dir, name + ".pth")
        upstream_layouts.tar_ar(paths[name], model, "llama-abs-tiny", grid * grid,
                                TAR["cls_token_num"])
    dequantizer = ta_tok_reference.TaTokDequantizer(TA_TOK).eval()
    spread_init(dequantizer, gen)
    paths["ta_tok"] = os.path.join(out_dir, "ta_tok.pth")
    upstream_layouts.ta_tok(paths["ta_tok"], dequantizer, gen)
    vq_model = vq.VQModel(dict(VQ_ARCH, codebook_size=VOCAB, codebook_embed_dim=8)).eval()
    spread_init(vq_model, gen)
    paths["vq"] = os.path.join(out_dir, "vq.pt")
    upstream_layouts.llamagen_vq(paths["vq"], vq_model)
    t2i = tr.Transformer(T2I).eval()
    spread_init(t2i, gen)
    paths["t2i"] = os.path.join(out_dir, "t2i.pt")
    upstream_layouts.llamagen_gpt(paths["t2i"], t2i, gen)
    c2i = tr.Transformer(C2I).eval()
    spread_init(c2i, gen)
    paths["c2i"] = os.path.join(out_dir, "c2i.pt")
    upstream_layouts.llamagen_gpt(paths["c2i"], c2i, gen)
    return paths


def c2i_flags():
    return ["--gpt-model", "GPT-tiny", "--gpt-type", "c2i", "--image-size", "128",
            "--num-classes", str(C2I["num_classes"]), "--codebook-size", str(VOCAB),
            "--vq-model", "VQ-tiny"]


def t2i_flags():
    return ["--gpt-model", "GPT-tiny", "--gpt-type", "t2i", "--image-size", "128",
            "--cls-token-num", str(T2I["cls_token_num"]), "--t5-feature-dim",
            str(T2I["cond_dim"]), "--codebook-size", str(VOCAB), "--vq-model", "VQ-tiny"]
