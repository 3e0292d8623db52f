#!/usr/bin/env python3
"""Trains MuLo-SD's up-sampler U_2 and down-sampler D_2 for models/synth and reports token
agreement and pixel fidelity on held-out scenes. Exports models/synth/upsampler and
models/synth/downsampler.

Loss: token cross-entropy between the VQ tokens of the same scene at 32 px and 64 px; from
step --pixel_from on (the cheap token loss first, 3x faster steps), plus (--pixel_weight) a
pixel loss through the frozen VQ decoder: the predicted codebook vector,
quantised with a straight-through gradient as in VQ training, is decoded and compared (MSE +
L1) with the rendered scene at the output resolution. Token cross-entropy alone plateaus near
4.1 nats because many codes are near-duplicates (the VQ picks one of several almost equal
codes for the same patch), so exact token agreement says little; what MuLo-SD needs from U_2
is drafts that decode to the right image and that the target accepts.

  /usr/bin/python3 tools/synth/train_resamplers.py [--steps 2100] [--pixel_from 1500]
  /usr/bin/python3 tools/synth/train_resamplers.py --report_only   # the family's pair, no training

MULO_MODELS_DIR=<dir> reads the VQ from and writes the pair to another family directory (an
experiment that must not replace the bundled pair).
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
import safetensors_io  # noqa: E402
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
        low_px = data.render_batch(scenes, data.DRAFTER_SIZE)
        high_px = data.render_batch(scenes, data.TARGET_SIZE)
        low = train_vq.encode_ids(vq, low_px)
        high = train_vq.encode_ids(vq, high_px)
        up_ids = up(low, 8, 8).argmax(1).flatten(1)
        down_ids = down(high, 16, 16).argmax(1).flatten(1)
        round_trip = down(up_ids, 16, 16).argmax(1).flatten(1)
        return {"up_token_agreement": round((up_ids == high).float().mean().item(), 4),
                "down_token_agreement": round((down_ids == low).float().mean().item(), 4),
                # D_2(U_2(y)) against y: when MuLo-SD accepts a drafted block as it is, this is
                # the prefix the drafter continues from instead of its own tokens.
                "round_trip_agreement": round((round_trip == low).float().mean().item(), 4),
                # PSNR of the decoded output against the rendered scene, beside the VQ's own
                # round trip at that resolution (the best a token map can do).
                "up_psnr": round(train_vq.psnr(vq.decode_code(up_ids, 16, 16), high_px), 2),
                "vq_psnr_64px": round(train_vq.psnr(vq.decode_code(high, 16, 16), high_px), 2),
                "down_psnr": round(train_vq.psnr(vq.decode_code(down_ids, 8, 8), low_px), 2),
                "vq_psnr_32px": round(train_vq.psnr(vq.decode_code(low, 8, 8), low_px), 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2100)
    ap.add_argument("--pixel_from", type=int, default=1500,
                    help="first step with the pixel loss (the learning rate re-warms there)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--pixel_weight", type=float, default=1.0,
                    help="weight of the pixel loss through the frozen VQ decoder (0: tokens only)")
    ap.add_argument("--cycle_weight", type=float, default=0.0,
                    help="weight of D_2's cross-entropy on U_2's own tokens against the "
                         "drafter-resolution tokens they were made from (0: off)")
    ap.add_argument("--report_only", action="store_true",
                    help="print the held-out agreement of the family's trained pair and exit")
    args = ap.parse_args()
    trainer.setup_torch()
    torch.manual_seed(SEED)
    dev = trainer.device()
    vq = train_vq.for_mixed_precision(train_vq.load_trained()).to(dev)
    for p in vq.parameters():
        p.requires_grad_(False)
    codebook = vq.quantize.embedding.weight.detach()
    unit_codebook = F.normalize(codebook.float(), dim=-1).to(dev)
    if args.report_only:
        pair = []
        for name in ("upsampler", "downsampler"):
            directory = os.path.join(trainer.MODELS_DIR, name)
            with open(os.path.join(directory, "config.json")) as f:
                module = rs.Resampler(json.load(f), codebook.cpu())
            state = safetensors_io.load(os.path.join(directory, "model.safetensors"))
            module.load_state_dict({k: v.float() for k, v in state.items()})
            pair.append(module.eval())
        print(f"[resamplers] {trainer.MODELS_DIR}: {agreement(*pair, vq.cpu())}", flush=True)
        return
    up = rs.Resampler(config("up"), codebook).to(dev)
    down = rs.Resampler(config("down"), codebook).to(dev)
    params = list(up.parameters()) + list(down.parameters())
    opt = torch.optim.Adam(params, lr=args.lr)
    stream = data.SceneStream(SEED)

    def step_fn(step):
        scenes = stream.scenes(step, args.batch)
        low_px = data.render_batch(scenes, data.DRAFTER_SIZE, dev)
        high_px = data.render_batch(scenes, data.TARGET_SIZE, dev)
        with torch.no_grad():
            low = train_vq.encode_ids(vq, low_px)
            high = train_vq.encode_ids(vq, high_px)
        with trainer.autocast():
            up_vec = up.vectors(low, 8, 8).float()
            down_vec = down.vectors(high, 16, 16).float()
        up_logits, down_logits = up.logits(up_vec), down.logits(down_vec)
        up_loss = F.cross_entropy(up_logits, high.view(-1, 16, 16))
        down_loss = F.cross_entropy(down_logits, low.view(-1, 8, 8))
        loss = up_loss + down_loss
        # Same keys at every step (the loss log is one CSV); nan while a loss is off.
        metrics = {"up": up_loss.item(), "down": down_loss.item(), "cycle": float("nan"),
                   "up_pix": float("nan"), "down_pix": float("nan")}
        if args.cycle_weight > 0:
            # D_2 also learns to undo U_2: given U_2's tokens for a scene (fixed, as a data
            # source; argmax carries no gradient), give back the drafter-resolution tokens
            # they came from.
            up_ids = up_logits.argmax(1).flatten(1)
            with trainer.autocast():
                cycle_vec = down.vectors(up_ids, 16, 16).float()
            cycle_loss = F.cross_entropy(down.logits(cycle_vec), low.view(-1, 8, 8))
            loss = loss + args.cycle_weight * cycle_loss
            metrics["cycle"] = cycle_loss.item()
        if args.pixel_weight > 0 and step >= args.pixel_from:
            up_px = rs.decode_straight_through(vq, up_vec, unit_codebook, trainer.autocast)
            down_px = rs.decode_straight_through(vq, down_vec, unit_codebook,
                                                 trainer.autocast)
            up_pix = F.mse_loss(up_px, high_px) + F.l1_loss(up_px, high_px)
            down_pix = F.mse_loss(down_px, low_px) + F.l1_loss(down_px, low_px)
            loss = loss + args.pixel_weight * (up_pix + down_pix)
            metrics.update(up_pix=up_pix.item(), down_pix=down_pix.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return metrics

    seconds = trainer.run_training("resamplers", {"up": up, "down": down}, opt, args.steps,
                                   step_fn, SEED, peak_lr=args.lr, warmup=50,
                                   schedule=[(0, "cosine", args.pixel_from),
                                             (args.pixel_from, "cosine", None)])
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
