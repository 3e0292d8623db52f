#!/usr/bin/env python3
"""Writes models/synth/README.md, the model card of the bundled family, from what training and
the benchmarks recorded: models/synth/training.json (train_all.py: times and per-stage
metrics), the parameter counts of the committed safetensors, and the quality results of
bench/synth_quality --json_out (SynthEval of the target and the drafter on held-out prompts).

  /usr/bin/python3 tools/synth/model_card.py [--models models/synth] --quality out/bench/synth/quality.json
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import safetensors_io  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
FAMILY = os.path.join(ROOT, "models", "synth")

ROLES = [
    ("conditioner", "text conditioner: word tokenizer + 2-layer bidirectional encoder, features [24, 128]"),
    ("vq", "VQ tokenizer (LlamaGen VQ architecture), codebook 1024 x 8, L2-normalised"),
    ("target", "target AR model (Tar AR-DTok layout: abs_pe, clip_cond), 16x16 tokens, 64 px"),
    ("drafter", "MuLo-SD low-resolution drafter, 8x8 tokens, 32 px, fine-tuned from the target"),
    ("upsampler", "MuLo-SD U_2: row-causal conv net, pixel shuffle"),
    ("downsampler", "MuLo-SD D_2: row-causal conv net, pixel unshuffle"),
    ("eagle", "EAGLE-style drafter head (fc + 1 decoder layer, target's output head)"),
    ("chain", "small chain draft model for classic speculative decoding, 16x16 tokens"),
]


def parameters(family, component):
    path = os.path.join(family, component, "model.safetensors")
    if not os.path.exists(path):
        return None, None
    tensors = safetensors_io.load(path)
    n = sum(t.numel() for k, t in tensors.items() if k != "codebook" or component in ("vq",))
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    return n, ", ".join(dtypes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quality", help="JSON written by bench/synth_quality --json_out")
    ap.add_argument("--models", default=FAMILY, help="the family directory")
    ap.add_argument("--out", help="default: README.md in --models")
    args = ap.parse_args()
    family = args.models
    args.out = args.out or os.path.join(family, "README.md")
    training = json.load(open(os.path.join(family, "training.json")))
    quality = json.load(open(args.quality)) if args.quality else None
    lines = ["# models/synth: the bundled model family", "",
             "Trained by this project on the procedural domain of `tools/synth` (coloured shapes in a "
             "3x3 grid on solid, gradient or striped backgrounds; captions from a 4-template grammar). "
             "Same architectures, tensor names and file format as the upstream Tar / LlamaGen "
             "checkpoints. Reproduce with `/usr/bin/python3 tools/synth/train_all.py` (seeded, "
             "resumable); the data is generated on the fly, never a held-out caption "
             "(`heldout_prompts.jsonl`, 512 prompts).", "",
             "## Components", "",
             "| component | what | parameters | stored as |", "|---|---|---:|---|"]
    total = 0
    for name, what in ROLES:
        n, dtypes = parameters(family, name)
        if n is not None:
            total += n
        lines.append(f"| `{name}/` | {what} | {n / 1e6:.2f} M | {dtypes} |" if n else
                     f"| `{name}/` | {what} | not trained yet | - |")
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(family) for f in fs
               if f.endswith(".safetensors"))
    lines += ["", f"Total: {total / 1e6:.2f} M parameters, {size / 2**20:.1f} MiB of weights.", "",
              "## Training (real times, 2-core CPU unless noted)", "",
              "| stage | minutes | metrics |", "|---|---:|---|"]
    family_run = training.pop("family", None)
    for stage, report in training.items():
        metrics = ", ".join(f"{k} {v}" for k, v in report.items()
                            if k not in ("train_minutes", "wall_minutes_last_run", "threads"))
        lines.append(f"| {stage} | {report.get('train_minutes', '?')} | {metrics} |")
    minutes = sum(r.get("train_minutes", 0) for r in training.values())
    lines += ["", f"Total training time: {minutes:.0f} min ({minutes / 60:.1f} h) summed over "
              "stages."]
    if family_run:
        lines.append(f"`train_all.py` wall time: {family_run['wall_minutes']:.0f} min "
                     f"({family_run['wall_minutes'] / 60:.1f} h) over "
                     f"{family_run['invocations']} invocation(s), the stages after the target in "
                     f"{family_run['lanes_after_target']} lane(s).")
    lines.append("")
    sweep_path = os.path.join(family, "cfg_sweep.json")
    if os.path.exists(sweep_path):
        sweep = json.load(open(sweep_path))
        lines += ["## Default CFG scale (chosen on validation prompts)", "",
                  f"`tools/synth/choose_cfg.py`: SynthEval pass rate of the target (ar, temperature "
                  f"{sweep['temperature']}) on {sweep['prompts']} validation prompts that never "
                  f"overlap the held-out set; the best scale, **{sweep['chosen']}**, is "
                  "`default_cfg_scale` in `family.json`.", "",
                  "| CFG scale | pass | colour | shape | size | position | background |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sweep["sweep"]:
            lines.append(f"| {r['cfg_scale']} | {r['pass']:.1f}% | {r['colour']:.1f}% | "
                         f"{r['shape']:.1f}% | {r['size']:.1f}% | {r['position']:.1f}% | "
                         f"{r['background']:.1f}% |")
        lines.append("")
    history = os.path.join(HERE, "training_history.md")
    if os.path.exists(history):
        lines += ["## How this family was trained", "", open(history).read().strip(), ""]
    if quality:
        lines += ["## Quality (SynthEval on held-out prompts, ar decoding)", "",
                  f"CFG {quality['cfg_scale']}, temperature {quality['temperature']}.", "",
                  "| model | image | prompts | pass | colour | shape | size | position | background |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for key in ("target", "drafter"):
            q = quality.get(key)
            if q:
                lines.append(f"| {key} | {q['resolution']} px | {q['prompts']} | **{q['pass']:.1f}%** | "
                             f"{q['colour']:.1f}% | {q['shape']:.1f}% | {q['size']:.1f}% | "
                             f"{q['position']:.1f}% | {q['background']:.1f}% |")
        lines += ["", "Samples: `samples.png` (the first 16 held-out prompts, target, ar).", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
