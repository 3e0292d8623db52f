#!/usr/bin/env python3
"""Trains the VQ tokenizer of models/synth (LlamaGen VQ architecture, small channels):
64 px images -> 16x16 tokens (and 32 px -> 8x8 for the drafter), codebook 1024 x 8,
L2-normalised. Loss: pixel MSE + L1 + codebook + 0.25 commitment, the pixel terms weighted
1 + object_weight on object pixels and the one-pixel ring around them; unused codes are
restarted from encoder outputs. Exports models/synth/vq/{config.json, model.safetensors} and
prints codebook usage and reconstruction PSNR on held-out scenes.

  /usr/bin/python3 tools/synth/train_vq.py                 # stage 1, from scratch
  /usr/bin/python3 tools/synth/train_vq.py --refine        # stage 2
  /usr/bin/python3 tools/synth/train_vq.py --decoder_only  # stage 3

Stage defaults (STAGE_DEFAULTS; every one can be overridden by its flag):
  stage 1       from scratch, 1/2 of each batch 32 px scenes, object weight 16
  --refine      from stage 1's export, 3/4 32 px scenes, object weight 32
  --decoder_only  encoder, quant_conv and codebook frozen (token ids, and every AR model
                trained on them, stay valid); only post_quant_conv and the decoder train,
                3/4 32 px scenes, object weight 32

Why objects are weighted: the drafter's 8x8 grid holds a small object (6 px at 32 px) in about
1.5 tokens. Objects cover 2-7% of an image, so under a plain pixel loss the encoder spends its
10 bits per token on the background and a small square comes back as a blob that SynthEval
cannot name. With the plain loss (the first family's VQ), VQ round trips of 32 px held-out
scenes passed SynthEval for 43% of prompts after stage 1 and 64.5% after all three stages;
with the weights, 70.5% after stage 1 and 87.5% after stage 2 (tools/synth/ceilings.py).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import data  # noqa: E402
import heldout  # noqa: E402
import domain  # noqa: E402
import safetensors_io  # noqa: E402
import trainer  # noqa: E402
import vq_decoder as vq  # noqa: E402

CONFIG = dict(codebook_size=1024, codebook_embed_dim=8, z_channels=64, ch=32, ch_mult=[1, 2, 2],
              num_res_blocks=1, norm_groups=8, codebook_l2_norm=True, out_channels=3)
SEED = 11
STAGE_DEFAULTS = {
    "vq": dict(lr=2e-3, small_share=0.5, object_weight=16.0),
    "vq_refine": dict(lr=1e-3, small_share=0.75, object_weight=32.0),
    "vq_decoder": dict(lr=1e-3, small_share=0.75, object_weight=32.0),
}


# LlamaGen's quantisation and encoding live with the reference model (tools/convert's resampler
# training uses them too); the names stay here for the family's scripts.
quantize = vq.quantize
encode_ids = vq.encode_ids


class Fp32GroupNorm(nn.GroupNorm):
    """GroupNorm computed in fp32 whatever its input: torch 1.13's CPU GroupNorm rejects bf16
    input with fp32 weights, and normalisation statistics are better kept in fp32 anyway."""

    def forward(self, x):
        return F.group_norm(x.float(), self.num_groups, self.weight, self.bias, self.eps)


def for_mixed_precision(model):
    """Lets trainer.autocast() run the VQ's convolutions in bf16 (same parameters and keys)."""
    for m in model.modules():
        if type(m) is nn.GroupNorm:
            m.__class__ = Fp32GroupNorm
    return model


def forward(model, images):
    # Convolutions in bf16 where that is native; the nearest-code search and the codebook
    # losses stay fp32 so that code assignment is not decided by bf16 rounding.
    with trainer.autocast():
        z = model.quant_conv(model.encoder(images)).float()
    zq, ids, z = quantize(model, z)
    codebook_loss = F.mse_loss(zq, z.detach())
    commit_loss = F.mse_loss(z, zq.detach())
    zq = z + (zq - z).detach()
    with trainer.autocast():
        recon = model.decoder(model.post_quant_conv(zq)).float()
    return recon, ids, codebook_loss, commit_loss, z


def pixel_weights(object_mask, object_weight):
    """Per-pixel loss weights [B, 1, S, S]: 1 + object_weight on object pixels and the
    one-pixel ring around them (why: see the module docstring); None when object_weight is 0."""
    if object_weight == 0:
        return None
    ring = F.max_pool2d(object_mask, 3, stride=1, padding=1)
    return 1.0 + object_weight * ring


def weighted_mean(err, weight):
    if weight is None:
        return err.mean()
    return (err * weight).sum() / (weight.sum() * err.size(1))


def psnr(a, b):
    mse = F.mse_loss((a.clamp(-1, 1) + 1) * 127.5, (b + 1) * 127.5).item()
    return 10 * torch.log10(torch.tensor(255.0 ** 2 / max(mse, 1e-10))).item()


def evaluate(model, count=256):
    entries = heldout.make(count, heldout.HELDOUT_SEED)
    scenes = [e["scene"] for e in entries]
    report = {}
    used = set()
    with torch.no_grad():
        for size in (data.TARGET_SIZE, data.DRAFTER_SIZE):
            images = data.render_batch(scenes, size)
            ids = encode_ids(model, images)
            h = size // 4
            recon = model.decode_code(ids, h, h)
            report[f"psnr_{size}px"] = round(psnr(recon, images), 2)
            used.update(ids.flatten().tolist())
    report["codebook_usage"] = f"{len(used)}/{model.cfg['codebook_size']}"
    return report


def export(model, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    safetensors_io.save(model.state_dict(), os.path.join(out_dir, "model.safetensors"))


def load_trained(path=os.path.join(trainer.MODELS_DIR, "vq")):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    model = vq.VQModel(cfg)
    model.load_state_dict(safetensors_io.load(os.path.join(path, "model.safetensors")))
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate")
    ap.add_argument("--refine", action="store_true", help="second stage (see above)")
    ap.add_argument("--decoder_only", action="store_true", help="third stage (see above)")
    ap.add_argument("--object_weight", type=float, default=None,
                    help="extra loss weight on object pixels and their 1 px ring")
    ap.add_argument("--small_share", type=float, default=None,
                    help="share of 32 px scenes in each batch")
    ap.add_argument("--codebook_size", type=int, default=CONFIG["codebook_size"],
                    help="first stage only (later stages keep the exported size); for probes "
                         "with MULO_TRAIN_DIR / MULO_MODELS_DIR set elsewhere")
    args = ap.parse_args()
    stage = "vq_decoder" if args.decoder_only else "vq_refine" if args.refine else "vq"
    defaults = STAGE_DEFAULTS[stage]
    lr = args.lr or defaults["lr"]
    object_weight = defaults["object_weight"] if args.object_weight is None else args.object_weight
    small_share = defaults["small_share"] if args.small_share is None else args.small_share
    trainer.setup_torch()
    torch.manual_seed(SEED)
    dev = trainer.device()
    if args.refine or args.decoder_only:
        model = load_trained().to(dev)  # the previous stage's export
    else:
        model = vq.VQModel(dict(CONFIG, codebook_size=args.codebook_size)).to(dev)
    for_mixed_precision(model)
    if args.decoder_only:
        for part in (model.encoder, model.quant_conv, model.quantize):
            for p in part.parameters():
                p.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.99))
    split = args.batch - round(small_share * args.batch)  # the first `split` scenes are 64 px
    stream = data.SceneStream(SEED + args.refine + 2 * args.decoder_only)  # new scenes per stage
    usage = torch.zeros(model.cfg["codebook_size"], device=dev)

    def step_fn(step):
        scenes = stream.scenes(step, args.batch)
        loss_total = 0.0
        opt.zero_grad()
        metrics = {}
        for name, part, size in (("64", scenes[:split], data.TARGET_SIZE),
                                 ("32", scenes[split:], data.DRAFTER_SIZE)):
            images, object_mask = data.render_with_object_masks(part, size, dev)
            weight = pixel_weights(object_mask, object_weight)
            recon, ids, cb, commit, z = forward(model, images)
            rec = weighted_mean((recon - images) ** 2, weight)
            loss = rec + weighted_mean((recon - images).abs(), weight) + cb + 0.25 * commit
            (loss * images.size(0) / args.batch).backward()
            usage.index_add_(0, ids.flatten(), torch.ones(ids.numel(), device=dev))
            metrics[f"rec{name}"] = rec.item()
            loss_total += loss.item()
            last_z = z
        opt.step()
        # Restart codes unused for 100 steps from random encoder outputs of this batch (not
        # when the codebook is frozen).
        if (step + 1) % 100 == 0 and not args.decoder_only:
            dead = (usage == 0).nonzero().flatten()
            if len(dead) > 0:
                flat = last_z.detach().permute(0, 2, 3, 1).reshape(-1, CONFIG["codebook_embed_dim"])
                pick = torch.randint(0, flat.size(0), (len(dead),),
                                     generator=torch.Generator().manual_seed(step)).to(dev)
                with torch.no_grad():
                    model.quantize.embedding.weight[dead] = flat[pick] + 0.01 * torch.randn(
                        len(dead), flat.size(1),
                        generator=torch.Generator().manual_seed(step + 1)).to(dev)
            usage.zero_()
        metrics["loss"] = loss_total
        return metrics

    t0 = time.time()
    seconds = trainer.run_training(stage, {"vq": model}, opt, args.steps, step_fn,
                                   SEED + args.refine + 2 * args.decoder_only, peak_lr=lr,
                                   warmup=50)
    model.cpu()
    report = evaluate(model)
    report["train_minutes"] = round(seconds / 60, 1)
    print(f"[{stage}] held-out: {report}", flush=True)
    out = os.path.join(trainer.MODELS_DIR, "vq")
    export(model, out)
    with open(os.path.join(trainer.WORK_DIR, stage, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"[vq] exported to {out} ({time.time() - t0:.0f} s this run)")


if __name__ == "__main__":
    main()
