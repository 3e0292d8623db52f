#!/usr/bin/env python3
"""Writes a family with the bundled architectures and sizes but random weights (the trained
VQ when models/synth/vq exists), for measuring what the decoding methods cost independently
of what the models have learned: MuLo-SD at tau = 0 (everything accepted) is its fixed cost
(drafting, up/down-sampling, verification), tau > 1 its worst case. Acceptance numbers on
these weights mean nothing.

  /usr/bin/python3 tools/synth/random_family.py --out out/random_family
  bazel-bin/bench/methods_bench --models=out/random_family --limit=4 --sweep
"""
import argparse
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_ar  # noqa: E402  (puts tools/reference on the path too)
import train_resamplers  # noqa: E402
import domain  # noqa: E402
import resampler as rs  # noqa: E402
import text_encoder as te  # noqa: E402
import trainer  # noqa: E402
import train_vq  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="family directory to write")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    for role in ("target", "drafter", "chain"):
        cfg = train_ar.model_config(role)
        model = train_ar.tr.Transformer(cfg)
        train_ar.init_abs_pe_2d(model, cfg)
        train_ar.save_model(model, cfg, os.path.join(args.out, role))
    train_ar.save_model(te.TextEncoder(train_ar.CONDITIONER), train_ar.CONDITIONER,
                        os.path.join(args.out, "conditioner"), dtype=torch.float32,
                        extra={"vocab.json": domain.vocabulary()})
    vq_dir = os.path.join(trainer.MODELS_DIR, "vq")
    if not os.path.exists(os.path.join(vq_dir, "model.safetensors")):
        sys.exit(f"random_family: no trained VQ in {vq_dir}; run train_vq.py first")
    vq_out = os.path.join(args.out, "vq")
    if os.path.isdir(vq_out):
        shutil.rmtree(vq_out)
    shutil.copytree(vq_dir, vq_out)
    codebook = train_vq.load_trained().quantize.embedding.weight.detach()
    for name, kind in (("upsampler", "up"), ("downsampler", "down")):
        module = rs.Resampler(train_resamplers.config(kind), codebook)
        train_ar.save_model(module, module.cfg, os.path.join(args.out, name), dtype=torch.float32)
    components = ("target", "vq", "conditioner", "drafter", "chain", "upsampler", "downsampler")
    with open(os.path.join(args.out, "family.json"), "w") as f:
        json.dump({"name": "random", "default_cfg_scale": 4.0,
                   "components": {c: c for c in components}}, f, indent=2)
        f.write("\n")
    print(f"random-weight family with the bundled sizes written to {args.out}")


if __name__ == "__main__":
    main()
