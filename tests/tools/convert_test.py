#!/usr/bin/env python3
"""The converter's refusal paths and the TA-Tok reference against upstream's formulas, on tiny
files in the upstream layouts (tests/tools/tiny_upstream.py). Run by convert_test.sh."""
import contextlib
import io
import os
import pickle
import sys
import tempfile
import unittest

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_upstream  # noqa: E402
import convert  # noqa: E402
import ta_tok as tt  # noqa: E402  (the reference)


class Evil:
    def __reduce__(self):
        return (os.system, ("true",))


def run_cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = convert.main(argv)
    return rc, err.getvalue()


class ConverterRefusals(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tiny_upstream.register_tiny_sizes()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = tiny_upstream.write_files(os.path.join(cls.tmp.name, "upstream"))

    def out(self, name):
        return os.path.join(self.tmp.name, "out", self.id().split(".")[-1], name)

    def rewrite(self, name, edit):
        """A copy of an upstream file with its checkpoint dict edited."""
        ckpt = torch.load(self.files[name], map_location="cpu", weights_only=False)
        edit(ckpt)
        path = os.path.join(self.tmp.name, f"{self.id().split('.')[-1]}_{name}.pt")
        torch.save(ckpt, path)
        return path

    def refuse(self, argv, *fragments):
        rc, err = run_cli(argv)
        self.assertEqual(rc, 2, err)
        for fragment in fragments:
            self.assertIn(fragment, err)
        return err

    def test_tar_ar_converts(self):
        rc, err = run_cli(["tar-ar", "--ckpt", self.files["tar_512"], "--out", self.out("t")])
        self.assertEqual(rc, 0, err)

    def test_unknown_registry_name(self):
        path = self.rewrite("tar_512", lambda c: c["model"].update(name="llama-abs-Q"))
        self.refuse(["tar-ar", "--ckpt", path, "--out", self.out("t")],
                    path, "model.name", "llama-abs-Q", "llama-abs-LP")

    def test_missing_tensor(self):
        path = self.rewrite("tar_512", lambda c: c["model"]["sd"].pop("layers.0.ffn_norm.weight"))
        self.refuse(["tar-ar", "--ckpt", path, "--out", self.out("t")],
                    path, "layers.0.ffn_norm.weight", "missing")

    def test_unexpected_tensor(self):
        path = self.rewrite("tar_512", lambda c: c["model"]["sd"].update(
            {"layers.0.attention.bias": torch.zeros(3)}))
        self.refuse(["tar-ar", "--ckpt", path, "--out", self.out("t")],
                    path, "layers.0.attention.bias", "unexpected")

    def test_shape_disagreeing_with_args(self):
        path = self.rewrite("tar_512", lambda c: c["model"]["args"].update(vocab_size=65))
        self.refuse(["tar-ar", "--ckpt", path, "--out", self.out("t")],
                    path, "tok_embeddings.weight", "[64, 32]", "[65, 32]")

    def test_abs_pe_disagreeing_with_cls_token_num(self):
        path = self.rewrite("tar_512", lambda c: c["model"]["args"].update(cls_token_num=4))
        self.refuse(["tar-ar", "--ckpt", path, "--out", self.out("t")], path, "abs_pe")

    def test_extra_layer(self):
        def add_layer(c):
            sd = c["model"]["sd"]
            for k in [k for k in sd if k.startswith("layers.0.")]:
                sd[k.replace("layers.0.", "layers.1.")] = sd[k].clone()
        path = self.rewrite("tar_512", add_layer)
        self.refuse(["tar-ar", "--ckpt", path, "--out", self.out("t")],
                    path, "layers.1.attention.wqkv.weight", "more layers")

    def test_not_tar_layout(self):
        self.refuse(["tar-ar", "--ckpt", self.files["vq"], "--out", self.out("t")],
                    self.files["vq"], "quantize.embedding.weight", "LlamaGen VQ tokenizer",
                    "not the Tar AR-DTok checkpoint", "give it as --vq")

    def test_missing_and_garbage_files(self):
        self.refuse(["vq", "--ckpt", "/nonexistent.pt", "--out", self.out("v")],
                    "/nonexistent.pt", "no such file")
        junk = os.path.join(self.tmp.name, "junk.pt")
        with open(junk, "wb") as f:
            f.write(b"not a pickle at all")
        self.refuse(["vq", "--ckpt", junk, "--out", self.out("v")], junk, "not a torch.save")

    def test_code_in_pickle_needs_trust(self):
        path = os.path.join(self.tmp.name, "evil.pt")
        ckpt = torch.load(self.files["vq"], map_location="cpu")
        ckpt["payload"] = Evil()
        torch.save(ckpt, path)
        self.refuse(["vq", "--ckpt", path, "--out", self.out("v"), "--vq-model", "VQ-tiny"],
                    path, "posix.system", "--trust-pickle")
        rc, err = run_cli(["vq", "--ckpt", path, "--out", self.out("v"), "--vq-model", "VQ-tiny",
                           "--trust-pickle"])
        self.assertEqual(rc, 0, err)

    def test_namespace_args_load_without_trust(self):
        """LlamaGen training checkpoints pickle an argparse.Namespace: allowed."""
        import argparse
        path = self.rewrite("t2i", lambda c: c.update(args=argparse.Namespace(
            gpt_model="GPT-tiny", image_size=128, cls_token_num=6), steps=5))
        rc, err = run_cli(["llamagen-gpt", "--ckpt", path, "--out", self.out("g"),
                           "--gpt-type", "t2i", "--t5-feature-dim", "32", "--codebook-size",
                           "64"])
        self.assertEqual(rc, 0, err)

    def test_llamagen_size_must_be_given(self):
        self.refuse(["llamagen-gpt", "--ckpt", self.files["t2i"], "--out", self.out("g")],
                    self.files["t2i"], "--gpt-model")

    def test_vq_bookkeeping_dropped_other_extras_refused(self):
        rc, err = run_cli(["vq", "--ckpt", self.files["vq"], "--out", self.out("v"),
                           "--vq-model", "VQ-tiny"])
        self.assertEqual(rc, 0, err)
        import safetensors_io
        stored = safetensors_io.load(os.path.join(self.out("v"), "model.safetensors"))
        self.assertNotIn("quantize.codebook_used", stored)
        self.assertIn("encoder.conv_in.weight", stored)  # the resampler training needs it
        path = self.rewrite("vq", lambda c: c["model"].update(
            {"quantize.ema_weight": torch.zeros(2)}))
        self.refuse(["vq", "--ckpt", path, "--out", self.out("v"), "--vq-model", "VQ-tiny"],
                    path, "quantize.ema_weight", "unexpected")

    def test_ta_tok_drops_encode_only_parts(self):
        rc, err = run_cli(["ta-tok", "--ckpt", self.files["ta_tok"], "--out", self.out("t"),
                           "--ta-tok-heads", "2"])
        self.assertEqual(rc, 0, err)
        import safetensors_io
        stored = safetensors_io.load(os.path.join(self.out("t"), "model.safetensors"))
        self.assertFalse([k for k in stored if k.startswith(("encoder.", "encode_task_layer.",
                                                             "bottleneck.in_linear"))])
        self.assertIn("decode_task_layer.2.bias", stored)

    def test_family_mismatches(self):
        base = ["--ta-tok", self.files["ta_tok"], "--vq", self.files["vq"], "--vq-model",
                "VQ-tiny", "--ta-tok-heads", "2"]
        self.refuse(["tar-family", "--out", self.out("f"), "--target", self.files["tar_256"],
                     "--drafter", self.files["tar_256"]] + base, "not half the target")
        path = self.rewrite("tar_512", lambda c: c["model"]["args"].update(vocab_size=65) or
                            c["model"]["sd"].update(
                                {"tok_embeddings.weight": torch.zeros(65, 32),
                                 "output.weight": torch.zeros(65, 32)}))
        self.refuse(["tar-family", "--out", self.out("f2"), "--target", path] + base,
                    self.files["vq"], "64 entries", "65")

    def test_a_file_given_to_the_wrong_option_is_named_by_what_it_is(self):
        """Each refusal names the file, the key that gave it away, what it is, what the option
        takes and what to do instead."""
        f = self.files
        tar = ["--ta-tok-heads", "2", "--vq-model", "VQ-tiny"]
        cases = [
            # A Tar AR-DTok .pth as a LlamaGen GPT (was: "name: expected a tensor, found str").
            (["llamagen-gpt", "--ckpt", f["tar_512"], "--out", self.out("a")]
             + tiny_upstream.t2i_flags()[:-2],
             (f["tar_512"] + ": model.name", "this is a Tar AR-DTok checkpoint",
              "not the LlamaGen GPT (c2i_*.pt / t2i_*.pt) llamagen-gpt --ckpt takes",
              "tar-family's --target or --drafter")),
            (["llamagen-family", "--out", self.out("b"), "--gpt", f["tar_512"], "--vq", f["vq"]]
             + tiny_upstream.t2i_flags(),
             (f["tar_512"] + ": model.name", "LlamaGen GPT (c2i_*.pt / t2i_*.pt) --gpt takes")),
            # A VQ checkpoint as --ta-tok (was: "model.sd: missing").
            (["tar-family", "--out", self.out("c"), "--target", f["tar_512"], "--ta-tok",
              f["vq"], "--vq", f["vq"]] + tar,
             (f["vq"] + ": quantize.embedding.weight", "this is a LlamaGen VQ tokenizer",
              "not Tar's TA-Tok (ta_tok.pth from csuhan/TA-Tok) that --ta-tok takes",
              "give it as --vq")),
            # TA-Tok as --target, a GPT as --vq.
            (["tar-family", "--out", self.out("d"), "--target", f["ta_tok"], "--ta-tok",
              f["ta_tok"], "--vq", f["vq"]] + tar,
             (f["ta_tok"] + ": model.sd", "this is Tar's TA-Tok", "--target takes",
              "give it as tar-family's --ta-tok")),
            (["llamagen-family", "--out", self.out("e"), "--gpt", f["t2i"], "--vq", f["t2i"]]
             + tiny_upstream.t2i_flags(),
             (f["t2i"] + ": cls_embedding.cap_proj.fc1.weight", "LlamaGen text-to-image GPT",
              "--vq takes", "llamagen-family --gpt FILE --gpt-type t2i")),
            # c2i converted as t2i and the reverse: the hint is --gpt-type.
            (["llamagen-gpt", "--ckpt", f["c2i"], "--out", self.out("f")]
             + tiny_upstream.t2i_flags()[:-2],
             (f["c2i"] + ": cls_embedding.embedding_table.weight", "a LlamaGen c2i GPT",
              "--gpt-type says t2i", "pass --gpt-type c2i (with vq_ds16_c2i.pt as --vq)")),
            (["llamagen-family", "--out", self.out("g"), "--gpt", f["t2i"], "--vq", f["vq"]]
             + tiny_upstream.c2i_flags(),
             (f["t2i"] + ": cls_embedding.cap_proj.fc1.weight", "a LlamaGen t2i GPT",
              "--gpt-type says c2i", "pass --gpt-type t2i")),
        ]
        for argv, fragments in cases:
            self.refuse(argv, *fragments)

    def test_gpt_type_is_read_off_the_keys_when_not_given(self):
        flags = tiny_upstream.t2i_flags()[:-2]
        i = flags.index("--gpt-type")
        rc, err = run_cli(["llamagen-gpt", "--ckpt", self.files["t2i"], "--out", self.out("g")]
                          + flags[:i] + flags[i + 2:])
        self.assertEqual(rc, 0, err)
        import json
        with open(os.path.join(self.out("g"), "config.json")) as f:
            self.assertEqual(json.load(f)["condition_mode"], "caption")

    def test_missing_inputs_are_named_before_anything_is_converted(self):
        f = self.files
        tar = ["--ta-tok-heads", "2", "--vq-model", "VQ-tiny"]
        self.refuse(["tar-family", "--out", self.out("f"), "--target", f["tar_512"], "--ta-tok",
                     f["ta_tok"], "--vq", "/nonexistent/vq_ds16_t2i.pt"] + tar,
                    "/nonexistent/vq_ds16_t2i.pt: no such file (--vq takes")
        self.refuse(["tar-family", "--out", self.out("f"), "--target", f["tar_512"], "--ta-tok",
                     f["ta_tok"], "--vq", f["vq"], "--mllm", "/nonexistent/Tar-1.5B"] + tar,
                    "/nonexistent/Tar-1.5B: no such directory (--mllm takes")
        self.refuse(["llamagen-family", "--out", self.out("f"), "--gpt", f["t2i"], "--vq",
                     f["vq"], "--t5", "/nonexistent/flan-t5-xl"] + tiny_upstream.t2i_flags(),
                    "/nonexistent/flan-t5-xl: no such directory (--t5 takes")
        self.refuse(["janus-family", "--out", self.out("f"), "--dir", "/nonexistent/Janus-Pro"],
                    "/nonexistent/Janus-Pro: no such directory (janus-family --dir takes")
        self.refuse(["tar-family", "--out", self.out("f"), "--target", self.tmp.name,
                     "--ta-tok", f["ta_tok"], "--vq", f["vq"]] + tar,
                    self.tmp.name + ": a directory; --target takes")
        self.assertFalse(os.path.exists(self.out("f")))

    def test_ta_tok_heads_are_never_guessed_silently(self):
        # The tiny decoder is 24 wide: not the released 1152, and the file does not say.
        self.refuse(["ta-tok", "--ckpt", self.files["ta_tok"], "--out", self.out("t")],
                    self.files["ta_tok"], "decoder.vision_model.embeddings.patch_embedding.weight",
                    "the decoder is 24 wide, not the released TA-Tok's 1152",
                    "pass --ta-tok-heads N")
        self.refuse(["tar-family", "--out", self.out("f"), "--target", self.files["tar_512"],
                     "--ta-tok", self.files["ta_tok"], "--vq", self.files["vq"], "--vq-model",
                     "VQ-tiny"], "pass --ta-tok-heads N")
        self.refuse(["ta-tok", "--ckpt", self.files["ta_tok"], "--out", self.out("t"),
                     "--ta-tok-heads", "5"], "the decoder is 24 wide, which --ta-tok-heads 5 does "
                                             "not divide")
        self.assertFalse(os.path.exists(self.out("t")))
        # The released width: Tar's 12 (Siglip2VisionConfig's default), and said.
        cfg = dict(tiny_upstream.TA_TOK, hidden=1152, n_head=12, n_layer=1, codebook_size=16)
        model = tt.TaTokDequantizer(cfg).eval()
        path = os.path.join(self.tmp.name, "ta_tok_1152.pth")
        tiny_upstream.upstream_layouts.ta_tok(path, model, torch.Generator().manual_seed(0))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = convert.main(["ta-tok", "--ckpt", path, "--out", self.out("w")])
        self.assertEqual(rc, 0)
        self.assertIn("width 1152, 12 heads (the released TA-Tok's", out.getvalue())
        import json
        with open(os.path.join(self.out("w"), "config.json")) as f:
            self.assertEqual(json.load(f)["n_head"], 12)

    def test_a_failed_conversion_leaves_no_partial_folder(self):
        """Written into a temporary sibling and renamed into place: a refusal after the target
        was written leaves neither the family folder nor the temporary one."""
        parent = self.out("fresh")
        out = os.path.join(parent, "repository", "tar")
        self.refuse(["tar-family", "--out", out, "--target", self.files["tar_512"], "--ta-tok",
                     self.files["ta_tok"], "--vq", self.files["c2i"], "--vq-model", "VQ-tiny",
                     "--ta-tok-heads", "2"], "--vq takes", "nothing written")
        self.assertFalse(os.path.exists(parent))  # the parents it made are gone too
        self.refuse(["vq", "--ckpt", self.files["t2i"], "--out", self.out("v")], "LlamaGen")
        self.assertEqual(os.listdir(os.path.dirname(self.out("v"))) if os.path.exists(
            os.path.dirname(self.out("v"))) else [], [])

    def test_a_component_converted_again_replaces_its_files_only(self):
        out = self.out("v")
        self.assertEqual(run_cli(["vq", "--ckpt", self.files["vq"], "--out", out, "--vq-model",
                                  "VQ-tiny"])[0], 0)
        with open(os.path.join(out, "notes.txt"), "w") as f:
            f.write("mine")
        path = self.rewrite("vq", lambda c: c["model"].update(
            {"quantize.embedding.weight": torch.ones(64, 8)}))
        rc, err = run_cli(["vq", "--ckpt", path, "--out", out, "--vq-model", "VQ-tiny"])
        self.assertEqual(rc, 0, err)
        import safetensors_io
        stored = safetensors_io.load(os.path.join(out, "model.safetensors"))
        self.assertTrue(torch.equal(stored["quantize.embedding.weight"], torch.ones(64, 8)))
        self.assertEqual(read(os.path.join(out, "notes.txt")), "mine")
        self.assertIn(path, read(os.path.join(out, "source.json")))
        self.assertEqual([n for n in os.listdir(os.path.dirname(out)) if "converting" in n], [])

    def test_t2i_null_rows_are_sliced(self):
        rc, err = run_cli(["llamagen-gpt", "--ckpt", self.files["t2i"], "--out", self.out("g")]
                          + tiny_upstream.t2i_flags()[:-2])
        self.assertEqual(rc, 0, err)
        import safetensors_io
        stored = safetensors_io.load(os.path.join(self.out("g"), "model.safetensors"))
        original = torch.load(self.files["t2i"])["model"]["cls_embedding.uncond_embedding"]
        self.assertEqual(original.shape[0], 120)
        self.assertTrue(torch.equal(stored["cls_embedding.uncond_embedding"], original[:6]))


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def snapshot(directory):
    """{relative path: bytes} of every file under directory."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            files[os.path.relpath(path, directory)] = read(path, "rb")
    return files


class TarFamilyUpdates(unittest.TestCase):
    """convert.py tar-family --mllm (Tar's MLLM into FAMILY/mllm, named in family.json: no
    hand edit), a family converted again keeping what it had (mllm, resamplers, eagle, fields
    family.json carries), and refusals that leave the family as it was."""

    @classmethod
    def setUpClass(cls):
        import convert_tiny_families
        tiny_upstream.register_tiny_sizes()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = tiny_upstream.write_files(os.path.join(cls.tmp.name, "upstream"))
        cls.mllm = os.path.join(cls.tmp.name, "Tar-tiny")
        convert_tiny_families.write_tiny_mllm(cls.mllm, tiny_upstream.TA_TOK["codebook_size"])

    def tar_family(self, out, *extra):
        """(exit status, stdout, stderr) of tar-family on the tiny files."""
        f = self.files
        argv = ["tar-family", "--out", out, "--target", f["tar_512"], "--drafter", f["tar_256"],
                "--ta-tok", f["ta_tok"], "--vq", f["vq"], "--vq-model", "VQ-tiny",
                "--ta-tok-heads", "2"] + list(extra)
        out_text, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err):
            rc = convert.main(argv)
        return rc, out_text.getvalue(), err.getvalue()

    def family_json(self, out):
        import json
        return json.loads(read(os.path.join(out, "family.json")))

    def test_mllm_is_converted_and_named(self):
        import json
        out = os.path.join(self.tmp.name, "mllm_named", "tar")
        rc, text, err = self.tar_family(out, "--mllm", self.mllm)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.family_json(out)["components"]["mllm"], "mllm")
        config = json.loads(read(os.path.join(out, "mllm", "config.json")))
        self.assertEqual((config["image_token_offset"], config["image_token_count"]), (264, 96))
        self.assertEqual(read(os.path.join(out, "mllm", "tokenizer.json")),
                         read(os.path.join(self.mllm, "tokenizer.json")))
        self.assertIn("components target, drafter, ta_tok, vq, mllm", text)

    def test_converting_again_keeps_what_the_family_had(self):
        import json
        import family
        out = os.path.join(self.tmp.name, "again", "tar")
        rc, _, err = self.tar_family(out, "--mllm", self.mllm)
        self.assertEqual(rc, 0, err)
        mllm_bytes = snapshot(os.path.join(out, "mllm"))
        # What the trainers add (an EAGLE head as wide as the target, with its notes) and a
        # field set by hand.
        os.makedirs(os.path.join(out, "eagle"))
        with open(os.path.join(out, "eagle", "config.json"), "w") as f:
            json.dump({"dim": 32, "n_head": 2}, f)
        with contextlib.redirect_stdout(io.StringIO()):
            family.add_components(out, ["eagle"], {"eagle": {"steps": 1}})
        doc = self.family_json(out)
        doc["pipeline"] = ["mllm", "ta_tok"]
        with open(os.path.join(out, "family.json"), "w") as f:
            json.dump(doc, f)
        # Resamplers trained elsewhere (train_resamplers.py --out): added by converting again,
        # without --mllm.
        pair = os.path.join(self.tmp.name, "pair")
        for name, kind in (("upsampler", "up"), ("downsampler", "down")):
            os.makedirs(os.path.join(pair, name))
            with open(os.path.join(pair, name, "config.json"), "w") as f:
                json.dump({"kind": kind, "codebook_size": tiny_upstream.VOCAB}, f)
        rc, text, err = self.tar_family(out, "--resamplers", pair)
        self.assertEqual(rc, 0, err)
        doc = self.family_json(out)
        self.assertEqual(set(doc["components"]), {"target", "drafter", "ta_tok", "vq", "mllm",
                                                  "eagle", "upsampler", "downsampler"})
        self.assertEqual(doc["pipeline"], ["mllm", "ta_tok"])
        self.assertEqual(doc["converted"]["eagle"], {"steps": 1})
        self.assertEqual(snapshot(os.path.join(out, "mllm")), mllm_bytes)
        self.assertIn(f"kept from {out}/family.json: mllm ({out}/mllm), eagle ({out}/eagle)",
                      text)
        # Again without --resamplers: they are kept too; a kept component whose directory is
        # gone is dropped, and said.
        import shutil
        shutil.rmtree(os.path.join(out, "eagle"))
        rc, text, err = self.tar_family(out)
        self.assertEqual(rc, 0, err)
        self.assertIn("upsampler", self.family_json(out)["components"])
        self.assertNotIn("eagle", self.family_json(out)["components"])
        self.assertNotIn("eagle", self.family_json(out)["converted"])
        self.assertIn(f"dropped from {out}/family.json: eagle ({out}/eagle is gone)", text)
        self.assertFalse([n for n in os.listdir(os.path.dirname(out)) if "converting" in n])

    def test_a_failed_update_leaves_the_family_as_it_was(self):
        import json
        out = os.path.join(self.tmp.name, "kept_safe", "tar")
        rc, _, err = self.tar_family(out, "--mllm", self.mllm)
        self.assertEqual(rc, 0, err)
        before = snapshot(out)
        # A VQ whose codebook does not fit, refused after the new target was written.
        rc, _, err = self.tar_family(out, "--vq", self.files["t2i"])
        self.assertEqual(rc, 2, err)
        self.assertIn(f"{out} left as it was", err)
        self.assertEqual(snapshot(out), before)
        # A kept component that no longer fits: refused, naming it and what to do.
        os.makedirs(os.path.join(out, "eagle"))
        with open(os.path.join(out, "eagle", "config.json"), "w") as f:
            json.dump({"dim": 16}, f)
        doc = self.family_json(out)
        doc["components"]["eagle"] = "eagle"
        with open(os.path.join(out, "family.json"), "w") as f:
            json.dump(doc, f)
        before = snapshot(out)
        rc, _, err = self.tar_family(out)
        self.assertEqual(rc, 2, err)
        self.assertIn(os.path.join(out, "eagle", "config.json") + ": dim 16 differs from the "
                      "target's 32", err)
        self.assertIn("train it again with train_eagle_head.py, or remove", err)
        self.assertEqual(snapshot(out), before)
        # A component tar-family cannot check.
        doc["components"]["t5"] = doc["components"].pop("eagle")
        with open(os.path.join(out, "family.json"), "w") as f:
            json.dump(doc, f)
        rc, _, err = self.tar_family(out)
        self.assertEqual(rc, 2, err)
        self.assertIn("components.t5: tar-family does not make t5", err)
        self.assertFalse([n for n in os.listdir(os.path.dirname(out)) if "converting" in n])

    def test_mllm_refusals(self):
        import convert_tiny_families
        import shutil
        no_tokenizer = os.path.join(self.tmp.name, "Tar-no-tokenizer")
        shutil.copytree(self.mllm, no_tokenizer)
        os.remove(os.path.join(no_tokenizer, "tokenizer.json"))
        out = os.path.join(self.tmp.name, "refused", "tar")
        rc, _, err = self.tar_family(out, "--mllm", no_tokenizer)
        self.assertEqual(rc, 2, err)
        self.assertIn(os.path.join(no_tokenizer, "tokenizer.json") + ": missing", err)
        self.assertFalse(os.path.exists(os.path.dirname(out)))
        fewer = os.path.join(self.tmp.name, "Tar-64-codes")
        convert_tiny_families.write_tiny_mllm(fewer, 64)
        rc, _, err = self.tar_family(out, "--mllm", fewer)
        self.assertEqual(rc, 2, err)
        self.assertIn("tokenizer.json: added_tokens: 64 image tokens <I0>..<I63>, but the "
                      "family's TA-Tok codebook has 96 codes", err)
        janus_dir = os.path.join(self.tmp.name, "janus")
        convert_tiny_families.write_tiny_janus(janus_dir)
        rc, _, err = self.tar_family(out, "--mllm", janus_dir)
        self.assertEqual(rc, 2, err)
        self.assertIn("config.json: model_type: 'multi_modality'", err)
        self.assertIn("this is Janus-Pro", err)
        self.assertIn("the Hugging Face Qwen2 / LLaMA language model directory --mllm takes", err)
        self.assertFalse(os.path.exists(os.path.dirname(out)))

    def test_a_qwen2_directory_given_to_janus_family(self):
        rc, err = run_cli(["janus-family", "--dir", self.mllm, "--out",
                           os.path.join(self.tmp.name, "janus_from_qwen")])
        self.assertEqual(rc, 2, err)
        for fragment in (os.path.join(self.mllm, "config.json") + ": model_type: 'qwen2'",
                         "this is a Hugging Face Qwen2 / LLaMA language model",
                         "not the Janus-Pro directory (deepseek-ai/Janus-Pro-1B / -7B) "
                         "janus-family --dir takes", "tar-family's --mllm"):
            self.assertIn(fragment, err)


class HfCausalLmConverter(unittest.TestCase):
    """tools/convert/hf_causal_lm.py on tiny Hugging Face directories written here: its output
    computes the reference's logits (through a model built from the converted tensors with the
    reference's interleaved-rotary counterpart), shards are read, and every departure from the
    layout is refused naming the file and the key."""

    CFG = dict(model_type="qwen2", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, intermediate_size=48, vocab_size=64, rms_norm_eps=1e-6,
               rope_theta=1000000.0, tie_word_embeddings=True, max_position_embeddings=32)

    def write(self, name, cfg=None, edit=None, shards=False, file_cfg=None, tokenizer=True):
        """tokenizer: write a tokenizer.json (without image tokens)."""
        import json
        import qwen2
        import safetensors_io
        cfg = dict(self.CFG, **(cfg or {}))
        torch.manual_seed(0)
        model = qwen2.CausalLm(cfg).eval()
        state = dict(model.state_dict())
        if edit:
            edit(state)
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d, exist_ok=True)
        if tokenizer:
            self.write_tokenizer(d, {})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(dict(cfg, **(file_cfg or {})), f)  # file_cfg: what the file claims
        if shards:
            keys = sorted(state)
            halves = {"model-00001-of-00002.safetensors": keys[::2],
                      "model-00002-of-00002.safetensors": keys[1::2]}
            for shard, names in halves.items():
                safetensors_io.save({k: state[k] for k in names}, os.path.join(d, shard))
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                json.dump({"weight_map": {k: sh for sh, ns in halves.items() for k in ns}}, f)
        else:
            safetensors_io.save(state, os.path.join(d, "model.safetensors"))
        return d, model

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def convert(self, d):
        return run_cli(["hf-causal-lm", "--dir", d, "--out", d + "_out", "--dtype", "f32"])

    def refuse(self, d, *fragments):
        rc, err = self.convert(d)
        self.assertEqual(rc, 2, err)
        for fragment in fragments:
            self.assertIn(fragment, err)

    def test_converted_weights_give_the_reference_logits(self):
        import safetensors_io
        for shards in (False, True):
            d, model = self.write(f"ok_{shards}", shards=shards)
            rc, err = self.convert(d)
            self.assertEqual(rc, 0, err)
            ours = safetensors_io.load(os.path.join(d + "_out", "model.safetensors"))
            # The converted q rows, rotated as interleaved pairs, give the reference's q.
            head_dim, x = 8, torch.randn(3, 32)
            wq_hf = model.state_dict()["model.layers.0.self_attn.q_proj.weight"]
            wq = ours["layers.0.attention.wqkv.weight"][:32]
            cos, sin = __import__("qwen2").rotary(torch.arange(3), head_dim, 1e6)
            q_hf = (x @ wq_hf.t()).view(3, 4, head_dim)
            q_hf = q_hf * cos[:, None] + __import__("qwen2").rotate_half(q_hf) * sin[:, None]
            q = (x @ wq.t()).view(3, 4, head_dim // 2, 2)
            c, s_ = cos[:, None, : head_dim // 2], sin[:, None, : head_dim // 2]
            q = torch.stack([q[..., 0] * c - q[..., 1] * s_, q[..., 1] * c + q[..., 0] * s_], -1)
            reorder = torch.stack([torch.arange(4), torch.arange(4) + 4], 1).reshape(-1)
            self.assertTrue(torch.allclose(q.reshape(3, 4, head_dim), q_hf[..., reorder],
                                           atol=1e-5))
            self.assertIn("layers.1.attention.wqkv.bias", ours)
            self.assertNotIn("output.weight", ours)  # tied: the engine reads the embedding

    def write_tokenizer(self, d, image_ids):
        import json
        added = [dict(id=60, content="<|im_start|>", special=True)]
        added += [dict(id=i, content=f"<I{k}>", special=False) for k, i in image_ids.items()]
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(dict(added_tokens=added, model=dict(type="BPE")), f)

    def test_image_tokens_of_the_tokenizer_are_named(self):
        import json
        d, _ = self.write("images")
        self.write_tokenizer(d, {0: 40, 1: 41, 2: 42, 3: 43})
        rc, err = self.convert(d)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(d + "_out", "config.json")) as f:
            config = json.load(f)
        self.assertEqual((config["image_token_offset"], config["image_token_count"]), (40, 4))
        with open(os.path.join(d + "_out", "tokenizer.json")) as a, \
                open(os.path.join(d, "tokenizer.json")) as b:
            self.assertEqual(a.read(), b.read())
        # A tokenizer without image tokens: a text-only component, and said.
        d, _ = self.write("plain")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(convert.main(["hf-causal-lm", "--dir", d, "--out", d + "_out"]), 0)
        self.assertIn("no image tokens <I0>.. in tokenizer.json", out.getvalue())
        with open(os.path.join(d + "_out", "config.json")) as f:
            self.assertNotIn("image_token_count", json.load(f))
        d, _ = self.write("gap")
        self.write_tokenizer(d, {0: 40, 1: 41, 2: 43})
        self.refuse(d, "tokenizer.json: added_tokens", "consecutive ids")
        d, _ = self.write("past")
        self.write_tokenizer(d, {0: 62, 1: 63, 2: 64})
        self.refuse(d, "tokenizer.json: added_tokens", "past config.json's vocab_size 64")

    def test_refusals_name_the_file_and_key(self):
        d, _ = self.write("type", cfg=dict(model_type="gpt2"))
        self.refuse(d, "config.json: model_type: 'gpt2': only llama, qwen2 are supported")
        d, _ = self.write("scaled", cfg=dict(rope_scaling={"type": "yarn", "factor": 4}))
        self.refuse(d, "rope_scaling", "only unscaled")
        d, _ = self.write("missing",
                          edit=lambda s: s.pop("model.layers.1.self_attn.k_proj.bias"))
        self.refuse(d, "model.layers.1.self_attn.k_proj.bias: missing (expected shape [16])")
        d, _ = self.write("shape", edit=lambda s: s.update(
            {"model.layers.0.mlp.up_proj.weight": torch.zeros(40, 32)}))
        self.refuse(d, "model.layers.0.mlp.up_proj.weight: shape [40, 32] disagrees")
        d, _ = self.write("extra", edit=lambda s: s.update({"visual.proj": torch.zeros(2)}))
        self.refuse(d, "visual.proj: unexpected tensor")
        d, _ = self.write("layers", file_cfg=dict(num_hidden_layers=1))
        self.refuse(d, "model.layers.1.input_layernorm.weight",
                    "more layers than config.json's 1")
        d, _ = self.write("untied_head", edit=lambda s: s.update(
            {"lm_head.weight": torch.ones(64, 32)}))
        self.refuse(d, "lm_head.weight: differs from model.embed_tokens.weight")
        empty = os.path.join(self.tmp.name, "empty")
        os.makedirs(empty)
        with open(os.path.join(empty, "config.json"), "w") as f:
            f.write("{}")
        self.refuse(empty, "model_type")

    def test_a_directory_without_tokenizer_json_is_refused(self):
        """The server would refuse it later (naming image_token_count): refused here, naming
        the file and what to do, and nothing is written."""
        d, _ = self.write("no_tokenizer", tokenizer=False)
        rc, err = self.convert(d)
        self.assertEqual(rc, 2, err)
        self.assertIn(os.path.join(d, "tokenizer.json") + ": missing", err)
        self.assertIn("download it with the weights", err)
        self.assertFalse(os.path.exists(d + "_out"))

    def test_a_janus_or_missing_directory_is_named_as_such(self):
        import convert_tiny_families
        janus_dir = os.path.join(self.tmp.name, "janus")
        convert_tiny_families.write_tiny_janus(janus_dir)
        self.refuse(janus_dir, os.path.join(janus_dir, "config.json") + ": model_type",
                    "this is Janus-Pro", "janus-family --dir")
        missing = os.path.join(self.tmp.name, "not_downloaded")
        self.refuse(missing, missing + ": no such directory (hf-causal-lm --dir takes")
        empty = os.path.join(self.tmp.name, "no_config")
        os.makedirs(empty)
        self.refuse(empty, os.path.join(empty, "config.json") + ": missing",
                    "huggingface-cli download")


class HfT5EncoderConverter(unittest.TestCase):
    """tools/convert/hf_t5_encoder.py: a full T5 checkpoint's decoder and LM head are dropped,
    the encoder kept under its own names, and departures from T5 v1.1 refused by name."""

    CFG = dict(model_type="t5", feed_forward_proj="gated-gelu", d_model=16, d_kv=4, d_ff=24,
               num_layers=2, num_heads=4, vocab_size=40, relative_attention_num_buckets=32,
               relative_attention_max_distance=128, layer_norm_epsilon=1e-6)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, cfg=None, edit=None):
        import json
        import safetensors_io
        import t5
        model = t5.T5Encoder(self.CFG)
        state = dict(model.state_dict())
        state["decoder.block.0.layer.0.layer_norm.weight"] = torch.ones(16)
        state["lm_head.weight"] = torch.zeros(40, 16)
        if edit:
            edit(state)
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(dict(self.CFG, **(cfg or {})), f)
        safetensors_io.save(state, os.path.join(d, "model.safetensors"))
        return d

    def run_on(self, d):
        return run_cli(["hf-t5-encoder", "--dir", d, "--out", d + "_out", "--dtype", "f32"])

    def test_keeps_the_encoder_only(self):
        import safetensors_io
        d = self.write("ok")
        rc, err = self.run_on(d)
        self.assertEqual(rc, 0, err)
        names = set(safetensors_io.load(os.path.join(d + "_out", "model.safetensors")))
        self.assertIn("embed_tokens.weight", names)
        self.assertIn("block.0.layer.0.SelfAttention.relative_attention_bias.weight", names)
        self.assertFalse(any(n.startswith(("decoder", "lm_head", "encoder")) for n in names))

    def test_refusals(self):
        for cfg, edit, fragment in (
                (dict(model_type="bert"), None, "model_type: 'bert': expected 't5'"),
                (dict(feed_forward_proj="relu"), None, "only T5 v1.1's 'gated-gelu'"),
                (None, lambda s: s.pop(
                    "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
                 "relative_attention_bias.weight: missing"),
                (None, lambda s: s.update({"encoder.extra": torch.zeros(1)}),
                 "encoder.extra: unexpected tensor")):
            d = self.write(fragment[:12].replace(" ", "_").replace("'", ""), cfg, edit)
            rc, err = self.run_on(d)
            self.assertEqual(rc, 2, err)
            self.assertIn(fragment, err)


class JanusConverter(unittest.TestCase):
    """convert.py janus-family on a tiny Janus-Pro directory (pytorch_model.bin as upstream
    ships it): what it keeps, what it skips, and refusals naming the file and the key."""

    @classmethod
    def setUpClass(cls):
        import convert_tiny_families
        tiny_upstream.register_tiny_sizes()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.hf = os.path.join(cls.tmp.name, "janus_pro")
        convert_tiny_families.write_tiny_janus(cls.hf)

    def variant(self, edit_state=None, edit_config=None, edit_tokenizer=None):
        """A copy of the tiny directory with its state dict / config / tokenizer edited."""
        import json
        import shutil
        d = tempfile.mkdtemp(dir=self.tmp.name)
        shutil.copytree(self.hf, d, dirs_exist_ok=True)
        if edit_state:
            state = torch.load(os.path.join(d, "pytorch_model.bin"), weights_only=False)
            edit_state(state)
            torch.save(state, os.path.join(d, "pytorch_model.bin"))
        for name, edit in (("config.json", edit_config), ("tokenizer.json", edit_tokenizer)):
            if edit:
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    doc = json.load(f)
                edit(doc)
                with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                    json.dump(doc, f, ensure_ascii=False)
        return d

    def convert(self, directory):
        out = os.path.join(directory + "_out")
        return run_cli(["janus-family", "--dir", directory, "--out", out, "--vq-model",
                        "VQ-tiny", "--image-size", "8", "--dtype", "f32"]), out

    def test_keeps_the_generation_path_and_skips_understanding(self):
        import json
        import safetensors_io
        (rc, err), out = self.convert(self.hf)
        self.assertEqual(rc, 0, err)
        keys = set(safetensors_io.load(os.path.join(out, "target", "model.safetensors")))
        self.assertIn("gen_embed.weight", keys)
        self.assertIn("gen_aligner.layers.2.bias", keys)
        self.assertIn("gen_head.vision_head.weight", keys)
        self.assertIn("layers.1.attention.wqkv.weight", keys)
        self.assertFalse([k for k in keys if "vision_model" in k or k.startswith("aligner")
                          or k == "output.weight"])
        with open(os.path.join(out, "target", "config.json")) as f:
            config = json.load(f)
        self.assertEqual((config["architecture"], config["pad_id"], config["bos_id"]),
                         ("janus", 258, 256))
        with open(os.path.join(out, "family.json")) as f:
            family = json.load(f)
        self.assertEqual((family["grid_size"], family["default_cfg_scale"],
                          family["pixel_rounding"]), (4, 5.0, "truncate"))
        self.assertTrue(os.path.exists(os.path.join(out, "target", "tokenizer.json")))
        self.assertTrue(os.path.exists(os.path.join(out, "vq", "model.safetensors")))
        # GSD's bound: the 6.10% quantile of squared distances between the codes' LLaMA inputs
        # (all 64 codes here), computed independently.
        import numpy as np
        t = safetensors_io.load(os.path.join(out, "target", "model.safetensors"))
        x = t["gen_embed.weight"].double().numpy()
        x = x @ t["gen_aligner.layers.0.weight"].double().numpy().T + t["gen_aligner.layers.0.bias"].double().numpy()
        x = np.asarray(F.gelu(torch.from_numpy(x)))
        x = x @ t["gen_aligner.layers.2.weight"].double().numpy().T + t["gen_aligner.layers.2.bias"].double().numpy()
        d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)[np.triu_indices(len(x), k=1)]
        self.assertAlmostEqual(family["method_defaults"]["gsd"]["max_embedding_distance"],
                               float(np.quantile(d2, 1000 / 16384)), delta=1e-3)

    def test_the_converted_component_loads_back_as_the_reference(self):
        """janus.load_component (the teacher for heads trained on a converted family) undoes
        the converter's layout: the same image logits as the upstream model."""
        import janus
        (rc, err), out = self.convert(self.hf)
        self.assertEqual(rc, 0, err)
        import json
        with open(os.path.join(self.hf, "config.json")) as f:
            cfg = json.load(f)
        original = janus.Janus(cfg).eval()
        state = torch.load(os.path.join(self.hf, "pytorch_model.bin"), weights_only=False)
        original.load_state_dict({k: v for k, v in state.items()
                                  if k.startswith(("language_model.", "gen_embed", "gen_aligner",
                                                   "gen_head"))})
        loaded = janus.load_component(os.path.join(out, "target"))
        ids = torch.tensor([256, 40, 41, 42, 43, 262])
        pair = janus.guidance_pair(ids, 258)
        codes = torch.tensor([[3, 9, 27, 1]]).expand(2, 4)
        with torch.no_grad():
            want = original.image_logits(pair, codes)
            got = loaded.image_logits(pair, codes)
        self.assertLess(float((want - got).abs().max()), 1e-4 * float(want.abs().max()))

    def test_refusals_name_the_file_and_key(self):
        cases = [
            (self.variant(edit_state=lambda s: s.pop("gen_head.vision_head.bias")),
             ("pytorch_model.bin", "gen_head.vision_head.bias: missing")),
            (self.variant(edit_state=lambda s: s.update(
                {"gen_embed.weight": torch.zeros(64, 9)})),
             ("pytorch_model.bin", "gen_embed.weight: shape [64, 9]")),
            (self.variant(edit_state=lambda s: s.pop("gen_vision_model.decoder.conv_out.weight")),
             ("gen_vision_model.decoder.conv_out.weight: missing",)),
            (self.variant(edit_state=lambda s: s.update({"gen_extra.weight": torch.zeros(2)})),
             ("gen_extra.weight: unexpected tensor",)),
            (self.variant(edit_config=lambda c: c["gen_aligner_config"]["params"].update(
                n_embed=32)), ("config.json", "gen_aligner_config.params.n_embed: 32, expected 64")),
            (self.variant(edit_config=lambda c: c.pop("gen_head_config")),
             ("config.json", "gen_head_config: missing")),
            (self.variant(edit_tokenizer=lambda t: t.update(added_tokens=t["added_tokens"][:2])),
             ("tokenizer.json", "added_tokens", "<｜▁pad▁｜>")),
            (self.variant(edit_state=lambda s: s.update({"evil": Evil()})),
             ("pytorch_model.bin", "--trust-pickle")),
        ]
        for directory, fragments in cases:
            (rc, err), _ = self.convert(directory)
            self.assertEqual(rc, 2, err)
            for fragment in fragments:
                self.assertIn(fragment, err)


class TaTokReferenceIsUpstreamsFormula(unittest.TestCase):
    """tools/reference/ta_tok.py against an independent formulation of what Tar runs:
    transformers' Siglip2 vision model (eager attention = torch's MultiheadAttention here),
    after SimVQ's get_codebook_entry and Bottleneck.project_out."""

    def test_matches(self):
        torch.manual_seed(0)
        cfg = dict(tiny_upstream.TA_TOK)
        model = tt.TaTokDequantizer(cfg).eval()
        tiny_upstream.spread_init(model, torch.Generator().manual_seed(3))
        for side in (5, 3):
            ids = torch.randint(0, cfg["codebook_size"], (2, side * side))
            with torch.no_grad():
                ours = model(ids)
                theirs = self.upstream(model, cfg, ids)
            self.assertLess((ours - theirs).abs().max().item(), 1e-5)

    @staticmethod
    def upstream(model, cfg, ids):
        reg = model.bottleneck.regularizer
        emb = F.linear(reg.embedding.weight, reg.embedding_proj.weight, reg.embedding_proj.bias)
        emb = F.normalize(emb, p=2, dim=-1)
        z_q = F.normalize(F.embedding(ids.flatten(), emb), p=2, dim=-1).reshape(*ids.shape, -1)
        z = model.bottleneck.out_linear(z_q)
        vm = model.decoder.vision_model
        p = int(ids.shape[1] ** 0.5)
        side = int(cfg["num_patches"] ** 0.5)
        pos = vm.embeddings.position_embedding.weight.reshape(side, side, -1).permute(2, 0, 1)
        pos = F.interpolate(pos[None], size=(p, p), mode="bilinear", align_corners=False,
                            antialias=True).reshape(cfg["hidden"], p * p).transpose(0, 1)
        h = vm.embeddings.patch_embedding(z) + pos
        for layer in vm.encoder.layers:
            a = layer.self_attn
            mha = torch.nn.MultiheadAttention(cfg["hidden"], cfg["n_head"], batch_first=True)
            mha.in_proj_weight.data = torch.cat([a.q_proj.weight, a.k_proj.weight,
                                                 a.v_proj.weight])
            mha.in_proj_bias.data = torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias])
            mha.out_proj.weight.data, mha.out_proj.bias.data = a.out_proj.weight, a.out_proj.bias
            x = F.layer_norm(h, (cfg["hidden"],), layer.layer_norm1.weight,
                             layer.layer_norm1.bias, cfg["layer_norm_eps"])
            h = h + mha(x, x, x, need_weights=False)[0]
            x = F.layer_norm(h, (cfg["hidden"],), layer.layer_norm2.weight,
                             layer.layer_norm2.bias, cfg["layer_norm_eps"])
            h = h + layer.mlp.fc2(F.gelu(layer.mlp.fc1(x), approximate="tanh"))
        h = F.layer_norm(h, (cfg["hidden"],), vm.post_layernorm.weight, vm.post_layernorm.bias,
                         cfg["layer_norm_eps"])
        task = model.decode_task_layer
        return task[2](torch.tanh(task[0](h)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
