#!/usr/bin/env python3
"""Measures every method a family can run, each at the family's defaults, on validation prompts
(drawn from the procedural domain with their own seed, never the held-out set), and writes the
table that `method: auto` chooses from into family.json:
method_defaults.auto.calibration.<device> = {"methods": {name: {speedup, syntheval_delta,
syntheval_delta_se}}, ...}. Only that device's entry is replaced.

    bazel build //bench:methods_bench
    tools/synth/calibrate_auto.py --models=models/synth --device=cpu [--count=64]

The speedups are wall clock against ar interleaved per prompt on the machine that runs it: run
it on the device the table is for (on a GPU machine with --device=cuda). Which methods are
lossless is the engine's to say (each method's spec), never this table's."""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import family_json  # noqa: E402
import heldout  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VALIDATION_SEED = 7331  # the validation draw calibrate_mulo.py and choose_cfg.py use


def method_rows(table):
    """The family-default row of each method in methods_bench's CSV: the first main row whose
    label starts with the method's name (later main rows are the spec's bench variants)."""
    rows = {}
    for r in table:
        if r["group"] != "main":
            continue
        name = r["method"].split(" ")[0]
        rows.setdefault(name, r)
    return rows


def calibration_entry(table, count, temperature):
    methods = {}
    for name, r in method_rows(table).items():
        methods[name] = {"speedup": round(float(r["speedup"]), 4),
                         "syntheval_delta": round(float(r["syntheval_delta"]), 2),
                         "syntheval_delta_se": round(float(r["syntheval_delta_se"]), 2)}
    return {"validation_prompts": count, "validation_seed": VALIDATION_SEED,
            "temperature": temperature, "date": datetime.date.today().isoformat(),
            "methods": methods}


def write_entry(models, device, entry):
    family = family_json.load(models)
    auto = family.setdefault("method_defaults", {}).setdefault("auto", {})
    calibration = auto.setdefault("calibration", {})
    calibration["tool"] = "tools/synth/calibrate_auto.py"
    calibration[device] = entry
    family_json.save(models, family)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=os.path.join(ROOT, "models", "synth"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--count", type=int, default=64,
                    help="validation prompts (64: a paired standard error near 6 points)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--bench", default=os.path.join(ROOT, "bazel-bin", "bench", "methods_bench"))
    ap.add_argument("--out_dir", default=os.path.join(ROOT, "out", "calibrate_auto"))
    args = ap.parse_args()
    if not os.path.exists(args.bench):
        sys.exit("calibrate_auto: build the benchmark first: bazel build //bench:methods_bench")
    os.makedirs(args.out_dir, exist_ok=True)
    entries = heldout.make(args.count, VALIDATION_SEED, exclude=heldout.load_prompts())
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "validation.jsonl")
        with open(prompts, "w") as f:
            for e in entries:
                f.write(json.dumps(e) + "\n")
        cmd = [args.bench, f"--models={os.path.abspath(args.models)}", f"--prompts={prompts}",
               f"--limit={args.count}", "--methods=available", f"--device={args.device}",
               f"--temperature={args.temperature}", f"--out_dir={args.out_dir}"]
        print(f"calibrate_auto: every available method + ar on {args.count} validation prompts "
              f"({args.device})", flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(args.out_dir, "methods.csv")) as f:
        table = list(csv.DictReader(f))
    entry = calibration_entry(table, args.count, args.temperature)
    write_entry(args.models, args.device, entry)
    for name, m in sorted(entry["methods"].items(), key=lambda x: -x[1]["speedup"]):
        print(f"  {name:12s} {m['speedup']:.2f}x  SynthEval {m['syntheval_delta']:+.1f} +- "
              f"{m['syntheval_delta_se']:.1f}")
    print(f"calibrate_auto: wrote method_defaults.auto.calibration.{args.device} of "
          f"{family_json.path(args.models)}")


if __name__ == "__main__":
    main()
