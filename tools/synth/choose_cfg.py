#!/usr/bin/env python3
"""Chooses the family's default CFG scale by SynthEval pass rate on validation prompts and
writes it into family.json.

The validation prompts are drawn from the procedural domain with their own seed and never
overlap the held-out set, so the held-out numbers in the model card stay untuned. Each
candidate scale is measured with the C++ engine (bazel-bin/bench/synth_quality) at the
default sampling settings (temperature 1, no top-k):

  bazel build //bench:synth_quality
  /usr/bin/python3 tools/synth/choose_cfg.py [--models models/synth] [--count 64]

The sweep is recorded in <models>/cfg_sweep.json for the model card.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import family_json  # noqa: E402
import heldout  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
VALIDATION_SEED = 7331
CANDIDATES = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0)


def measure(models, prompts, count, scale):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [os.path.join(ROOT, "bazel-bin", "bench", "synth_quality"), f"--models={models}",
               f"--prompts={prompts}", f"--limit={count}", f"--cfg_scale={scale}",
               "--drafter=false", f"--json_out={out.name}"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            return json.load(f)["target"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=os.path.join(ROOT, "models", "synth"))
    ap.add_argument("--count", type=int, default=128, help="validation prompts per candidate "
                    "(64 left the top two scales within one standard error)")
    ap.add_argument("--candidates", default=",".join(str(c) for c in CANDIDATES))
    args = ap.parse_args()
    if not os.path.exists(os.path.join(ROOT, "bazel-bin", "bench", "synth_quality")):
        sys.exit("choose_cfg: build the benchmark first: bazel build //bench:synth_quality")
    entries = heldout.make(args.count, VALIDATION_SEED, exclude=heldout.load_prompts())
    sweep = []
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "validation.jsonl")
        with open(prompts, "w") as f:
            for e in entries:
                f.write(json.dumps(e, sort_keys=True) + "\n")
        for i, scale in enumerate(float(c) for c in args.candidates.split(",")):
            result = measure(args.models, prompts, args.count, scale)
            sweep.append({"cfg_scale": scale, **result})
            print(f"[choose_cfg] {i + 1}/{len(args.candidates.split(','))} cfg {scale}: "
                  f"pass {result['pass']:.1f}%", flush=True)
    # Ties go to the smaller scale: it needs no more compute but keeps more of the sampling
    # distribution.
    best = max(sweep, key=lambda r: (r["pass"], -r["cfg_scale"]))
    family_path = family_json.path(args.models)
    family = family_json.load(args.models)
    family["default_cfg_scale"] = best["cfg_scale"]
    family_json.save(args.models, family)
    with open(os.path.join(args.models, "cfg_sweep.json"), "w") as f:
        json.dump({"validation_seed": VALIDATION_SEED, "prompts": args.count, "temperature": 1.0,
                   "chosen": best["cfg_scale"], "sweep": sweep}, f, indent=1)
        f.write("\n")
    print(f"[choose_cfg] default_cfg_scale = {best['cfg_scale']} (pass {best['pass']:.1f}% on "
          f"{args.count} validation prompts) written to {family_path}")


if __name__ == "__main__":
    main()
