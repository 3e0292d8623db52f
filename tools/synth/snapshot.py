#!/usr/bin/env python3
"""Exports the target stage's latest training checkpoint (target + text conditioner, with the
trained VQ) as a loadable family, so its quality can be measured while training goes on:

  /usr/bin/python3 tools/synth/snapshot.py --out out/snapshot
  bazel-bin/bench/synth_quality --models=out/snapshot --drafter=false --limit=32

The family written holds only target, vq and conditioner; models/synth is not touched.
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
import domain  # noqa: E402
import text_encoder as te  # noqa: E402
import trainer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="family directory to write")
    args = ap.parse_args()
    ckpt_path = os.path.join(trainer.WORK_DIR, "target", "checkpoint.pt")
    if not os.path.exists(ckpt_path):
        sys.exit(f"snapshot: no checkpoint at {ckpt_path}; start the target stage first")
    state = torch.load(ckpt_path, map_location="cpu")
    cfg = train_ar.model_config("target")
    model = train_ar.tr.Transformer(cfg)
    model.load_state_dict(state["modules"]["model"])
    conditioner = te.TextEncoder(train_ar.CONDITIONER)
    conditioner.load_state_dict(state["modules"]["conditioner"])
    os.makedirs(args.out, exist_ok=True)
    train_ar.save_model(model, cfg, os.path.join(args.out, "target"))
    train_ar.save_model(conditioner, train_ar.CONDITIONER, os.path.join(args.out, "conditioner"),
                        dtype=torch.float32, extra={"vocab.json": domain.vocabulary()})
    vq_out = os.path.join(args.out, "vq")
    if os.path.isdir(vq_out):
        shutil.rmtree(vq_out)
    shutil.copytree(os.path.join(trainer.MODELS_DIR, "vq"), vq_out)
    with open(os.path.join(trainer.MODELS_DIR, "family.json")) as f:
        family = json.load(f)
    family["name"] = "snapshot"
    family["components"] = {k: k for k in ("target", "vq", "conditioner")}
    with open(os.path.join(args.out, "family.json"), "w") as f:
        json.dump(family, f, indent=2)
        f.write("\n")
    print(f"snapshot of target step {state['step']} written to {args.out}")


if __name__ == "__main__":
    main()
