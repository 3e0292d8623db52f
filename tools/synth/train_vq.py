#!/usr/bin/env python3
"""Trains the VQ tokenizer of models/synth (LlamaGen VQ architecture, small channels):
64 px images -> 16x16 tokens (and 32 px -> 8x8 for the drafter), codebook 1024 x 8,
L2-normalised. Loss: pixel MSE + codebook + 0.25 commitment; unused codes are restarted from
encoder outputs. Exports models/synth/vq/{config.json, model.safetensors} and prints codebook
usage and reconstruction PSNR on held-out scenes.

  /usr/bin/python3 tools/synth/train_vq.py [--steps 1500]
  /usr/bin/python3 tools/synth/train_vq.py --refine [--steps 1500]
  /usr/bin/python3 tools/synth/train_vq.py --decoder_only [--steps 1500]

--refine is the second stage: it starts from the exported first-stage weights and trains on
equal shares of 64 px and 32 px scenes with an added L1 loss, which sharpens the small shapes
the 8x8 drafter grid must carry (after the first stage, VQ round trips of 32 px scenes passed
SynthEval for 43% of held-out prompts, of 64 px ones 93.5%).

--decoder_only is the third stage: encoder, quant_conv and codebook frozen (so token ids, and
every AR model trained on them, stay valid), only post_quant_conv and the decoder train, on
3/4 32 px and 1/4 64 px scenes: it sharpens what the 8x8 drafter grid decodes to.
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


def quantize(model, z):
    """LlamaGen's VQ: L2-normalised z and codebook, nearest entry, straight-through."""
    z = F.normalize(z, dim=1)
    b, c, h, w = z.shape
    flat = z.permute(0, 2, 3, 1).reshape(-1, c)
    book = model.quantize.codebook()
    ids = torch.cdist(flat, book).argmin(dim=1)
    zq = book[ids].view(b, h, w, c).permute(0, 3, 1, 2)
    return zq, ids.view(b, h * w), z


def encode_ids(model, images):
    with torch.no_grad():
        _, ids, _ = quantize(model, model.quant_conv(model.encoder(images)))
    return ids


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
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate "
                    "(default 2e-3, refine 1e-3)")
    ap.add_argument("--refine", action="store_true", help="second stage (see above)")
    ap.add_argument("--decoder_only", action="store_true", help="third stage (see above)")
    ap.add_argument("--codebook_size", type=int, default=CONFIG["codebook_size"],
                    help="first stage only (later stages keep the exported size); for probes "
                         "with MULO_TRAIN_DIR / MULO_MODELS_DIR set elsewhere")
    args = ap.parse_args()
    lr = args.lr or (1e-3 if args.refine or args.decoder_only else 2e-3)
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
    split = (args.batch // 4 if args.decoder_only else
             args.batch // 2 if args.refine else args.batch * 2 // 3)
    stream = data.SceneStream(SEED + args.refine + 2 * args.decoder_only)  # new scenes per stage
    usage = torch.zeros(model.cfg["codebook_size"], device=dev)

    def step_fn(step):
        scenes = stream.scenes(step, args.batch)
        big = data.render_batch(scenes[:split], data.TARGET_SIZE, dev)
        small = data.render_batch(scenes[split:], data.DRAFTER_SIZE, dev)
        loss_total = 0.0
        opt.zero_grad()
        metrics = {}
        for name, images in (("64", big), ("32", small)):
            recon, ids, cb, commit, z = forward(model, images)
            rec = F.mse_loss(recon, images)
            loss = rec + cb + 0.25 * commit
            if args.refine or args.decoder_only:
                loss = loss + F.l1_loss(recon, images)
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
    stage = "vq_decoder" if args.decoder_only else "vq_refine" if args.refine else "vq"
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
