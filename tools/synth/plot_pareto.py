#!/usr/bin/python3
"""Speed against quality for every row of methods_bench tables: wall-clock speedup vs ar on x,
SynthEval on y with its paired standard error, the Pareto front (no other row both faster and
better) joined by a line; writes a PNG.

  /usr/bin/python3 tools/synth/plot_pareto.py out/bench_tree_t1/methods.csv docs/tree_pareto.png
  /usr/bin/python3 tools/synth/plot_pareto.py --title="training-free and MuLo-SD x ZipAR" \
      out/bench_parallel_t1/methods.csv docs/parallel_pareto.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def pareto(points):
    """Indices of the rows no other row beats on both speedup and score."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any(x2 >= x and y2 >= y and (x2, y2) != (x, y) for x2, y2 in points):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def main():
    title = "tree methods"
    args = sys.argv[1:]
    if args and args[0].startswith("--title="):
        title = args.pop(0)[len("--title="):]
    if len(args) < 2:
        sys.exit(__doc__)
    rows = []
    for path in args[:-1]:
        rows += list(csv.DictReader(open(path)))
    points = [(float(r["speedup"]), float(r["syntheval"])) for r in rows]
    errors = [float(r["syntheval_delta_se"]) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=errors, fmt="o",
                markersize=4, capsize=2)
    for r, (x, y) in zip(rows, points):
        ax.annotate(r["method"], (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    front = pareto(points)
    ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "-", alpha=0.5,
            label="Pareto front")
    ax.set_xlabel("speedup vs ar (wall clock, same run)")
    ax.set_ylabel("SynthEval (%)")
    ax.set_title(f"{title} on the bundled family (CPU)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args[-1], dpi=120)
    print(f"plot_pareto: {len(rows)} rows, front: " + ", ".join(rows[i]["method"] for i in front))


if __name__ == "__main__":
    main()
