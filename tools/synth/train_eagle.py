#!/usr/bin/env python3
"""Trains the EAGLE-style drafter head of models/synth on the frozen target's features
(teacher forcing over training scenes): SmoothL1 on the next feature + 0.1 x cross-entropy
against the target's next-token distribution, as EAGLE. Reports top-1 / top-3 agreement with
the target on held-out scenes. Exports models/synth/eagle.

  /usr/bin/python3 tools/synth/train_eagle.py [--steps 800]
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
import domain  # noqa: E402
import eagle_head as eh  # noqa: E402
import heldout  # noqa: E402
import trainer  # noqa: E402
import train_ar  # noqa: E402
import train_vq  # noqa: E402
import transformer as tr  # noqa: E402

SEED = 41


def target_features(target, conditioner, vocab, vq, scenes, null):
    """Teacher-forced target run: (tokens [B, N], features [B, cls+N-1, D], logits)."""
    dev = null.device
    with torch.no_grad():
        # fp32 even under trainer.autocast(): token ids exactly as the data pipeline makes them.
        with torch.autocast(dev.type, enabled=False):
            tokens = train_vq.encode_ids(vq, data.render_batch(scenes, data.TARGET_SIZE, dev))
        features_c = conditioner(train_ar.caption_ids(scenes, vocab).to(dev))
        logits, hidden = target(features_c, null, tokens[:, :-1], return_hidden=True)
    return tokens, hidden, logits


def head_outputs(head, target, tokens, hidden):
    cls = target.cfg["cls_token_num"]
    n = tokens.size(1)
    inputs = hidden[:, cls - 1: cls - 1 + n - 1]       # f at positions cls-1 .. cls+n-3
    emb = target.tok_embeddings(tokens[:, : n - 1])    # tokens 0 .. n-2
    pred = head(emb, inputs)                            # predicts f at cls .. cls+n-2
    return pred, hidden[:, cls: cls + n - 1]


def agreement(head, target, conditioner, vocab, vq, count=128):
    scenes = [e["scene"] for e in heldout.make(count, heldout.HELDOUT_SEED)]
    null = torch.zeros(len(scenes), dtype=torch.bool)
    tokens, hidden, logits = target_features(target, conditioner, vocab, vq, scenes, null)
    with torch.no_grad():
        pred, _ = head_outputs(head, target, tokens, hidden)
        head_logits = target.output(pred)
    cls = target.cfg["cls_token_num"]
    want = logits[:, cls: cls + tokens.size(1) - 1].argmax(-1)
    top3 = head_logits.topk(3, dim=-1).indices
    return {"top1_agreement": round((top3[..., 0] == want).float().mean().item(), 4),
            "top3_agreement": round((top3 == want[..., None]).any(-1).float().mean().item(), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    trainer.setup_torch()
    torch.manual_seed(SEED)
    vq = train_vq.load_trained()
    target = train_ar.load_model(tr.Transformer, os.path.join(trainer.MODELS_DIR, "target"))
    conditioner, vocab = train_ar.load_conditioner()
    for m in (vq, target, conditioner):
        for p in m.parameters():
            p.requires_grad_(False)
    dev = trainer.device()
    for m in (vq, target, conditioner):
        m.to(dev)
    cfg = {k: target.cfg[k] for k in ("dim", "n_head", "multiple_of", "norm_eps")}
    head = eh.EagleHead(cfg).to(dev)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95))
    stream = data.SceneStream(SEED)

    def step_fn(step):
        scenes = stream.scenes(step, args.batch)
        gen = torch.Generator().manual_seed(SEED * 7919 + step)
        null = (torch.rand(args.batch, generator=gen) < 0.1).to(dev)
        with trainer.autocast():
            tokens, hidden, logits = target_features(target, conditioner, vocab, vq, scenes, null)
            pred, want = head_outputs(head, target, tokens, hidden)
        pred, want, logits = pred.float(), want.float(), logits.float()
        cls = target.cfg["cls_token_num"]
        p_target = torch.softmax(logits[:, cls: cls + tokens.size(1) - 1], -1)
        feature_loss = F.smooth_l1_loss(pred, want)
        ce = -(p_target * torch.log_softmax(target.output(pred), -1)).sum(-1).mean()
        loss = feature_loss + 0.1 * ce
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        return {"loss": loss.item(), "feature": feature_loss.item(), "ce": ce.item()}

    seconds = trainer.run_training("eagle", {"head": head}, opt, args.steps, step_fn, SEED,
                                   peak_lr=args.lr, warmup=50)
    for m in (head, vq, target, conditioner):
        m.cpu()
    report = agreement(head, target, conditioner, vocab, vq)
    report["train_minutes"] = round(seconds / 60, 1)
    report["parameters"] = sum(p.numel() for p in head.parameters())
    print(f"[eagle] held-out: {report}", flush=True)
    train_ar.save_model(head, cfg, os.path.join(trainer.MODELS_DIR, "eagle"))
    with open(os.path.join(trainer.WORK_DIR, "eagle", "report.json"), "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
