#!/usr/bin/env python3
"""Projects each decoding method's latency from its forward trace and a cost table.

A request's time is modelled as
    sum over its transformer forwards of cost(model, new tokens, cached image tokens, graph?)
  + host work: o_step * steps (--host=step, the default) or o_draw * draws (--host=draw)
  + the non-transformer phases (up/down-sampling, VQ image decode), as measured
where cost() interpolates an ar_bench cost table (--json_out; several tables of one model
are merged), steps = the non-prefill transformer forwards (each is one host round: copy the
inputs, launch or replay, wait for the value a decision needs, decide), draws = every fed
position whose distribution a method looks at (the sum of new tokens over non-prefill
forwards, plus the first token). o_step / o_draw is calibrated on ar alone (its measured time
minus its forward costs, per step or per draw), so ar is fitted by construction and every
other method is a real check of the model. Per step is the default because the host's work
is per round, not per position: verifying 5 drafted positions is one vectorised acceptance
test, not 5 draws (per draw over-charged speculative by 38% on the H100 with graphs, per step
by 13%; the README's GPU section has the table).

  # validate on the family itself: each method's projected vs measured seconds per image
  tools/gpu/project.py --trace docs/gpu/h100-2026-11-23/trace_cuda_graphs.jsonl.gz \\
      --cost target=docs/gpu/h100-2026-11-23/cost_synth_target.json \\
      --cost target=docs/gpu/h100-2026-11-23/cost_n_synth_target.json ...
  # project to Tar scale: the same trace, target and drafter costed by the LP replica
  tools/gpu/project.py --trace ... --cost target=... (as above) \\
      --project_cost target=cost_tar_lp_512.json --project_cost drafter=cost_tar_lp_512.json \\
      --scale_tokens 1024

With --host=counts (a trace written with methods_bench --count_ops) host work is priced from
what the decode loop asks of the device instead of calibrated per step:
    reads * --read_us + (dispatched operators outside the traced forwards) * --op_us
      + (graph replays that are not traced forwards, e.g. the EAGLE head's) * --replay_us
(a trace written with --emulate_cuda_graphs counts replays and leaves a replay's operators
out, as a GPU dispatches none of them; --replay_us defaults to 0, unpriced)
so a method that reads the host less or dispatches fewer sampling and verification operators
is projected faster, which the per-step model cannot see. Both constants are inputs; the
defaults are a least-squares fit on the H200 (docs/gpu.md: run 4's seconds of six methods
with their operators and reads per step counted on that GPU), and ar is not used to calibrate. The resamplers' work is among the counted operators (their
measured phase times are not added) and the VQ image decode, the same for every method, is
left out, so a CPU trace can be priced for a GPU.

With --scale_tokens N the trace is stretched to N image tokens per image: every forward is
repeated N / n_bundled times at proportionally mapped contexts, i.e. the method keeps the step
compression and tokens per forward it showed on the bundled family (the projection's main
assumption); host work per draw and the non-transformer phases scale with the token count.
Plain Python 3, no packages: runs anywhere.
"""
import argparse
import bisect
import collections
import gzip
import json
import sys


def load_jsonl(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


class CostTable:
    """ms per forward of one model by (cached image tokens, new tokens), eager and graphs."""

    def __init__(self, docs):
        self.cls = docs[0]["cls_token_num"]
        self.image_tokens = docs[0]["image_tokens"]
        self.rows = {}
        for doc in docs:
            if doc["cls_token_num"] != self.cls:
                raise ValueError("cost tables of one model disagree on cls_token_num")
            for row in doc["cost"]:
                self.rows[(row["context"], row["new_tokens"])] = row
        self.contexts = sorted({c for c, _ in self.rows})

    def _at_context(self, context, n, column):
        ns = sorted(k for c, k in self.rows if c == context and column in self.rows[(c, k)])
        if not ns:
            raise KeyError(f"no {column} costs at context {context}")
        if n <= ns[0]:
            return self.rows[(context, ns[0])][column]
        if n >= ns[-1]:  # beyond the table: linear in n from the last two points
            if len(ns) == 1:
                return self.rows[(context, ns[-1])][column]
            a, b = ns[-2], ns[-1]
        else:
            i = bisect.bisect_left(ns, n)
            if ns[i] == n:
                return self.rows[(context, n)][column]
            a, b = ns[i - 1], ns[i]
        ya, yb = self.rows[(context, a)][column], self.rows[(context, b)][column]
        return ya + (yb - ya) * (n - a) / (b - a)

    def ms(self, n, image_context, graph):
        column = "graphs_ms" if graph else "eager_ms"
        # Prefer contexts where this n was measured; else those whose n range covers it
        # (a dense table of small n at few contexts merges with a coarse one).
        use = [c for c in self.contexts if (c, n) in self.rows]
        if not use:
            use = [c for c in self.contexts
                   if min(k for cc, k in self.rows if cc == c) <= n
                   <= max(k for cc, k in self.rows if cc == c)] or self.contexts
        x = min(max(image_context, use[0]), use[-1])
        i = bisect.bisect_left(use, x)
        if use[i] == x:
            return self._at_context(x, n, column)
        a, b = use[i - 1], use[i]
        ya, yb = self._at_context(a, n, column), self._at_context(b, n, column)
        return ya + (yb - ya) * (x - a) / (b - a)


NON_TRANSFORMER_PHASES = ("upsample", "downsample", "image_decode")


def request_counts(line):
    """(host reads, dispatched operators outside the traced forwards, graph replays that are
    not traced forwards) of one request traced with --count_ops."""
    if "host_syncs" not in line or "dispatched_ops" not in line:
        raise KeyError("--host=counts needs a trace written with methods_bench --count_ops "
                       f"(method '{line.get('method')}' has no host_syncs / dispatched_ops)")
    inside = sum(f[5] for f in line["forwards"] if len(f) > 5)
    # A trace with graph replays counted (methods_bench --emulate_cuda_graphs, or a GPU run)
    # also replays graphs it records no transformer forward for: the EAGLE head's.
    traced_replays = sum(1 for f in line["forwards"] if f[4])
    untraced = max(0, line.get("graph_replays", 0) - traced_replays)
    return line["host_syncs"], line["dispatched_ops"] - inside, untraced


def request_terms(line, tables, traced_cls, scale, host="step", graphs="traced"):
    """(forward seconds, host units (steps or draws), non-transformer phase seconds) of one
    traced request.

    traced_cls: condition positions of each traced model (a forward at image context < 0 is
    its prefill); tables: the cost table each model is costed with, possibly of a larger
    model, whose own condition length then prices the prefill."""
    forward_ms = 0.0
    draws = 1
    steps = 0
    for model, batch, n, context, graph, *_ in line["forwards"]:
        if graphs != "traced":  # price as if every forward were (or none were) replayed
            graph = graphs == "all"
        table = tables.get(model)
        if table is None:
            raise KeyError(f"no cost table for model '{model}' (give --cost {model}=...)")
        image_context = context - traced_cls[model]
        if image_context < 0:  # the prefill of the condition positions
            forward_ms += table.ms(table.cls, 0, graph)
            continue
        draws += n
        steps += 1
        # A stretched trace repeats each step at proportionally mapped contexts.
        forward_ms += table.ms(n, image_context * scale, graph) * scale
    phases = sum(line["phases"].get(p, 0.0) for p in NON_TRANSFORMER_PHASES)
    return forward_ms / 1e3, (steps if host == "step" else draws) * scale, phases * scale


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True, help="methods_bench --trace_out file (.gz ok)")
    ap.add_argument("--cost", action="append", default=[], metavar="MODEL=FILE",
                    help="ar_bench --json_out table of a traced model, measured where the trace "
                    "was (repeatable: tables of one model merge); calibrates host work")
    ap.add_argument("--project_cost", action="append", default=[], metavar="MODEL=FILE",
                    help="cost the traced model with this table instead (a full-size replica)")
    ap.add_argument("--scale_tokens", type=int, default=0,
                    help="project to this many image tokens per image (0 = as traced)")
    ap.add_argument("--host", choices=["step", "draw", "counts"], default="step",
                    help="host work per non-prefill forward (step), per fed position (draw), "
                    "or from the trace's host reads and dispatched operators (counts)")
    ap.add_argument("--graphs", choices=["traced", "all", "none"], default="traced",
                    help="which forwards to price as CUDA graph replays: as traced, all (where "
                    "the table has graphs_ms), none")
    ap.add_argument("--read_us", type=float, default=112.0,
                    help="--host=counts: microseconds per host read (a pipeline drain)")
    ap.add_argument("--op_us", type=float, default=1.3,
                    help="--host=counts: microseconds per dispatched operator outside the "
                    "forwards (host dispatch and launch)")
    ap.add_argument("--replay_us", type=float, default=0.0,
                    help="--host=counts: microseconds per graph replay the trace records no "
                    "transformer forward for (the EAGLE head's, in a trace written with "
                    "methods_bench --emulate_cuda_graphs); 0 leaves them unpriced, and the "
                    "table shows how many there were")
    ap.add_argument("--json", help="also write the table as JSON here")
    args = ap.parse_args()
    untraced_replays = {}  # method -> graph replays per image outside the traced forwards

    def read_tables(items, flag):
        docs = collections.defaultdict(list)
        for item in items:
            model, _, path = item.partition("=")
            if not path:
                ap.error(f"{flag}: expected MODEL=FILE, got {item!r}")
            with open(path) as f:
                docs[model].append(json.load(f))
        return {m: CostTable(d) for m, d in docs.items()}

    tables = read_tables(args.cost, "--cost")
    traced_cls = {m: t.cls for m, t in tables.items()}
    projected_tables = dict(tables)
    projected_tables.update(read_tables(args.project_cost, "--project_cost"))
    lines = load_jsonl(args.trace)
    if not lines:
        ap.error(f"--trace: {args.trace} holds no requests")
    traced_tokens = lines[0]["tokens"]
    scale = args.scale_tokens / traced_tokens if args.scale_tokens else 1.0

    by_method = collections.OrderedDict()
    for line in lines:
        by_method.setdefault(line["method"], []).append(line)
    if "ar" not in by_method:
        ap.error("the trace has no ar requests to calibrate host work per draw")

    def mean_terms(method, s, costs):
        rows = [request_terms(line, costs, traced_cls, s, args.host, args.graphs)
                for line in by_method[method]]
        if args.host == "counts":  # host seconds per request, priced directly
            try:
                counts = [request_counts(line) for line in by_method[method]]
            except KeyError as e:
                ap.error(f"--trace: {e.args[0]}")
            # The resamplers' operators are among those counted outside the forwards, so
            # their measured phases (the trace's device, often a CPU) are not added; the VQ
            # image decode, the same for every method, is left out.
            rows = [(f, (reads * args.read_us + ops * args.op_us + replays * args.replay_us)
                     * 1e-6 * s, 0.0)
                    for (f, _, _), (reads, ops, replays) in zip(rows, counts)]
            untraced_replays[method] = sum(c[2] for c in counts) / len(counts)
        k = len(rows)
        return tuple(sum(r[i] for r in rows) / k for i in range(3))

    if args.host == "counts":
        o_unit = 1.0  # host terms are already seconds
    else:
        # Host work per step (or draw), from ar as traced (scale 1): measured minus modelled
        # forwards and phases.
        f_ar, u_ar, p_ar = mean_terms("ar", 1.0, tables)
        measured_ar = sum(line["seconds"] for line in by_method["ar"]) / len(by_method["ar"])
        o_unit = (measured_ar - f_ar - p_ar) / u_ar

    out = []
    for method in by_method:
        forwards, units, phases = mean_terms(method, scale, projected_tables)
        projected = forwards + o_unit * units + phases
        measured = sum(line["seconds"] for line in by_method[method]) / len(by_method[method])
        out.append({"method": method, "requests": len(by_method[method]),
                    "forward_s": forwards, "host_s": o_unit * units, "phases_s": phases,
                    "projected_s": projected, "measured_s": measured})
        if method in untraced_replays:
            out[-1]["untraced_replays"] = untraced_replays[method]
    ar_projected = out[0]["projected_s"] if out[0]["method"] == "ar" else \
        next(r["projected_s"] for r in out if r["method"] == "ar")
    tokens = args.scale_tokens or traced_tokens
    print(f"{len(lines)} traced requests, {traced_tokens} tokens each"
          + (f", stretched to {tokens}" if scale != 1 else "")
          + (f"; host work {args.read_us:g} us per read, {args.op_us:g} us per operator "
             f"outside the forwards, {args.replay_us:g} us per untraced graph replay\n"
             if args.host == "counts"
             else f"; host work per {args.host} (from ar) {o_unit * 1e6:.1f} us\n"))
    header = "| method | forwards s | host s | other phases s | projected s / image | " \
             "projected speedup |"
    rule = "|---|---:|---:|---:|---:|---:|"
    validating = scale == 1 and not args.project_cost and args.host != "counts"
    if args.host == "counts":
        header += " untraced replays / image |"
        rule += "---:|"
    if validating:
        header += " measured s / image | error |"
        rule += "---:|---:|"
    print(header)
    print(rule)
    for r in out:
        r["projected_speedup"] = ar_projected / r["projected_s"]
        line = (f"| {r['method']} | {r['forward_s']:.4f} | {r['host_s']:.4f} | "
                f"{r['phases_s']:.4f} | {r['projected_s']:.4f} | {r['projected_speedup']:.2f}x |")
        if args.host == "counts":
            line += f" {r.get('untraced_replays', 0):.1f} |"
        if validating:
            r["error"] = r["projected_s"] / r["measured_s"] - 1
            line += f" {r['measured_s']:.4f} | {100 * r['error']:+.1f}% |"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"host": args.host, "host_s_per_unit": o_unit, "tokens": tokens,
                       "read_us": args.read_us, "op_us": args.op_us,
                       "replay_us": args.replay_us,
                       "methods": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
