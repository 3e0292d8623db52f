#!/usr/bin/env python3
"""Writes the held-out prompt set models/synth/heldout_prompts.jsonl: scenes and captions the
training data never contains (training skips every held-out caption), each with five
deliberately mismatched captions (one attribute changed) for testing SynthEval.

  /usr/bin/python3 tools/synth/heldout.py [--count 512] [--seed 20261121]
"""
import argparse
import copy
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import domain  # noqa: E402

HELDOUT_SEED = 20261121
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEFAULT_PATH = os.path.join(ROOT, "models", "synth", "heldout_prompts.jsonl")


def mismatches(scene, rng):
    """One caption per attribute, each contradicting the image in that attribute only."""
    out = {}
    bg_colors = scene["background"]["colors"]
    objs = scene["objects"]
    i = rng.randrange(len(objs))

    s = copy.deepcopy(scene)
    choices = [c for c in sorted(domain.OBJECT_COLORS)
               if c not in bg_colors and c != objs[i]["color"]]
    s["objects"][i]["color"] = rng.choice(choices)
    out["color"] = domain.caption(s)

    s = copy.deepcopy(scene)
    s["objects"][i]["shape"] = rng.choice([x for x in domain.SHAPES if x != objs[i]["shape"]])
    out["shape"] = domain.caption(s)

    s = copy.deepcopy(scene)
    s["objects"][i]["size"] = "large" if objs[i]["size"] == "small" else "small"
    s["size_mentioned"][i] = True
    out["size"] = domain.caption(s)

    s = copy.deepcopy(scene)
    used = {o["cell"] for o in objs}
    s["objects"][i]["cell"] = rng.choice([c for c in range(9) if c not in used])
    s["objects"].sort(key=lambda o: o["cell"])  # captions list objects in raster order
    out["position"] = domain.caption(s)

    s = copy.deepcopy(scene)
    obj_colors = {o["color"] for o in objs}
    free = [c for c in sorted(domain.BACKGROUND_COLORS) if c not in obj_colors]
    bg = s["background"]
    if rng.random() < 0.5 or bg["kind"] == "solid":
        j = rng.randrange(len(bg["colors"]))
        bg["colors"][j] = rng.choice([c for c in free if c not in bg["colors"]])
    else:
        bg["kind"] = rng.choice([k for k in domain.BACKGROUND_KINDS if k != bg["kind"]])
        if bg["kind"] == "solid":
            bg["colors"] = bg["colors"][:1]
    out["background"] = domain.caption(s)
    return out


def make(count, seed, exclude=()):
    """count distinct scenes drawn with seed; captions in exclude are skipped (a validation set
    drawn this way never overlaps the held-out set)."""
    rng = random.Random(seed)
    seen = set(exclude)
    entries = []
    while len(entries) < count:
        scene = domain.sample_scene(rng)
        prompt = domain.caption(scene)
        if prompt in seen:
            continue
        seen.add(prompt)
        entries.append({"id": len(entries), "prompt": prompt, "scene": scene,
                        "mismatched": mismatches(scene, rng)})
    return entries


def load_prompts(path=DEFAULT_PATH):
    with open(path) as f:
        return {json.loads(line)["prompt"] for line in f if line.strip()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--seed", type=int, default=HELDOUT_SEED)
    ap.add_argument("--out", default=DEFAULT_PATH)
    args = ap.parse_args()
    entries = make(args.count, args.seed)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        for e in entries:
            f.write(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {len(entries)} held-out prompts to {args.out}")


if __name__ == "__main__":
    main()
