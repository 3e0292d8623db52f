"""Data-parallel training on one machine: `world` processes of one thread each, every one
taking a share of each step's batch, gradients averaged over gloo before the optimizer step.

Why: on the 2-core CPU one process with two threads leaves a core idle whenever it is in
Python (scene rendering, caption encoding, small ops), and a 192-wide transformer's matmuls
scale poorly to two threads. Two one-thread processes with half the batch each ran the
target's step at 0.860 steps/s against 0.624 for one two-thread process (global batch 32,
gloo, measured in session 8's probe). A GPU trains in one process.

Equivalence: rank r takes items r, r + world, r + 2 world, ... of the step's batch (scenes
and the per-sample condition-dropout draws alike), so the union over ranks is exactly the
one-process batch; each rank's loss is the mean over its equal share, and DDP averages the
gradients, so every rank applies the one-process gradient up to summation order.
"""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def configured_ranks(threads, environ=os.environ):
    """MULO_TRAIN_RANKS, else one rank per thread on a CPU and a single process on a GPU."""
    forced = int(environ.get("MULO_TRAIN_RANKS", 0))
    if forced:
        return forced
    return 1 if torch.cuda.is_available() else max(1, threads)


def shard(items, rank, world):
    """This rank's share of a batch (a list or a tensor's first dimension)."""
    return items[rank::world]


def wrap(module, world):
    """The module the step calls forward on: DDP (gradients averaged in backward) when there
    is more than one rank. Checkpoints and exports keep using the bare module, so tensor names
    carry no "module." prefix."""
    if world == 1:
        return module
    return torch.nn.parallel.DistributedDataParallel(module)


def mean_metrics(metrics, world):
    """Averages float metrics over the ranks, so the log shows the whole batch's loss."""
    if world == 1:
        return metrics
    keys = list(metrics)
    values = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(values)
    return {k: v / world for k, v in zip(keys, values.tolist())}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, fn, args):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run(fn, world, *args):
    """Calls fn(rank, world, *args) in `world` processes (in this one when world is 1). If a
    rank fails the others are stopped and the failure is raised here."""
    if world == 1:
        return fn(0, 1, *args)
    mp.spawn(_worker, args=(world, _free_port(), fn, args), nprocs=world, join=True)
    return None
