#!/usr/bin/env python3
"""Trains MuLo-SD's up-sampler U_2 and down-sampler D_2 for models/synth (token
cross-entropy between the VQ tokens of the same scene at 32 px and 64 px) and reports token
agreement on held-out scenes. Exports models/synth/upsampler and models/synth/downsampler.

  /usr/bin/python3 tools/synth/train_resamplers.py [--steps 1500]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import data  # noqa: E402
import heldout  # noqa: E402
import resampler as rs  # noqa: E402
import trainer  # noqa: E402
import train_ar  # noqa: E402
import train_vq  # noqa: E402

SEED = 31


def config(kind):
    return dict(kind=kind, factor=2, channels=64, num_blocks=4, codebook_size=1024,
                codebook_embed_dim=8)


def agreement(up, down, vq, count=256):
    scenes = [e["scene"] for e in heldout.make(count, heldout.HELDOUT_SEED)]
    with torch.no_grad():
        low = train_vq.encode_ids(vq, data.render_batch(scenes, data.DRAFTER_SIZE))
        high = train_vq.encode_ids(vq, data.render_batch(scenes, data.TARGET_SIZE))
        up_ids = up(low, 8, 8).argmax(1).flatten(1)
        down_ids = down(high, 16, 16).argmax(1).flatten(1)
    return {"up_token_agreement": round((up_ids == high).float().mean().item(), 4),
            "down_token_agreement": round((down_ids == low).float().mean().item(), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()
    trainer.setup_torch()
    torch.manual_seed(SEED)
    dev = trainer.device()
    vq = train_vq.load_trained().to(dev)
    codebook = vq.quantize.embedding.weight.detach()
    up = rs.Resampler(config("up"), codebook).to(dev)
    down = rs.Resampler(config("down"), codebook).to(dev)
    params = list(up.parameters()) + list(down.parameters())
    opt = torch.optim.Adam(params, lr=args.lr)
    stream = data.SceneStream(SEED)

    def step_fn(step):
        scenes = stream.scenes(step, args.batch)
        with torch.no_grad():
            low = train_vq.encode_ids(vq, data.render_batch(scenes, data.DRAFTER_SIZE, dev))
            high = train_vq.encode_ids(vq, data.render_batch(scenes, data.TARGET_SIZE, dev))
        with trainer.autocast():
            up_logits = up(low, 8, 8).float()
            down_logits = down(high, 16, 16).float()
        up_loss = F.cross_entropy(up_logits, high.view(-1, 16, 16))
        down_loss = F.cross_entropy(down_logits, low.view(-1, 8, 8))
        opt.zero_grad()
        (up_loss + down_loss).backward()
        opt.step()
        return {"up": up_loss.item(), "down": down_loss.item()}

    seconds = trainer.run_training("resamplers", {"up": up, "down": down}, opt, args.steps,
                                   step_fn, SEED, peak_lr=args.lr, warmup=50)
    for m in (up, down, vq):
        m.cpu()
    report = agreement(up, down, vq)
    report["train_minutes"] = round(seconds / 60, 1)
    report["parameters_each"] = sum(p.numel() for p in up.parameters())
    print(f"[resamplers] held-out: {report}", flush=True)
    for name, module in (("upsampler", up), ("downsampler", down)):
        train_ar.save_model(module, module.cfg, os.path.join(trainer.MODELS_DIR, name),
                            dtype=torch.float32)
    with open(os.path.join(trainer.WORK_DIR, "resamplers", "report.json"), "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
