#!/usr/bin/env python3
"""Writes a random-weight transformer checkpoint for a config.json, e.g. to benchmark the
engine at a size no trained model exists for yet.

  /usr/bin/python3 tools/reference/random_checkpoint.py --config cfg.json --out /tmp/model
writes /tmp/model/config.json and /tmp/model/model.safetensors (upstream key names).
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import transformer as tr  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    args = ap.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    torch.manual_seed(args.seed)
    model = tr.Transformer(cfg)
    dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[args.dtype]
    os.makedirs(args.out, exist_ok=True)
    if os.path.abspath(args.config) != os.path.abspath(os.path.join(args.out, "config.json")):
        shutil.copyfile(args.config, os.path.join(args.out, "config.json"))
    safetensors_io.save({k: v.to(dtype) for k, v in model.state_dict().items()},
                        os.path.join(args.out, "model.safetensors"))
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {n / 1e6:.2f}M parameters")


if __name__ == "__main__":
    main()
