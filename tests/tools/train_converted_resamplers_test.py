"""tools/convert/train_resamplers.py on the tiny Tar family that convert_tiny_families.py
converts: trained in place from a few drawn images (U_2 / D_2 written in the engine's form,
family.json extended, the training loss down and agreement on the training images far above
the most-frequent-token floor, the same bytes again for the same seed), written elsewhere with
--out and copied in by convert.py tar-family --resamplers into a second family, and refused
with a message naming the problem for: an empty folder, an unreadable image, too few images to
hold one out, a family without a drafter and a VQ file without its encoder.

  /usr/bin/python3 tests/tools/train_converted_resamplers_test.py WORK
WORK holds upstream/ and repository/ from convert_tiny_families.py; afterwards
repository/tar has the trained pair and repository/tar-resampled the copied one (the shell
test serves both).
"""
import contextlib
import io
import json
import os
import random
import shutil
import sys
import unittest

from PIL import Image, ImageDraw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_upstream  # noqa: E402  (puts tools/convert and tools/reference on the path)
import convert  # noqa: E402
import safetensors_io  # noqa: E402
import train_resamplers  # noqa: E402

WORK = None  # set from argv
TRAIN_FLAGS = ["--steps", "150", "--channels", "32", "--num_blocks", "2",
               "--heldout_fraction", "0.25", "--seed", "3"]


def draw_images(folder, count, seed=5):
    """Coloured rectangles and ellipses on coloured grounds, 40 x 32 (cropped to squares);
    one of them a JPEG."""
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    for i in range(count):
        image = Image.new("RGB", (40, 32), tuple(rng.randrange(256) for _ in range(3)))
        draw = ImageDraw.Draw(image)
        for _ in range(2):
            x, y = rng.randrange(30), rng.randrange(22)
            box = (x, y, x + rng.randrange(6, 16), y + rng.randrange(6, 16))
            shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
            shape(box, fill=tuple(rng.randrange(256) for _ in range(3)))
        image.save(os.path.join(folder, f"image{i}.{'jpg' if i == 0 else 'png'}"))
    return folder


def run(argv):
    """(exit status, stderr) of train_resamplers.main."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = train_resamplers.main(argv)
    return rc, err.getvalue()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class TrainConvertedResamplersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = os.path.join(WORK, "repository")
        cls.tar = os.path.join(cls.repo, "tar")
        cls.images = draw_images(os.path.join(WORK, "images"), 8)
        cls.family_before = read_json(os.path.join(cls.tar, "family.json"))
        rc = train_resamplers.main(["--family", cls.tar, "--images", cls.images] + TRAIN_FLAGS)
        assert rc == 0, rc
        cls.report = read_json(os.path.join(cls.tar, "resamplers_report.json"))
        print(f"held-out agreement: {cls.report['heldout']}", flush=True)

    def test_pair_in_the_engine_form(self):
        vq_cfg = read_json(os.path.join(self.tar, "vq", "config.json"))
        for name, kind in (("upsampler", "up"), ("downsampler", "down")):
            cfg = read_json(os.path.join(self.tar, name, "config.json"))
            self.assertEqual(cfg, {"kind": kind, "factor": 2, "channels": 32, "num_blocks": 2,
                                   "codebook_size": tiny_upstream.VOCAB,
                                   "codebook_embed_dim": vq_cfg["codebook_embed_dim"]})
            tensors = safetensors_io.load(os.path.join(self.tar, name, "model.safetensors"))
            self.assertEqual(list(tensors["codebook"].shape), [tiny_upstream.VOCAB, 8])
            self.assertIn("blocks.1.conv2.weight", tensors)
            self.assertIn("logit_scale", tensors)

    def test_family_json_lists_them_and_keeps_the_rest(self):
        doc = read_json(os.path.join(self.tar, "family.json"))
        before = self.family_before
        self.assertEqual(doc["components"], dict(before["components"], upsampler="upsampler",
                                                 downsampler="downsampler"))
        for key in ("name", "default_cfg_scale", "pixel_rounding"):
            self.assertEqual(doc[key], before[key])
        self.assertEqual(doc["converted"]["tool"], before["converted"]["tool"])
        self.assertEqual(doc["converted"]["resamplers"]["image_count"], 8)
        self.assertFalse(os.path.exists(os.path.join(self.tar, "family.json.tmp")))

    def test_training_learned(self):
        r = self.report
        self.assertEqual((r["images"], r["train_images"], r["heldout_images"]), (8, 6, 2))
        self.assertEqual(r["steps"], 150)
        # Random initial nets start near or above ln 64 = 4.2 nats per direction.
        self.assertGreater(r["train_loss_before"], 6.0)
        self.assertLess(r["train_loss_after"], 0.25 * r["train_loss_before"])
        train = r["train"]
        for direction in ("up", "down"):
            # Far above what the most frequent token alone gets on these images.
            self.assertGreater(train[f"{direction}_agreement"],
                               train[f"majority_{direction}_agreement"] + 0.4)
        self.assertGreater(train["round_trip_agreement"], 0.5)
        for key in ("up_agreement", "down_agreement", "round_trip_agreement",
                    "majority_up_agreement"):
            self.assertTrue(0 <= r["heldout"][key] <= 1)

    def test_same_seed_same_bytes_and_out_leaves_family_alone(self):
        out = os.path.join(WORK, "pair")
        family_json = read_bytes(os.path.join(self.tar, "family.json"))
        rc, err = run(["--family", self.tar, "--images", self.images, "--out", out] +
                      TRAIN_FLAGS)
        self.assertEqual(rc, 0, err)
        self.assertEqual(read_bytes(os.path.join(self.tar, "family.json")), family_json)
        for name in ("upsampler", "downsampler"):
            self.assertEqual(read_bytes(os.path.join(out, name, "model.safetensors")),
                             read_bytes(os.path.join(self.tar, name, "model.safetensors")),
                             name)
        # The --out workflow: the converter copies the pair into a family it converts.
        tiny_upstream.register_tiny_sizes()
        up = os.path.join(WORK, "upstream")
        with contextlib.redirect_stdout(io.StringIO()):
            rc = convert.main(["tar-family", "--out", os.path.join(self.repo, "tar-resampled"),
                               "--name", "tar-resampled",
                               "--target", os.path.join(up, "tar_512.pth"),
                               "--drafter", os.path.join(up, "tar_256.pth"),
                               "--ta-tok", os.path.join(up, "ta_tok.pth"),
                               "--vq", os.path.join(up, "vq.pt"), "--vq-model", "VQ-tiny",
                               "--ta-tok-heads", str(tiny_upstream.TA_TOK["n_head"]),
                               "--resamplers", out])
        self.assertEqual(rc, 0)
        doc = read_json(os.path.join(self.repo, "tar-resampled", "family.json"))
        self.assertIn("upsampler", doc["components"])
        self.assertIn("downsampler", doc["components"])

    def assertRefused(self, argv, *fragments):
        rc, err = run(argv)
        self.assertEqual(rc, 2, err)
        for fragment in fragments:
            self.assertIn(fragment, err)

    def test_refusals(self):
        empty = os.path.join(WORK, "empty")
        os.makedirs(empty, exist_ok=True)
        self.assertRefused(["--family", self.tar, "--images", empty],
                           empty, "no .png, .jpg or .jpeg images")

        broken = draw_images(os.path.join(WORK, "broken"), 3)
        with open(os.path.join(broken, "not_an_image.png"), "wb") as f:
            f.write(b"\x89PNG but not really")
        self.assertRefused(["--family", self.tar, "--images", broken, "--out",
                            os.path.join(WORK, "unused")],
                           os.path.join(broken, "not_an_image.png"), "cannot read the image")

        one = draw_images(os.path.join(WORK, "one"), 1)
        self.assertRefused(["--family", self.tar, "--images", one], one, "1 image(s), too few",
                           "--heldout_fraction 0")

        t2i = os.path.join(self.repo, "llamagen-t2i")
        self.assertRefused(["--family", t2i, "--images", self.images],
                           os.path.join(t2i, "family.json"), "no drafter", "MuLo-SD")

        no_encoder = os.path.join(WORK, "no_encoder")
        shutil.copytree(self.tar, no_encoder)
        weights = os.path.join(no_encoder, "vq", "model.safetensors")
        tensors = safetensors_io.load(weights)
        safetensors_io.save({k: v for k, v in tensors.items() if not k.startswith("encoder.")},
                            weights)
        self.assertRefused(["--family", no_encoder, "--images", self.images],
                           weights, "encoder is missing")


if __name__ == "__main__":
    WORK = sys.argv.pop(1)
    unittest.main(verbosity=2)
