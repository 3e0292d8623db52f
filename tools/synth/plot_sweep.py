#!/usr/bin/env python3
"""Plots MuLo-SD's ablation sweep (bench/methods_bench --sweep): wall-clock speedup vs ar
against the SynthEval score, one series per sweep axis; writes a PNG.

  /usr/bin/python3 tools/synth/plot_sweep.py out/bench/methods.csv out/bench/sweep.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    fig, ax = plt.subplots(figsize=(7, 5))
    groups = {}
    for r in rows:
        key = r["group"] if r["group"] != "tau x rejection" else f"tau ({r['rejection']})"
        groups.setdefault(key, []).append(r)
    for key, items in groups.items():
        xs = [float(r["speedup"]) for r in items]
        ys = [float(r["syntheval"]) for r in items]
        ax.plot(xs, ys, "o-" if key.startswith("tau") else "s", label=key)
        for r, x, y in zip(items, xs, ys):
            ax.annotate(r["method"].replace("mulo ", ""), (x, y), fontsize=6,
                        textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("wall-clock speedup vs ar")
    ax.set_ylabel("SynthEval pass rate (%)")
    ax.set_title("MuLo-SD on models/synth: speed vs quality")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
