#!/usr/bin/env python3
"""Trains the AR models of models/synth (Tar AR-DTok layout: abs_pe, clip_cond):

  --role target   16x16 tokens of 64 px scenes, trained jointly with the text conditioner
  --role drafter  MuLo-SD's low-resolution drafter: 8x8 tokens of the same scenes at 32 px,
                  conditioned through the frozen shared conditioner (as Tar's drafter)
  --role chain    the small chain draft model for classic speculative decoding: 16x16
                  tokens, far fewer parameters, frozen shared conditioner

Every role drops the condition for 10% of samples (null condition = zero features) so
classifier-free guidance works. Exports models/synth/<role>/{config.json, model.safetensors}
(fp16) and, for the target, models/synth/conditioner/.

On a CPU a role trains in one one-thread process per core (data_parallel.py): same global
batch, same samples, same averaged gradient as one process; on the 2-core machine the target
trains at 0.73 steps/s this way against 0.58 in one two-thread process (1.26x).

  /usr/bin/python3 tools/synth/train_ar.py --role target [--steps N] [--ranks N]
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
import data_parallel  # noqa: E402
import domain  # noqa: E402
import safetensors_io  # noqa: E402
import text_encoder as te  # noqa: E402
import trainer  # noqa: E402
import train_vq  # noqa: E402
import transformer as tr  # noqa: E402

COND_TOKENS = 24
CONDITIONER = dict(vocab_size=len(domain.vocabulary()), dim=128, n_layer=2, n_head=4,
                   max_tokens=COND_TOKENS, multiple_of=64, norm_eps=1e-5)

ROLES = {
    # Warmup-stable-decay: the end can be brought forward (or pushed back) while the run is in
    # its constant phase, so the run length can follow SynthEval snapshots (tools/synth/snapshot.py).
    "target": dict(model=dict(dim=192, n_layer=6, n_head=6, grid_size=16), image_size=64,
                   steps=5600, batch=32, lr=1e-3, seed=21, schedule="wsd"),
    # As in MuLo-SD (supplementary §7: the drafter "shares the same architecture as the target
    # model"; upstream models are "finetuned for each scale"), the drafter is the target's
    # architecture fine-tuned from the trained target at half resolution.
    "drafter": dict(model=dict(dim=192, n_layer=6, n_head=6, grid_size=8), image_size=32,
                    steps=4500, batch=32, lr=5e-4, seed=22, init_from="target"),
    "chain": dict(model=dict(dim=96, n_layer=2, n_head=3, grid_size=16), image_size=64,
                  steps=1000, batch=32, lr=1e-3, seed=23),
}


def model_config(role):
    cfg = dict(ROLES[role]["model"])
    cfg.update(vocab_size=1024, cls_token_num=COND_TOKENS, position_mode="abs_pe",
               condition_mode="clip_cond", cond_dim=CONDITIONER["dim"], multiple_of=64,
               norm_eps=1e-5)
    return cfg


def caption_ids(scenes, vocab):
    return torch.tensor([te.encode_ids(domain.caption(s), vocab, COND_TOKENS) for s in scenes])


def save_model(module, cfg, out_dir, dtype=torch.float16, extra=None):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in module.state_dict().items()}
    safetensors_io.save(state, os.path.join(out_dir, "model.safetensors"))
    for name, content in (extra or {}).items():
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(content, f, indent=1)
            f.write("\n")


def load_model(cls, directory):
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    module = cls(cfg)
    state = safetensors_io.load(os.path.join(directory, "model.safetensors"))
    module.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()},
                           strict=False)
    return module.eval()


def load_conditioner():
    d = os.path.join(trainer.MODELS_DIR, "conditioner")
    with open(os.path.join(d, "vocab.json")) as f:
        vocab = json.load(f)
    return load_model(te.TextEncoder, d), vocab


def init_abs_pe_2d(model, cfg):
    """Initialises the learned absolute position table with 2D sin/cos codes.

    The table keeps the upstream layout and stays a trained parameter; only its starting point
    changes. With the default N(0, 0.02) start, position signals are ~50x weaker than token
    embeddings (N(0, 1)): a first target run still placed objects nowhere after 1200 steps
    (SynthEval position 0%, learned table std 0.19 against 0.98 for tokens). Slot i >= cls - 1
    predicts grid position p = i - (cls - 1), so it gets the code of p's (row, column): half
    of the channels for the row, half for the column, at geometric frequencies.
    """
    grid, cls, dim = cfg["grid_size"], cfg["cls_token_num"], cfg["dim"]
    half = dim // 2
    omega = 1.0 / (10000 ** (torch.arange(half // 2, dtype=torch.float32) / (half // 2)))
    p = torch.arange(grid * grid - 1)
    def code(coord):
        angles = coord[:, None].float() * omega[None]
        return torch.cat([angles.sin(), angles.cos()], dim=1)
    table = torch.cat([code(p // grid), code(p % grid)], dim=1)  # [grid^2 - 1, dim]
    with torch.no_grad():
        model.abs_pe[0, cls - 1:cls - 1 + table.size(0)] = table


def init_from_model(model, cfg, source_dir):
    """Starts `model` from a trained AR model of the same architecture on a grid twice as fine
    (the drafter from the target). Every weight is copied except the position table of the
    image tokens: the slot that predicts drafter position (r, c) starts from the mean of the
    slots that predict target positions (2r..2r+1, 2c..2c+1), the same patch of the image."""
    with open(os.path.join(source_dir, "config.json")) as f:
        src_cfg = json.load(f)
    for key in ("dim", "n_layer", "n_head", "vocab_size", "cls_token_num", "cond_dim"):
        if src_cfg[key] != cfg[key]:
            sys.exit(f"train_ar: cannot start from {source_dir}: {key} is {src_cfg[key]}, "
                     f"this model has {cfg[key]}")
    if src_cfg["grid_size"] != 2 * cfg["grid_size"]:
        sys.exit(f"train_ar: {source_dir} has grid {src_cfg['grid_size']}, expected "
                 f"{2 * cfg['grid_size']}")
    state = safetensors_io.load(os.path.join(source_dir, "model.safetensors"))
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    src_pe = state.pop("abs_pe")
    cls, grid, src_grid = cfg["cls_token_num"], cfg["grid_size"], src_cfg["grid_size"]
    pe = model.abs_pe.detach().clone()
    pe[:, :cls - 1] = src_pe[:, :cls - 1]
    for p in range(min(grid * grid, pe.size(1) - (cls - 1))):
        r, c = divmod(p, grid)
        slots = [cls - 1 + (2 * r + dr) * src_grid + 2 * c + dc for dr in (0, 1) for dc in (0, 1)]
        pe[:, cls - 1 + p] = src_pe[:, slots].mean(dim=1)
    state["abs_pe"] = pe
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if "freqs_cis" not in k]:
        sys.exit(f"train_ar: {source_dir} does not match: missing {missing}, unexpected {unexpected}")


def train(rank, world, args):
    """Trains args.role as rank `rank` of `world` data-parallel processes (data_parallel.py);
    rank 0 logs, checkpoints and exports."""
    spec = ROLES[args.role]
    steps = args.steps or spec["steps"]
    batch = args.batch or spec["batch"]
    trainer.setup_torch(1 if world > 1 else None)
    torch.manual_seed(spec["seed"])
    cfg = model_config(args.role)
    dev = trainer.device()
    model = tr.Transformer(cfg)
    init_abs_pe_2d(model, cfg)
    if spec.get("init_from"):
        init_from_model(model, cfg, os.path.join(trainer.MODELS_DIR, spec["init_from"]))
    model.to(dev)
    vq = train_vq.load_trained().to(dev)
    for p in vq.parameters():
        p.requires_grad_(False)
    modules = {"model": model}
    if args.role == "target":
        vocab = domain.vocabulary()
        conditioner = te.TextEncoder(CONDITIONER).to(dev)
        modules["conditioner"] = conditioner
        params = list(model.parameters()) + list(conditioner.parameters())
    else:
        conditioner, vocab = load_conditioner()
        conditioner.to(dev)
        for p in conditioner.parameters():
            p.requires_grad_(False)
        params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=spec["lr"], betas=(0.9, 0.95), weight_decay=0.01)
    stream = data.SceneStream(spec["seed"])
    cls = cfg["cls_token_num"]
    forward_model = data_parallel.wrap(model, world)
    forward_conditioner = (data_parallel.wrap(conditioner, world) if args.role == "target"
                           else conditioner)

    def step_fn(step):
        scenes = data_parallel.shard(stream.scenes(step, batch), rank, world)
        gen = torch.Generator().manual_seed(spec["seed"] * 7919 + step)
        with torch.no_grad():
            tokens = train_vq.encode_ids(vq, data.render_batch(scenes, spec["image_size"], dev))
        ids = caption_ids(scenes, vocab).to(dev)
        with trainer.autocast():
            if args.role == "target":
                features = forward_conditioner(ids)
            else:
                with torch.no_grad():
                    features = conditioner(ids)
            # Drawn for the whole batch, then sharded: the same samples lose their condition
            # whatever the number of ranks.
            null = data_parallel.shard(torch.rand(batch, generator=gen) < 0.1, rank, world).to(dev)
            logits = forward_model(features, null, tokens[:, :-1])[:, cls - 1:].float()
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        acc = (logits.argmax(-1) == tokens).float().mean().item()
        return data_parallel.mean_metrics({"loss": loss.item(), "acc": acc}, world)

    seconds = trainer.run_training(args.role, modules, opt, steps, step_fn, spec["seed"],
                                   peak_lr=spec["lr"], warmup=100,
                                   schedule=spec.get("schedule", "cosine"), main=rank == 0)
    if rank != 0:
        return
    model.cpu()
    conditioner.cpu()
    save_model(model, cfg, os.path.join(trainer.MODELS_DIR, args.role))
    if args.role == "target":
        save_model(conditioner, CONDITIONER, os.path.join(trainer.MODELS_DIR, "conditioner"),
                   dtype=torch.float32, extra={"vocab.json": vocab})
    n = sum(p.numel() for p in model.parameters())
    with open(os.path.join(trainer.WORK_DIR, args.role, "report.json"), "w") as f:
        json.dump({"parameters": n, "train_minutes": round(seconds / 60, 1), "steps": steps,
                   "batch": batch, "ranks": world}, f, indent=2)
    print(f"[{args.role}] exported: {n / 1e6:.2f}M parameters, {seconds / 60:.1f} min")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=sorted(ROLES), required=True)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--ranks", type=int,
                    help="data-parallel processes of one thread each (default: MULO_TRAIN_RANKS, "
                         "else one per training thread on a CPU, one on a GPU)")
    args = ap.parse_args()
    world = args.ranks or data_parallel.configured_ranks(trainer.configured_threads())
    batch = args.batch or ROLES[args.role]["batch"]
    if world < 1:
        ap.error(f"--ranks must be >= 1, got {world}")
    if batch % world:
        ap.error(f"--batch {batch} must split evenly over --ranks {world}")
    if world > 1:
        print(f"[{args.role}] data parallel: {world} processes x 1 thread, "
              f"{batch // world} of the {batch} samples each", flush=True)
    data_parallel.run(train, world, args)


if __name__ == "__main__":
    main()
