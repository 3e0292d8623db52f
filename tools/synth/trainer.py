"""Shared training loop for the bundled family: seeded, resumable, with progress and loss logs.

Every model trainer hands `run_training` a step function; this module owns the checkpoint
(model + optimizer + RNG states + step, written atomically every `save_every` steps and at the
end), the progress line (step, loss, steps/s, ETA) and the loss log (CSV). Interrupting and
re-running the same command resumes from the last checkpoint and produces the same weights as
an uninterrupted run would (the data stream is a pure function of the step number).
"""
import contextlib
import csv
import json
import math
import os
import random
import sys
import time

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WORK_DIR = os.environ.get("MULO_TRAIN_DIR", os.path.join(REPO, "out", "train"))
MODELS_DIR = os.environ.get("MULO_MODELS_DIR", os.path.join(REPO, "models", "synth"))


def write_json(path, value):
    """Writes atomically: a reader (or a second train_all) never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def configured_threads(environ=os.environ):
    """The torch threads a training process uses: MULO_TRAIN_THREADS, else every core."""
    return int(environ.get("MULO_TRAIN_THREADS", 0)) or os.cpu_count() or 1


def setup_torch(threads=None):
    torch.set_num_threads(threads or configured_threads())
    # Tiny gradients and Adam moments turn denormal late in training, and denormal
    # arithmetic is many times slower on CPUs; flushing them to zero changes nothing visible.
    torch.set_flush_denormal(True)


def device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def bf16_native():
    """Whether this machine computes bf16 matmuls natively: a GPU that supports bf16, or a CPU
    with AVX512-BF16 / AMX and oneDNN. MULO_TRAIN_BF16=0 or 1 overrides the detection."""
    forced = os.environ.get("MULO_TRAIN_BF16")
    if forced is not None:
        return forced == "1"
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return torch.backends.mkldnn.is_available() and ("avx512_bf16" in flags or "amx_bf16" in flags)


def autocast():
    """Mixed precision for forward passes: matmuls and convolutions in bf16 (weights, optimizer
    state and losses stay fp32). On a 2-core AVX512-BF16 CPU a target training step takes
    1.3 s instead of 3.9 s; where bf16 would be emulated it is off."""
    if not bf16_native():
        return contextlib.nullcontext()
    return torch.autocast(device().type, dtype=torch.bfloat16)


def cosine_lr(step, total, peak, warmup, floor=0.1):
    """Linear warm-up to `peak`, then a cosine down to floor x peak at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def wsd_lr(step, total, peak, warmup, decay_fraction=0.2):
    """Warmup, a constant phase, then a linear decay to 0.1 x peak over the last
    decay_fraction of the steps. Before the decay the rate does not depend on `total`, so a
    run in its constant phase can be lengthened, or its end brought forward, without a jump."""
    if step < warmup:
        return peak * (step + 1) / warmup
    decay_start = total - int(decay_fraction * total)
    if step < decay_start:
        return peak
    t = (step - decay_start) / max(1, total - decay_start)
    return peak * (1 - 0.9 * t)


def scheduled_lr(step, total, peak, warmup, schedule):
    """schedule: "cosine", "wsd", or a list of segments [(from_step, kind, total_or_None)],
    the last one whose from_step <= step applies (None = the run's total). Segments record a
    schedule changed during a run, so a from-scratch run reproduces it exactly."""
    if isinstance(schedule, str):
        schedule = [(0, schedule, None)]
    kind, seg_total = "cosine", None
    for from_step, k, t in schedule:
        if step >= from_step:
            kind, seg_total = k, t
    fn = {"cosine": cosine_lr, "wsd": wsd_lr}[kind]
    return fn(step, seg_total or total, peak, warmup)


class Progress:
    def __init__(self, name, total, start):
        self.name, self.total, self.start_step = name, total, start
        self.t0 = time.time()
        self.last = 0.0

    def update(self, step, metrics, force=False):
        now = time.time()
        if not force and now - self.last < 10 and step + 1 < self.total:
            return
        self.last = now
        done = step + 1 - self.start_step
        rate = done / max(1e-9, now - self.t0)
        eta = (self.total - step - 1) / max(rate, 1e-9)
        bar_len = 24
        filled = int(bar_len * (step + 1) / self.total)
        bar = "#" * filled + "." * (bar_len - filled)
        text = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
        print(f"[{self.name}] [{bar}] {step + 1}/{self.total} {text} "
              f"{rate:.2f} steps/s eta {eta / 60:.1f} min", flush=True)


def run_training(name, modules, optimizer, total_steps, step_fn, seed, save_every=100,
                 peak_lr=None, warmup=100, on_save=None, schedule="cosine", main=True):
    """Runs step_fn(step) -> dict of float metrics for steps [resume, total_steps).

    modules: dict name -> nn.Module whose parameters are trained and checkpointed.
    main: False in the other ranks of a data-parallel run (data_parallel.py): they resume
    from the same checkpoint but neither print, log nor save.
    Returns the wall seconds spent in this invocation.
    """
    work = os.path.join(WORK_DIR, name)
    os.makedirs(work, exist_ok=True)
    ckpt_path = os.path.join(work, "checkpoint.pt")
    log_path = os.path.join(work, "loss_log.csv")
    start = 0
    elapsed_before = 0.0
    torch.manual_seed(seed)
    random.seed(seed)
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location="cpu")
        for key, module in modules.items():
            module.load_state_dict(state["modules"][key])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["py_rng"])
        start = state["step"]
        elapsed_before = state.get("elapsed", 0.0)
        if main:
            print(f"[{name}] resuming at step {start}/{total_steps} from {ckpt_path}", flush=True)
    if start >= total_steps:
        if main:
            print(f"[{name}] already trained ({total_steps} steps, {elapsed_before / 60:.1f} min)")
        return elapsed_before

    def save(step, elapsed):
        if not main:
            return
        tmp = ckpt_path + ".tmp"
        torch.save({"modules": {k: m.state_dict() for k, m in modules.items()},
                    "optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                    "py_rng": random.getstate(), "step": step, "elapsed": elapsed}, tmp)
        os.replace(tmp, ckpt_path)
        if on_save:
            on_save()

    progress = Progress(name, total_steps, start)
    new_log = not os.path.exists(log_path) or start == 0
    log = open(log_path if main else os.devnull, "w" if new_log else "a", newline="")
    writer = None
    t0 = time.time()
    for m in modules.values():
        m.train()
    try:
        for step in range(start, total_steps):
            if peak_lr is not None:
                for group in optimizer.param_groups:
                    group["lr"] = scheduled_lr(step, total_steps, peak_lr, warmup, schedule)
            metrics = step_fn(step)
            if writer is None:
                writer = csv.DictWriter(log, fieldnames=["step"] + list(metrics))
                if new_log:
                    writer.writeheader()
            writer.writerow({"step": step, **{k: f"{v:.6f}" for k, v in metrics.items()}})
            if main:
                progress.update(step, metrics)
            if (step + 1) % save_every == 0 and step + 1 < total_steps:
                log.flush()
                save(step + 1, elapsed_before + time.time() - t0)
    except KeyboardInterrupt:
        if main:
            print(f"[{name}] interrupted; re-run the same command to resume", file=sys.stderr)
        raise
    finally:
        log.close()
    elapsed = elapsed_before + time.time() - t0
    save(total_steps, elapsed)
    for m in modules.values():
        m.eval()
    if main:
        print(f"[{name}] done: {total_steps} steps, {elapsed / 60:.1f} min of training", flush=True)
    return elapsed
