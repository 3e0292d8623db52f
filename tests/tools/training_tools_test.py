"""Unit tests of the family's training tools: the VQ's object-weighted loss, the LANTERN
defaults scaled to a codebook, the `auto` calibration table, train_all's
lanes (stage order, threads per lane, failure and resume, the recorded wall time) and
train_ar's data-parallel ranks (the same training as one process, resumable)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SYNTH = os.path.join(ROOT, "tools", "synth")
sys.path.insert(0, SYNTH)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import data  # noqa: E402
import domain  # noqa: E402
import calibrate_auto  # noqa: E402
import train_all  # noqa: E402
import train_vq  # noqa: E402
import vq_decoder  # noqa: E402
import scale_gsd_defaults  # noqa: E402
import scale_lantern_defaults  # noqa: E402
import wall_ledger  # noqa: E402


def one_object_scene(shape="square", size="large", cell=4):
    return {"background": {"kind": "stripes", "colors": ["white", "black"]},
            "objects": [{"shape": shape, "size": size, "color": "red", "cell": cell,
                         "jitter": [0.0, 0.0]}],
            "template": 0, "size_mentioned": [True]}


class ObjectWeightTest(unittest.TestCase):
    def test_mask_is_the_object_and_nothing_else(self):
        scene = one_object_scene()
        images, masks = data.render_with_object_masks([scene], 64)
        self.assertTrue(torch.equal(images, data.render_batch([scene], 64)))
        mask = masks[0, 0]
        image = torch.from_numpy(domain.render_array(scene, 64))
        red = (image == torch.tensor(domain.OBJECT_COLORS["red"], dtype=torch.uint8)).all(-1)
        self.assertTrue(torch.equal(mask.bool(), red))
        # A large square's side is 2 * 0.85 * 0.15 image widths: 16.3 px at 64 px.
        self.assertIn(int(mask.sum()), range(15 * 15, 18 * 18 + 1))
        bare = dict(scene, objects=[])
        self.assertEqual(data.render_with_object_masks([bare], 32)[1].sum().item(), 0)

    def test_weights_cover_objects_and_their_ring(self):
        scene = one_object_scene(size="small")
        _, mask = data.render_with_object_masks([scene], 32)
        weight = train_vq.pixel_weights(mask, 16.0)
        self.assertEqual(weight.shape, (1, 1, 32, 32))
        self.assertTrue(torch.all(weight[mask.bool()] == 17.0))
        ring = (weight == 17.0) & ~mask.bool()
        self.assertGreater(int(ring.sum()), 0)
        # The ring is one pixel wide: every ring pixel touches the object (8-neighbourhood).
        near = torch.nn.functional.max_pool2d(mask, 3, stride=1, padding=1).bool()
        self.assertTrue(torch.all(near[ring]))
        self.assertTrue(torch.all(weight[~near] == 1.0))
        self.assertIsNone(train_vq.pixel_weights(mask, 0.0))

    def test_weighted_mean(self):
        err = torch.rand(2, 3, 4, 4)
        self.assertAlmostEqual(train_vq.weighted_mean(err, None).item(), err.mean().item(), 6)
        flat = torch.full((2, 1, 4, 4), 5.0)
        self.assertAlmostEqual(train_vq.weighted_mean(err, flat).item(), err.mean().item(), 5)
        only_first = torch.zeros(2, 1, 4, 4)
        only_first[:, :, 0, 0] = 1.0
        self.assertAlmostEqual(train_vq.weighted_mean(err, only_first).item(),
                               err[:, :, 0, 0].mean().item(), 5)


FAKE_STAGE = textwrap.dedent("""
    import json, os, sys, time
    stage = sys.argv[1]
    work = os.path.join(os.environ["MULO_TRAIN_DIR"], stage)
    with open(os.path.join(os.environ["MULO_TRAIN_DIR"], "events.txt"), "a") as f:
        f.write(f"{stage} {os.environ.get('MULO_TRAIN_THREADS', '-')}\\n")
    time.sleep(float(os.environ.get("SLOW_SECONDS", 0)) if stage == os.environ.get("SLOW_STAGE")
               else 0.3)
    if stage == os.environ.get("FAIL_STAGE"):
        sys.exit(3)
    with open(os.path.join(work, "report.json"), "w") as f:
        json.dump({"train_minutes": 0.5}, f)
""")

DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import train_all
    train_all.STAGES = [(s, [sys.argv[2], s]) for s, _ in train_all.STAGES]
    sys.argv = ["train_all.py"] + sys.argv[3:]
    train_all.main()
""")


class ScaleLanternDefaultsTest(unittest.TestCase):
    def test_k_keeps_the_papers_share_of_the_codebook(self):
        d = scale_lantern_defaults.defaults(1024)
        self.assertEqual(d["lantern"]["k"], 62)      # 1000 / 16384 of 1024
        self.assertEqual(d["lantern++"]["k"], 1)     # 10 / 8192 of 1024, at least 1
        self.assertEqual(d["lantern"]["delta"], 0.1)
        self.assertEqual(d["lantern++"]["lambda"], 2.0)
        # On the papers' own codebooks the papers' values come back.
        self.assertEqual(scale_lantern_defaults.defaults(16384)["lantern"]["k"], 1000)
        self.assertEqual(scale_lantern_defaults.defaults(8192)["lantern++"]["k"], 10)

    def test_writes_the_family_file_keeping_other_defaults(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "vq"))
            with open(os.path.join(tmp, "vq", "config.json"), "w") as f:
                json.dump({"codebook_size": 4096}, f)
            with open(os.path.join(tmp, "family.json"), "w") as f:
                json.dump({"components": {"vq": "vq"},
                           "method_defaults": {"mulo": {"tau": 0.001}}}, f)
            subprocess.run([sys.executable, os.path.join(SYNTH, "scale_lantern_defaults.py"),
                            "--models", tmp], check=True, capture_output=True)
            family = json.load(open(os.path.join(tmp, "family.json")))
            self.assertEqual(family["method_defaults"]["mulo"], {"tau": 0.001})
            self.assertEqual(family["method_defaults"]["lantern"]["k"], 250)
            self.assertEqual(family["method_defaults"]["lantern++"]["k"], 5)


class ScaleGsdDefaultsTest(unittest.TestCase):
    def test_bound_is_the_lantern_share_quantile_of_pairwise_distances(self):
        # 1000 points on a line, spacing 1: squared pair distances d^2 for d = 1..999, with
        # 1000 - d pairs each; 6.10% of the pairs lie within distance about 31.
        points = np.arange(1000, dtype=np.float64).reshape(-1, 1)
        d = np.abs(points - points.T)[np.triu_indices(1000, k=1)] ** 2
        self.assertAlmostEqual(scale_gsd_defaults.bound(points), np.quantile(d, 1000 / 16384))
        self.assertGreater(scale_gsd_defaults.bound(points), 30 ** 2)
        self.assertLess(scale_gsd_defaults.bound(points), 33 ** 2)
        # Scaling the embeddings by 10 scales the bound by 100: it follows the space.
        self.assertAlmostEqual(scale_gsd_defaults.bound(10 * points),
                               100 * scale_gsd_defaults.bound(points), places=6)
        written = scale_gsd_defaults.defaults(points)["gsd"]
        self.assertEqual(written["embedding_scaling"]["paper_max_embedding_distance"], 0.5)


class CalibrateAutoTest(unittest.TestCase):
    """calibrate_auto.py runs the bench over every available method on validation prompts and
    writes its device's table, keeping everything else in family.json."""

    FAKE_BENCH = textwrap.dedent(r"""
        import json, os, sys
        args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
        prompts = [json.loads(l)["prompt"] for l in open(args["prompts"])]
        os.makedirs(args["out_dir"], exist_ok=True)
        with open(os.path.join(args["out_dir"], "args.json"), "w") as f:
            json.dump({"args": args, "prompts": prompts}, f)
        rows = [("ar", "main", 1.0, 0.0), ("sjd (window 16, init random)", "main", 1.6, -1.5),
                ("eagle (static_tree false)", "main", 0.4, 0.0),
                ("eagle (static_tree true)", "main", 0.5, 1.0),
                ("mulo grid 0", "grid", 9.0, 0.0)]
        with open(os.path.join(args["out_dir"], "methods.csv"), "w") as f:
            f.write("method,group,speedup,syntheval_delta,syntheval_delta_se\n")
            for name, group, speedup, delta in rows:
                f.write(f'"{name}",{group},{speedup},{delta},5.5\n')
        """)

    def test_writes_the_devices_table_from_the_family_default_rows(self):
        with tempfile.TemporaryDirectory() as tmp:
            bench = os.path.join(tmp, "bench.py")
            with open(bench, "w") as f:
                f.write(self.FAKE_BENCH)
            os.chmod(bench, 0o755)
            wrapper = os.path.join(tmp, "bench")
            with open(wrapper, "w") as f:
                f.write(f"#!/bin/sh\nexec {sys.executable} {bench} \"$@\"\n")
            os.chmod(wrapper, 0o755)
            models = os.path.join(tmp, "family")
            os.makedirs(models)
            with open(os.path.join(models, "family.json"), "w") as f:
                json.dump({"name": "f", "method_defaults": {
                    "gsd": {"window": 8},
                    "auto": {"calibration": {"tool": "x", "cuda": {"methods": {"sjd": {}}}}}}}, f)
            out = os.path.join(tmp, "out")
            subprocess.run([sys.executable, os.path.join(SYNTH, "calibrate_auto.py"),
                            f"--models={models}", "--device=cpu", "--count=8",
                            f"--bench={wrapper}", f"--out_dir={out}"],
                           check=True, capture_output=True)
            family = json.load(open(os.path.join(models, "family.json")))
            defaults = family["method_defaults"]
            self.assertEqual(defaults["gsd"], {"window": 8})
            calibration = defaults["auto"]["calibration"]
            self.assertEqual(calibration["cuda"], {"methods": {"sjd": {}}})  # kept
            self.assertEqual(calibration["tool"], "tools/synth/calibrate_auto.py")
            cpu = calibration["cpu"]
            self.assertEqual(cpu["validation_prompts"], 8)
            self.assertEqual(cpu["methods"], {
                "ar": {"speedup": 1.0, "syntheval_delta": 0.0, "syntheval_delta_se": 5.5},
                "sjd": {"speedup": 1.6, "syntheval_delta": -1.5, "syntheval_delta_se": 5.5},
                # the family default row, not the spec's bench variant after it
                "eagle": {"speedup": 0.4, "syntheval_delta": 0.0, "syntheval_delta_se": 5.5}})
            ran = json.load(open(os.path.join(out, "args.json")))
            self.assertEqual(ran["args"]["methods"], "available")
            self.assertEqual(ran["args"]["device"], "cpu")
            self.assertEqual(len(ran["prompts"]), 8)
            # Validation prompts, never the held-out set.
            held_out = set(calibrate_auto.heldout.load_prompts())
            self.assertFalse(held_out & set(ran["prompts"]))


class TrainAllLanesTest(unittest.TestCase):
    """train_all.py with every stage replaced by a script that records its name and threads."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.env = dict(os.environ, MULO_TRAIN_DIR=os.path.join(self.tmp, "train"),
                        MULO_MODELS_DIR=os.path.join(self.tmp, "models"), MULO_TRAIN_THREADS="2")
        self.env.pop("FAIL_STAGE", None)
        self.fake = os.path.join(self.tmp, "fake_stage.py")
        self.driver = os.path.join(self.tmp, "driver.py")
        with open(self.fake, "w") as f:
            f.write(FAKE_STAGE)
        with open(self.driver, "w") as f:
            f.write(DRIVER)

    def run_all(self, *args, fail=None):
        env = dict(self.env, **({"FAIL_STAGE": fail} if fail else {}))
        return subprocess.run([sys.executable, self.driver, SYNTH, self.fake, *args], env=env,
                              capture_output=True, text=True)

    def events(self):
        with open(os.path.join(self.env["MULO_TRAIN_DIR"], "events.txt")) as f:
            lines = [line.split() for line in f if line.strip()]
        os.remove(os.path.join(self.env["MULO_TRAIN_DIR"], "events.txt"))
        return lines

    def record(self):
        with open(os.path.join(self.env["MULO_MODELS_DIR"], "training.json")) as f:
            return json.load(f)

    def test_lanes_order_threads_failure_and_resume(self):
        result = self.run_all(fail="chain")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("chain failed (exit 3)", result.stderr)
        events = self.events()
        order = [stage for stage, _ in events]
        threads = dict(events)
        # Up to the target, one stage at a time with the process's threads.
        self.assertEqual(order[:4], ["vq", "vq_refine", "vq_decoder", "target"])
        self.assertEqual([threads[s] for s in order[:4]], ["2", "2", "2", "2"])
        # After it, each lane in its own order, one thread each; the other lane finishes even
        # though chain failed.
        self.assertEqual(sorted(order[4:]), ["chain", "drafter", "eagle", "resamplers"])
        self.assertLess(order.index("drafter"), order.index("chain"))
        self.assertLess(order.index("resamplers"), order.index("eagle"))
        self.assertEqual({threads[s] for s in order[4:]}, {"1"})
        record = self.record()
        self.assertIn("eagle", record)
        self.assertNotIn("chain", record)
        self.assertEqual(record["family"]["invocations"], 1)

        # Resume: only what is left runs; chain, alone now, gets both threads.
        result = self.run_all()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.events(), [["chain", "2"]])
        record = self.record()
        self.assertEqual(record["family"]["invocations"], 2)
        self.assertEqual(record["family"]["lanes_after_target"], 2)
        self.assertEqual(record["chain"]["threads"], 2)
        self.assertEqual(record["drafter"]["threads"], 1)
        self.assertEqual(sorted(k for k in record if k != "family"),
                         sorted(s for s, _ in train_all.STAGES))

    def test_killed_run_keeps_its_wall_time(self):
        env = dict(self.env, SLOW_STAGE="target", SLOW_SECONDS="30", MULO_WALL_HEARTBEAT_S="0.2")
        run = subprocess.Popen([sys.executable, self.driver, SYNTH, self.fake], env=env,
                               start_new_session=True)
        events = os.path.join(self.env["MULO_TRAIN_DIR"], "events.txt")
        deadline = time.time() + 20
        while time.time() < deadline:
            if os.path.exists(events):
                with open(events) as f:
                    if "target" in f.read():
                        break
            time.sleep(0.05)
        time.sleep(1.5)
        # As a closed session does it: no chance to clean up, the stage dies too.
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        ledger = os.path.join(self.env["MULO_TRAIN_DIR"], "invocations")
        killed = wall_ledger.invocations(ledger)
        self.assertEqual(len(killed), 1)
        self.assertGreater(killed[0], 1.5)  # three stages of 0.3 s, then 1.5 s into the target
        self.assertLess(killed[0], 15)
        self.events()

        result = self.run_all()
        self.assertEqual(result.returncode, 0, result.stderr)
        resumed = [s for s, _ in self.events()]  # the lanes' order between them may vary
        self.assertEqual(resumed[0], "target")
        self.assertEqual(sorted(resumed[1:]), ["chain", "drafter", "eagle", "resamplers"])
        seconds = wall_ledger.invocations(ledger)
        self.assertEqual(len(seconds), 2)
        self.assertEqual(seconds[0], killed[0])
        family = self.record()["family"]
        self.assertEqual(family["invocations"], 2)
        self.assertAlmostEqual(family["wall_minutes"], round(sum(seconds) / 60, 1))

    def test_one_lane(self):
        result = self.run_all("--lanes", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        order = self.events()
        self.assertEqual(order, [[s, "2"] for s in
                                 ["vq", "vq_refine", "vq_decoder", "target", "drafter", "chain",
                                  "resamplers", "eagle"]])
        self.assertEqual(self.record()["family"]["lanes_after_target"], 1)

    def test_only(self):
        result = self.run_all("--only", "eagle", "--only", "vq")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.events(), [["vq", "2"], ["eagle", "2"]])


class DataParallelTest(unittest.TestCase):
    """train_ar.py --ranks 2 against one process, on a random VQ, in fp32 (bf16 would hide a
    wrong shard in rounding noise)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        torch.manual_seed(0)
        cls.vq_dir = os.path.join(cls.tmp, "vq")
        train_vq.export(vq_decoder.VQModel(train_vq.CONFIG), cls.vq_dir)

    def train(self, name, ranks, steps):
        models = os.path.join(self.tmp, name, "models")
        if not os.path.isdir(models):
            os.makedirs(models)
            os.symlink(self.vq_dir, os.path.join(models, "vq"))
        env = dict(os.environ, MULO_TRAIN_DIR=os.path.join(self.tmp, name, "train"),
                   MULO_MODELS_DIR=models, MULO_TRAIN_BF16="0", MULO_TRAIN_THREADS="1")
        result = subprocess.run([sys.executable, os.path.join(SYNTH, "train_ar.py"), "--role",
                                 "target", "--steps", str(steps), "--batch", "4", "--ranks",
                                 str(ranks)], env=env, capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        work = os.path.join(env["MULO_TRAIN_DIR"], "target")
        with open(os.path.join(work, "loss_log.csv")) as f:
            log = [line.strip().split(",") for line in f][1:]
        state = torch.load(os.path.join(work, "checkpoint.pt"))
        with open(os.path.join(work, "report.json")) as f:
            return result.stdout, [[float(x) for x in row] for row in log], state, json.load(f)

    def test_two_ranks_train_as_one_process(self):
        _, one_log, one, _ = self.train("one", 1, 3)
        # Two steps, then a resumed third: the other rank must resume from the same checkpoint.
        self.train("two", 2, 2)
        stdout, two_log, two, report = self.train("two", 2, 3)
        self.assertIn("resuming at step 2/3", stdout)
        self.assertIn("2 processes x 1 thread, 2 of the 4 samples each", stdout)
        self.assertEqual(report["ranks"], 2)
        self.assertEqual(two["step"], 3)
        # The log has one row per step, written once (by rank 0), with the whole batch's loss
        # and accuracy: a rank that logged its own half, or drew the other rank's samples,
        # would be ~0.05 off in loss.
        self.assertEqual([row[0] for row in two_log], [0, 1, 2])
        for a, b in zip(one_log, two_log):
            for x, y in zip(a[1:], b[1:]):
                self.assertAlmostEqual(x, y, delta=1e-4)
        # Each step moves weights by ~1e-5 (warmup); the two runs agree far closer than that.
        for module in ("model", "conditioner"):
            for name, tensor in one["modules"][module].items():
                diff = (tensor.float() - two["modules"][module][name].float()).abs().max().item()
                self.assertLess(diff, 2e-6, f"{module}.{name}")
        self.assertTrue(all(not name.startswith("module.") for name in two["modules"]["model"]))

    def test_batch_must_split_over_ranks(self):
        result = subprocess.run([sys.executable, os.path.join(SYNTH, "train_ar.py"), "--role",
                                 "target", "--batch", "5", "--ranks", "2"],
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--batch 5 must split evenly over --ranks 2", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
