#!/usr/bin/python3
"""Where a benchmark's CPU time goes, by our function and the LibTorch operator it called.

`perf report` cannot attribute LibTorch's time to our frames (Debian's libtorch has no frame
pointers), so record with DWARF unwinding and let this script fold the samples: each sample
is charged to its innermost mulo:: frame and the outermost at::_ops::*::call beneath it
(the operator our code dispatched), e.g. "Block::Attend | matmul".

  taskset -c 1 perf record -F 299 --call-graph=dwarf,16384 -o /tmp/perf.data \\
      bazel-bin/bench/batching_bench --method=ar --concurrency=16 --requests=16 \\
      --rounds=1 --gemms=shared
  perf script -i /tmp/perf.data > /tmp/perf.txt
  tools/perf_ops.py /tmp/perf.txt --within=EngineLoop::Serve

--within keeps only the samples with that frame on the stack (above: the batched decoding,
not the unbatched runs the benchmark times first).
"""
import argparse
import collections
import re
import sys


def frames(sample):
    """The symbol of each frame of one `perf script` sample, innermost first."""
    out = []
    for line in sample.split("\n")[1:]:
        line = line.strip()
        if line:
            out.append(line.split(" ", 1)[1] if " " in line else line)
    return out


def charge(stack):
    """'function | operator' for one sample's stack (innermost first)."""
    ours = next((i for i, f in enumerate(stack) if "mulo::" in f), None)
    if ours is None:
        return "(no mulo frame)"
    frame = stack[ours]
    lambda_of = re.search(r"_Function_handler<.*?mulo::engine::([\w:]+)\(", frame)
    if lambda_of:  # a std::function wrapping a lambda: name the function that made it
        function = lambda_of.group(1) + " (lambda)"
    else:
        function = re.sub(r"\(.*", "", frame.split("+")[0]).replace("mulo::engine::", "")
    ops = [re.sub(r"\+.*", "", f) for f in stack[:ours] if "at::_ops::" in f and "::call" in f]
    operator = ops[-1].replace("at::_ops::", "").replace("::call", "") if ops else "-"
    return f"{function} | {operator}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("script", help="output of `perf script` on a --call-graph=dwarf record")
    parser.add_argument("--within", default="", help="keep samples with this frame on the stack")
    parser.add_argument("--top", type=int, default=25, help="rows to print")
    args = parser.parse_args()
    with open(args.script, errors="replace") as f:
        samples = f.read().split("\n\n")
    counts = collections.Counter()
    for sample in samples:
        stack = frames(sample)
        if not stack or (args.within and not any(args.within in f for f in stack)):
            continue
        counts[charge(stack)] += 1
    total = sum(counts.values())
    if total == 0:
        sys.exit(f"no samples{' within ' + args.within if args.within else ''}")
    print(f"{total} samples\n\n| share | function | operator |\n|---:|---|---|")
    for key, n in counts.most_common(args.top):
        function, _, operator = key.partition(" | ")
        print(f"| {100.0 * n / total:.1f}% | {function} | {operator} |")


if __name__ == "__main__":
    main()
