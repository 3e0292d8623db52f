#!/usr/bin/env python3
"""Fits what a GPU decode step costs besides its forwards: microseconds per dispatched operator
and per host read, for tools/gpu/project.py --host=counts.

Model, per image: seconds - image decode = a * graph forwards + o * operators + r * reads,
solved by least squares over the methods of one GPU run. The seconds and the replayed forwards
come from a methods_bench --trace_out trace (graphs on), the decode steps and reads from that
run's table, the operators per step from a --count_ops run of the same code on the same
device (counting slows the run, so its seconds are not used). Prints the fit and each method's
error. Plain Python 3, no packages.

  tools/gpu/fit_host_costs.py --trace docs/gpu/h200-2026-11-26/run4/trace_methods_cuda_graphs.jsonl.gz \\
      --table docs/gpu/h200-2026-11-26/run4/methods_cuda_graphs.md \\
      --ops_table docs/gpu/h200-2026-11-26/run3/methods_cuda_ops.md
"""
import argparse
import collections
import gzip
import json
import sys


def host_table(path):
    """method -> (decode steps / image, host syncs / image, dispatched ops / step or None),
    from methods_bench's host-syncs table, its columns found by name (tables before and after
    the "graph replays / step" column was added)."""
    out = {}
    with open(path) as f:
        rows = [line for line in f if line.startswith("| ")]
    columns = None
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "method":
            columns = {name: i for i, name in enumerate(cells)} \
                if "host syncs / image" in cells else None
            continue
        if columns is None or len(cells) != len(columns):
            continue
        try:
            ops_cell = cells[columns["dispatched ops / step"]]
            ops = float(ops_cell) if ops_cell != "-" else None
            out[cells[0]] = (float(cells[columns["decode steps / image"]]),
                             float(cells[columns["host syncs / image"]]), ops)
        except (KeyError, ValueError):
            continue
    return out


def solve(rows):
    """Least squares for x in A x = b, A with 3 columns (normal equations, Gauss)."""
    n = 3
    m = [[sum(a[i] * a[j] for a, _ in rows) for j in range(n)] +
         [sum(a[i] * b for a, b in rows)] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--table", required=True, help="the traced run's methods .md")
    ap.add_argument("--ops_table", required=True, help="a --count_ops run's methods .md")
    args = ap.parse_args()
    opener = gzip.open if args.trace.endswith(".gz") else open
    with opener(args.trace, "rt") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    by_method = collections.defaultdict(list)
    for line in lines:
        by_method[line["method"]].append(line)
    steps_reads, ops = host_table(args.table), host_table(args.ops_table)
    rows, names = [], []
    for method, requests in by_method.items():
        if method not in steps_reads or method not in ops or ops[method][2] is None:
            print(f"skipped {method}: not in both tables", file=sys.stderr)
            continue
        k = len(requests)
        seconds = sum(r["seconds"] - r["phases"].get("image_decode", 0.0) for r in requests) / k
        graphs = sum(sum(1 for f in r["forwards"] if f[4] and f[3] > 0) for r in requests) / k
        steps, reads, _ = steps_reads[method]
        rows.append(([graphs, steps * ops[method][2], reads], seconds))
        names.append(method)
    if len(rows) < 3:
        ap.error("need at least 3 methods in both tables")
    a, o, r = solve(rows)
    print(f"graph forward {a * 1e6:.1f} us, operator {o * 1e6:.2f} us, read {r * 1e6:.1f} us "
          f"({len(rows)} methods)\n")
    print("| method | fitted s | measured s | error |\n|---|---:|---:|---:|")
    for name, (x, b) in zip(names, rows):
        fit = a * x[0] + o * x[1] + r * x[2]
        print(f"| {name} | {fit:.4f} | {b:.4f} | {100 * (fit / b - 1):+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
