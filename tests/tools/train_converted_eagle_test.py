"""tools/convert/train_eagle_head.py on the tiny families that convert_tiny_families.py converts:
an EAGLE head trained in place for the Janus-Pro, Tar and LlamaGen t2i families from a few drawn
images (the head in the engine's form, family.json extended, held-out top-1 agreement with the
target above the most-frequent-token floor, the same bytes again for the same seed), and
refused with a message naming the problem for: an empty folder, a family whose target has
another architecture, a Janus-Pro component converted before image_start_id was written.

  /usr/bin/python3 tests/tools/train_converted_eagle_test.py WORK
WORK holds upstream/ and repository/ from convert_tiny_families.py; afterwards
repository/janus-pro, repository/tar and repository/llamagen-t2i have their heads (the shell
test serves them).
"""
import contextlib
import filecmp
import io
import json
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_upstream  # noqa: E402,F401  (puts tools/convert and tools/reference on the path)
import train_eagle_head  # noqa: E402
from train_converted_resamplers_test import draw_images  # noqa: E402

WORK = None  # set from argv
TRAIN_FLAGS = ["--steps", "150", "--heldout_fraction", "0.25", "--seed", "3"]


def run(argv):
    """(exit status, stderr) of train_eagle_head.main."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = train_eagle_head.main(argv)
    return rc, err.getvalue()


class TrainConvertedEagle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.images = draw_images(os.path.join(WORK, "eagle_images"), 40)
        cls.repo = os.path.join(WORK, "repository")

    def test_trains_in_place_and_beats_the_floor(self):
        for name in ("janus-pro", "tar", "llamagen-t2i"):
            family = os.path.join(self.repo, name)
            rc, err = run(["--family", family, "--images", self.images] + TRAIN_FLAGS)
            self.assertEqual(rc, 0, err)
            with open(os.path.join(family, "family.json")) as f:
                self.assertEqual(json.load(f)["components"]["eagle"], "eagle")
            with open(os.path.join(family, "eagle", "config.json")) as f:
                config = json.load(f)
            with open(os.path.join(family, "target", "config.json")) as f:
                self.assertEqual(config["dim"], json.load(f)["dim"])
            with open(os.path.join(family, "eagle_report.json")) as f:
                report = json.load(f)
            print(name, report["heldout"], flush=True)
            self.assertEqual((report["train_images"], report["heldout_images"]), (30, 10))
            self.assertGreater(report["heldout"]["top1_agreement"],
                               report["heldout"]["majority_agreement"] + 0.05, name)
            self.assertGreaterEqual(report["heldout"]["top3_agreement"],
                                    report["heldout"]["top1_agreement"])

    def test_the_same_seed_gives_the_same_head(self):
        family = os.path.join(self.repo, "janus-pro")
        outs = [os.path.join(WORK, f"eagle_again_{i}") for i in range(2)]
        for out in outs:
            rc, err = run(["--family", family, "--images", self.images, "--out", out, "--steps",
                           "20", "--seed", "9"])
            self.assertEqual(rc, 0, err)
        self.assertTrue(filecmp.cmp(*(os.path.join(o, "eagle", "model.safetensors") for o in outs),
                                    shallow=False))

    def test_refusals_name_the_problem(self):
        empty = os.path.join(WORK, "no_images")
        os.makedirs(empty, exist_ok=True)
        rc, err = run(["--family", os.path.join(self.repo, "janus-pro"), "--images", empty])
        self.assertEqual(rc, 2)
        self.assertIn("no .png, .jpg or .jpeg images", err)
        # A family whose target is Tar's MLLM (a qwen2 language model).
        other = os.path.join(WORK, "qwen2_family")
        os.makedirs(other, exist_ok=True)
        with open(os.path.join(other, "family.json"), "w") as f:
            json.dump({"name": "q", "components": {"target": "../repository/tar/mllm",
                                                   "vq": "../repository/tar/vq"}}, f)
        rc, err = run(["--family", other, "--images", self.images])
        self.assertEqual(rc, 2)
        self.assertIn("architecture 'qwen2'", err)
        # A Janus-Pro target converted without image_start_id.
        old = os.path.join(WORK, "janus_old")
        shutil.copytree(os.path.join(self.repo, "janus-pro"), old, dirs_exist_ok=True)
        path = os.path.join(old, "target", "config.json")
        with open(path) as f:
            config = json.load(f)
        del config["image_start_id"]
        with open(path, "w") as f:
            json.dump(config, f)
        rc, err = run(["--family", old, "--images", self.images])
        self.assertEqual(rc, 2)
        self.assertIn("config.json: image_start_id missing", err)


if __name__ == "__main__":
    WORK = sys.argv.pop(1)
    unittest.main(verbosity=2)
