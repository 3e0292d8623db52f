#!/usr/bin/env python3
"""What the family's token spaces allow at best: SynthEval pass rates of held-out scenes
rendered exactly and sent through the VQ (and MuLo-SD's up-sampler) without any AR model:

  render 32 px                    the drafter's pixel space itself
  decode(VQ(render 64 px))        ceiling of the target (16x16 tokens)
  decode(VQ(render 32 px))        ceiling of the drafter alone (8x8 tokens)
  decode(U_2(VQ(render 32 px)))   ceiling of MuLo-SD's drafts (tau = 0) with a perfect drafter

  bazel build //synth:synth_eval
  /usr/bin/python3 tools/synth/ceilings.py [--count 200] [--models models/synth]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
import heldout  # noqa: E402
import resampler as rs  # noqa: E402  (tools/reference, put on the path by train_ar)
import train_ar  # noqa: E402
import train_vq  # noqa: E402
import trainer  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
JUDGE = os.path.join(ROOT, "bazel-bin", "synth", "synth_eval")


def pass_rate(images, prompts, tmp):
    """images in [-1, 1], [N, 3, H, W]; the C++ SynthEval's verdict for each."""
    passed = 0
    for i, prompt in enumerate(prompts):
        rgb = ((images[i].clamp(-1, 1) + 1) * 127.5).round().byte().permute(1, 2, 0).numpy()
        path = os.path.join(tmp, "image.png")
        Image.fromarray(rgb).save(path)
        passed += subprocess.run([JUDGE, f"--caption={prompt}", path],
                                 capture_output=True).returncode == 0
    return 100.0 * passed / len(prompts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=200, help="first N held-out prompts")
    ap.add_argument("--models", default=os.path.join(ROOT, "models", "synth"))
    args = ap.parse_args()
    if not os.path.exists(JUDGE):
        sys.exit("ceilings: build the judge first: bazel build //synth:synth_eval")
    trainer.setup_torch()
    with open(heldout.DEFAULT_PATH) as f:
        entries = [json.loads(line) for line in f if line.strip()][:args.count]
    scenes = [e["scene"] for e in entries]
    prompts = [e["prompt"] for e in entries]
    vq = train_vq.load_trained(os.path.join(args.models, "vq")).eval()
    codebook = vq.quantize.embedding.weight.detach()
    up_dir = os.path.join(args.models, "upsampler")
    # A VQ probe (train_vq.py into another directory) has no up-sampler yet.
    up = (train_ar.load_model(lambda cfg: rs.Resampler(cfg, codebook), up_dir)
          if os.path.exists(os.path.join(up_dir, "model.safetensors")) else None)
    with torch.no_grad():
        low_px = data.render_batch(scenes, data.DRAFTER_SIZE)
        low = train_vq.encode_ids(vq, low_px)
        high = train_vq.encode_ids(vq, data.render_batch(scenes, data.TARGET_SIZE))
        rows = [("render 32 px", low_px),
                ("decode(VQ(render 64 px)): target ceiling", vq.decode_code(high, 16, 16)),
                ("decode(VQ(render 32 px)): drafter ceiling", vq.decode_code(low, 8, 8))]
        summary = f"{len(prompts)} held-out scenes"
        if up is not None:
            up_ids = up(low, 8, 8).argmax(1).flatten(1)
            rows.append(("decode(U_2(VQ(render 32 px))): MuLo-SD draft ceiling",
                         vq.decode_code(up_ids, 16, 16)))
            summary += (f"; U_2 token agreement with VQ(64 px): "
                        f"{100 * (up_ids == high).float().mean().item():.1f}%")
    print(summary + "\n")
    print("| images | SynthEval pass |\n|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, images in rows:
            print(f"| {name} | {pass_rate(images, prompts, tmp):.1f}% |", flush=True)


if __name__ == "__main__":
    main()
