#!/usr/bin/env python3
"""Writes tests/data/synth_render/: a few scenes (scenes.json) and their renders at 64 and 32
pixels (renders.safetensors, uint8 [n, S, S, 3]) so the C++ renderer port can be checked
pixel for pixel against this Python definition of the domain.

  /usr/bin/python3 tools/synth/render_fixtures.py
"""
import json
import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import domain  # noqa: E402
import safetensors_io  # noqa: E402


def main():
    out = os.path.join(HERE, "..", "..", "tests", "data", "synth_render")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(7)
    scenes = []
    # Every background kind, shape and size appears at least once.
    while len(scenes) < 12:
        scenes.append(domain.sample_scene(rng))
    renders = {}
    for size in (64, 32):
        arr = np.stack([domain.render_array(s, size) for s in scenes])
        renders[f"s{size}"] = torch.from_numpy(arr)
    with open(os.path.join(out, "scenes.json"), "w") as f:
        json.dump([{"prompt": domain.caption(s), "scene": s} for s in scenes], f, indent=1,
                  sort_keys=True)
        f.write("\n")
    safetensors_io.save(renders, os.path.join(out, "renders.safetensors"))
    print(f"wrote {len(scenes)} scenes to {out}")


if __name__ == "__main__":
    main()
