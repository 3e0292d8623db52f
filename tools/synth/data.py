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


def render_with_object_masks(scenes, size, device="cpu"):
    """render_batch's images, and [B, 1, S, S] float masks that are 1 where a pixel shows an
    object: where the scene's render differs from the render of its background alone (object
    colours never equal a background's)."""
    images, masks = [], []
    for s in scenes:
        image = domain.render_array(s, size)
        images.append(image)
        masks.append((image != domain.render_array(dict(s, objects=[]), size)).any(-1))
    masks = torch.from_numpy(np.stack(masks)).float().unsqueeze(1)
    return to_tensor(images).to(device), masks.to(device)
