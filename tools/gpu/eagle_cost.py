#!/usr/bin/env python3
"""Seconds per EAGLE-head training step for a converted family on this machine's device:
tools/convert/train_eagle_head.py's step (the frozen target's forward over --batch whole token
sequences, the head's forward and backward, the readouts) on random token sequences, i.e. its
cost apart from tokenising images once. Prints one JSON line.

  python3 tools/gpu/eagle_cost.py --family /tmp/replicas/repository/janus-pro-1b [--batch 4]
"""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "convert"))
import train_eagle_head as teh  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    device = torch.device(a.device)
    start = time.time()
    teacher, _, _ = teh.load_teacher(a.family)
    teacher.model.to(device)
    load_s = time.time() - start
    _, head = teh.new_head(teacher, 0, device)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(0)
    n = teacher.grid * teacher.grid

    def step():
        batch = torch.randint(teacher.codes, (a.batch, n), generator=gen).to(device)
        teh.train_step(head, teacher, batch, opt)

    for _ in range(2):  # warm-up
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(a.steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.time() - t0) / a.steps
    print(json.dumps(dict(
        family=os.path.basename(os.path.normpath(a.family)), device=str(device),
        batch=a.batch, tokens_per_sequence=n, seconds_per_step=round(seconds, 4),
        images_per_second=round(a.batch / seconds, 2), load_seconds=round(load_s, 1),
        head_parameters=sum(p.numel() for p in head.parameters()),
        target_parameters=sum(p.numel() for p in teacher.model.parameters()),
        peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if device.type == "cuda" else None)), flush=True)


if __name__ == "__main__":
    main()
