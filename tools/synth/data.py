"""Training data of the bundled family: scenes sampled per step from a seed (never a
held-out caption), rendered at the target (64 px) and drafter (32 px) resolutions."""
import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import domain  # noqa: E402
import heldout  # noqa: E402

TARGET_SIZE = 64
DRAFTER_SIZE = 32


class SceneStream:
    """Deterministic stream of training scenes: batch(step, n) depends only on (seed, step)."""

    def __init__(self, seed):
        self.seed = seed
        self.heldout = heldout.load_prompts()

    def scenes(self, step, n):
        rng = random.Random(self.seed * 1_000_003 + step)
        out = []
        while len(out) < n:
            scene = domain.sample_scene(rng)
            if domain.caption(scene) not in self.heldout:
                out.append(scene)
        return out


def to_tensor(images):
    """uint8 [B, S, S, 3] numpy -> float [B, 3, S, S] in [-1, 1]."""
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float()
    return x / 127.5 - 1.0


def render_batch(scenes, size, device="cpu"):
    return to_tensor([domain.render_array(s, size) for s in scenes]).to(device)


def object_masks(scenes, size, device="cpu"):
    """[B, 1, S, S] float, 1 where a pixel shows an object: where the scene's render differs
    from the render of its background alone (object colours never equal a background's)."""
    masks = []
    for s in scenes:
        bare = dict(s, objects=[])
        masks.append((domain.render_array(s, size) != domain.render_array(bare, size)).any(-1))
    return torch.from_numpy(np.stack(masks)).float().unsqueeze(1).to(device)
