#!/usr/bin/python3
"""Where a Bazel build's time went, from its --profile (a Chrome trace, gzipped or not).

  bazel build --profile=/tmp/build.profile.gz //server:mulo_server //client:mulo_client
  tools/build_profile.py /tmp/build.profile.gz --top=10

Prints the build's wall time, the summed time of its actions (what the cores spent), the
action count, and the most expensive actions by their own duration, so a change to the
build (issue 62: the LibTorch headers each file compiles) is measured action by action.
"""
import argparse
import collections
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def actions(events):
    """(seconds, description) of every action that ran: Bazel 4 files each under "action
    processing" (its "complete action execution" events are bookkeeping of a few ms)."""
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "action processing":
            continue
        out.append((e.get("dur", 0) / 1e6, e.get("name", "?")))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    events = load(args.profile)
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    if not spans:
        sys.exit(f"{args.profile}: no timed events")
    start = min(e["ts"] for e in spans)
    end = max(e["ts"] + e["dur"] for e in spans)
    done = actions(events)
    kinds = collections.Counter(name.split(" ", 1)[0] for _, name in done)
    total = sum(s for s, _ in done)
    critical = sum(e["dur"] for e in spans if e.get("cat") == "critical path component") / 1e6
    print(f"wall {(end - start) / 1e6:.0f} s; {len(done)} actions, {total:.0f} s of action time; "
          f"critical path {critical:.1f} s")
    print("by kind: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common(6)))
    print()
    print("| seconds | action |")
    print("|---:|---|")
    for seconds, name in sorted(done, reverse=True)[:args.top]:
        print(f"| {seconds:.1f} | {name} |")


if __name__ == "__main__":
    main()
