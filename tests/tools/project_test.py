"""tools/gpu/project.py on a trace and cost table small enough to price by hand."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "gpu", "project.py")
FIT = os.path.join(ROOT, "tools", "gpu", "fit_host_costs.py")

# One model, cls 1, 4 image tokens: a forward of 1 new token costs 2 ms, of 4 costs 5 ms.
TABLE = {"cls_token_num": 1, "image_tokens": 4,
         "cost": [{"context": c, "new_tokens": n, "eager_ms": ms}
                  for c in (0, 4) for n, ms in ((1, 2.0), (4, 5.0))]}
# ar: the prefill (condition position), 3 one-token steps, 1 ms of image decode, and 0.5 ms
# of host work per step: 2 + 6 + 1 + 1.5 = 10.5 ms. "x": the prefill and one 4-token step.
AR = {"method": "ar", "tokens": 4, "seconds": 0.0105, "phases": {"image_decode": 0.001},
      "forwards": [["target", 2, 1, 0, False]] + [["target", 2, 1, c, False] for c in (1, 2, 3)]}
X = {"method": "x", "tokens": 4, "seconds": 0.009, "phases": {"image_decode": 0.001},
     "forwards": [["target", 2, 1, 0, False], ["target", 2, 4, 1, False]]}


def project(tmp, host, trace=(AR, X), extra=()):
    table, trace_path, out = (os.path.join(tmp, f) for f in ("t.json", "trace.jsonl", "o.json"))
    with open(table, "w") as f:
        json.dump(TABLE, f)
    with open(trace_path, "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in trace)
    subprocess.run([sys.executable, TOOL, "--trace", trace_path, "--cost", f"target={table}",
                    "--host", host, "--json", out, *extra], check=True, capture_output=True)
    with open(out) as f:
        doc = json.load(f)
    return {m["method"]: m for m in doc["methods"]}, doc


class ProjectTest(unittest.TestCase):
    def test_host_work_per_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            methods, doc = project(tmp, "step")
        self.assertAlmostEqual(doc["host_s_per_unit"], 0.0005)  # (10.5 - 2 - 6 - 1) / 3 steps
        self.assertAlmostEqual(methods["ar"]["projected_s"], 0.0105)
        # x: prefill 2 + one 4-token step 5 + one step of host work 0.5 + decode 1 = 8.5 ms.
        self.assertAlmostEqual(methods["x"]["forward_s"], 0.007)
        self.assertAlmostEqual(methods["x"]["projected_s"], 0.0085)
        self.assertAlmostEqual(methods["x"]["error"], 0.0085 / 0.009 - 1)

    def test_host_work_per_draw(self):
        with tempfile.TemporaryDirectory() as tmp:
            methods, doc = project(tmp, "draw")
        # ar's 4 draws (the first token + 3 steps) share 1.5 ms; x has 1 + 4 draws.
        self.assertAlmostEqual(doc["host_s_per_unit"], 0.0015 / 4)
        self.assertAlmostEqual(methods["x"]["projected_s"], 0.007 + 5 * 0.0015 / 4 + 0.001)

    def test_stretching_repeats_steps(self):
        with tempfile.TemporaryDirectory() as tmp:
            methods, _ = project(tmp, "step", extra=("--scale_tokens", "8"))
        # Twice the tokens: the step and its host work twice, the prefill once, decode twice.
        self.assertAlmostEqual(methods["x"]["projected_s"], 0.002 + 2 * 0.005 + 2 * 0.0005 + 0.002)

    def test_host_work_from_counts(self):
        # Traced with --count_ops: ar reads once and dispatches 100 operators, 90 of them in
        # its forwards (6th field); x reads 3 times and dispatches 60, 20 in its forwards.
        ar = dict(AR, host_syncs=1, dispatched_ops=100,
                  forwards=[f + [20] if f[3] else f + [30] for f in AR["forwards"]])
        x = dict(X, host_syncs=3, dispatched_ops=60,
                 forwards=[f + [20] if f[3] else f + [0] for f in X["forwards"]])
        with tempfile.TemporaryDirectory() as tmp:
            methods, doc = project(tmp, "counts", trace=(ar, x),
                                   extra=("--read_us", "100", "--op_us", "10"))
        # ar: 1 read (0.1 ms) + 10 operators outside (0.1 ms) + forwards 8 ms; the image
        # decode (the same for every method) is left out.
        self.assertAlmostEqual(methods["ar"]["host_s"], 0.0002)
        self.assertAlmostEqual(methods["ar"]["projected_s"], 0.0082)
        # x: 3 reads (0.3 ms) + 40 operators outside (0.4 ms) + forwards 7 ms.
        self.assertAlmostEqual(methods["x"]["projected_s"], 0.0077)
        self.assertAlmostEqual(methods["x"]["projected_speedup"], 0.0082 / 0.0077)
        self.assertEqual(doc["read_us"], 100)

    def test_untraced_replays_are_priced_per_replay(self):
        # An emulated-graphs trace: x replays 5 graphs, 1 of them its traced 4-token forward
        # (graph true), so 4 replays (an EAGLE head's) are not traced forwards. The table has
        # eager costs only, so the forwards are priced eager (--graphs none).
        ar = dict(AR, host_syncs=1, dispatched_ops=10, graph_replays=0,
                  forwards=[f + [0] for f in AR["forwards"]])
        x = dict(X, host_syncs=1, dispatched_ops=10, graph_replays=5,
                 forwards=[X["forwards"][0] + [0], ["target", 2, 4, 1, True, 0]])
        with tempfile.TemporaryDirectory() as tmp:
            unpriced, _ = project(tmp, "counts", trace=(ar, x),
                                  extra=("--read_us", "100", "--op_us", "10", "--graphs", "none"))
            priced, doc = project(tmp, "counts", trace=(ar, x),
                                  extra=("--read_us", "100", "--op_us", "10", "--graphs", "none",
                                         "--replay_us", "50"))
        self.assertEqual(priced["x"]["untraced_replays"], 4)
        self.assertEqual(priced["ar"]["untraced_replays"], 0)
        self.assertAlmostEqual(priced["x"]["host_s"] - unpriced["x"]["host_s"], 4 * 50e-6)
        self.assertAlmostEqual(priced["ar"]["host_s"], unpriced["ar"]["host_s"])
        self.assertEqual(doc["replay_us"], 50)

    def test_graphs_all_prices_every_forward_as_a_replay(self):
        global TABLE
        eager = TABLE
        TABLE = {**eager, "cost": [dict(r, graphs_ms=r["eager_ms"] / 2) for r in eager["cost"]]}
        try:
            with tempfile.TemporaryDirectory() as tmp:
                traced, _ = project(tmp, "step")
                replayed, _ = project(tmp, "step", extra=("--graphs", "all"))
        finally:
            TABLE = eager
        self.assertAlmostEqual(traced["x"]["forward_s"], 0.007)
        self.assertAlmostEqual(replayed["x"]["forward_s"], 0.0035)

    def test_counts_need_a_counted_trace(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(subprocess.CalledProcessError):
                project(tmp, "counts")

    def test_needs_ar_to_calibrate(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(subprocess.CalledProcessError):
                project(tmp, "step", trace=(X,))


class FitHostCostsTest(unittest.TestCase):
    def fit(self, replays_column):
        # Three methods priced at 300 us per replayed forward, 2 us per operator, 100 us per
        # read, plus 1 ms of image decode (left out of the fit). methods_bench's table, with
        # or without its "graph replays / step" column: the fit finds columns by name.
        methods = {"ar": (20, 10, 50, 2), "a": (5, 4, 400, 9), "b": (8, 6, 120, 12)}
        replays = " graph replays / step |" if replays_column else ""
        header = ("| method | host syncs / image | decode steps / image | host syncs / step |"
                  + replays + " dispatched ops / step | kernels / step |")
        trace, table, ops = [], [header], [header]
        for name, (graphs, steps, ops_per_step, reads) in methods.items():
            seconds = 300e-6 * graphs + 2e-6 * steps * ops_per_step + 100e-6 * reads + 0.001
            trace.append({"method": name, "seconds": seconds, "phases": {"image_decode": 0.001},
                          "forwards": [["target", 2, 24, 0, False]] +
                                      [["target", 2, 1, 24 + i, True] for i in range(graphs)]})
            replay_cell = " 1.00 |" if replays_column else ""
            table.append(f"| {name} | {reads} | {steps} | 0 |{replay_cell} - | - |")
            ops.append(f"| {name} | {reads} | {steps} | 0 |{replay_cell} {ops_per_step} | 1 |")
        with tempfile.TemporaryDirectory() as tmp:
            paths = [os.path.join(tmp, f) for f in ("t.jsonl", "run.md", "ops.md")]
            for path, text in zip(paths, ["\n".join(json.dumps(t) for t in trace),
                                          "\n".join(table), "\n".join(ops)]):
                with open(path, "w") as f:
                    f.write(text + "\n")
            return subprocess.run([sys.executable, FIT, "--trace", paths[0], "--table",
                                   paths[1], "--ops_table", paths[2]], check=True,
                                  capture_output=True, text=True).stdout

    def test_recovers_the_constants_a_run_was_made_with(self):
        for replays_column in (False, True):
            out = self.fit(replays_column)
            self.assertIn("graph forward 300.0 us, operator 2.00 us, read 100.0 us", out)
            self.assertIn("+0.0%", out)


if __name__ == "__main__":
    unittest.main()
