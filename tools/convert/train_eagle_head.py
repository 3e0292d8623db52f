#!/usr/bin/env python3
"""Trains an EAGLE head for a converted family from a folder of your own images, and adds it to
the family: the server then offers eagle, and the methods built on its head (lantern,
lantern++, peanut), for the family. The same recipe as the bundled family's head
(tools/synth/train_eagle.py, EAGLE-1's): `fc` over [the token's embedding, the target's
feature], one decoder block, trained on the frozen target's features by teacher forcing with
SmoothL1 on the next feature plus 0.1 x the cross-entropy against the target's next-token
distribution, read out through the target's own head.

  /usr/bin/python3 tools/convert/train_eagle_head.py --family models/janus-pro --images my_images/
      [--steps 2000] [--batch 4] [--lr 1e-3] [--heldout_fraction 0.1] [--seed 0] [--out DIR]

Targets: Tar AR-DTok and LlamaGen GPT components (tools/reference/transformer.py reads them as
converted) and Janus-Pro (tools/reference/janus.py's load_component). Every image is
centre-cropped, resized to the target's image size (grid x the VQ's downsampling) and
tokenised once with the family's VQ encoder; the target reads each token sequence after its
unconditional condition (LlamaGen / Tar: the null class or null features, as classifier-free
guidance's second row; Janus-Pro: the begin-of-sentence id, four pad ids and
<begin_of_image>, the guidance row of an empty caption): images carry no caption, and the
head learns the target's image statistics. A seeded share of the images is held out; the
head's top-1 / top-3 agreement with the target's next token on them is printed beside the
floor of always answering the most frequent token.

Writes FAMILY/eagle/ (config.json, model.safetensors, source.json: what
engine/model/eagle_head.cc loads) and FAMILY/eagle_report.json, and adds eagle to
FAMILY/family.json; with --out DIR they go to DIR/eagle instead. Deterministic for a fixed
--seed on a CPU. Cost: one step runs the target's forward over --batch whole images and the
head's backward; for Janus-Pro-1B on a GPU see docs/serving-upstream-checkpoints.md.
Errors (no images, a family whose target is not one of the above, a VQ without its encoder)
name the file and exit with status 2.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import component  # noqa: E402
import eagle_head as eh  # noqa: E402
import family  # noqa: E402
import janus  # noqa: E402
import safetensors_io  # noqa: E402
import train_resamplers as images_io  # noqa: E402  (images, VQ encoding, splits, lr)
import transformer as tr  # noqa: E402
import upstream  # noqa: E402

TOOL = "tools/convert/train_eagle_head.py"
Error = upstream.ConversionError
JANUS_NULL_PADS = 4  # the pads between <BOS> and <begin_of_image> in an empty caption's row


def read_json(path):
    if not os.path.isfile(path):
        raise Error(f"{path}: no such file")
    with open(path) as f:
        return json.load(f)


class LlamaGenTeacher:
    """A Tar AR-DTok or LlamaGen GPT component, read by the reference as converted."""

    def __init__(self, directory, grid):
        self.cfg = read_json(os.path.join(directory, "config.json"))
        self.model = tr.Transformer(self.cfg).eval()
        state = safetensors_io.load(os.path.join(directory, "model.safetensors"))
        self.model.load_state_dict({k: v.float() for k, v in state.items()})
        self.rows, self.grid = self.cfg["cls_token_num"], grid
        self.codes = self.cfg["vocab_size"]

    def hidden(self, tokens):
        """Final-norm features [B, rows + n - 1, D] over the null condition and tokens[:, :-1]."""
        b, device = tokens.size(0), tokens.device
        if self.cfg["condition_mode"] == "class_label":
            cond = torch.zeros(b, dtype=torch.long, device=device)
        else:
            cond = torch.zeros(b, self.rows, self.cfg["cond_dim"], device=device)
        _, h = self.model(cond, torch.ones(b, dtype=torch.bool, device=device), tokens[:, :-1],
                          return_hidden=True)
        return h

    def embed(self, tokens):
        return self.model.tok_embeddings(tokens)

    def readout(self, h):
        return self.model.output(h).float()


class JanusTeacher:
    """A converted Janus-Pro component (architecture "janus")."""

    def __init__(self, directory, grid):
        self.cfg = read_json(os.path.join(directory, "config.json"))
        for key in ("bos_id", "pad_id", "image_start_id"):
            if key not in self.cfg:
                raise Error(f"{directory}/config.json: {key} missing (convert the checkpoint "
                            f"again with convert.py janus-family, which writes it)")
        self.model = janus.load_component(directory)
        self.prompt = torch.tensor([self.cfg["bos_id"]] + [self.cfg["pad_id"]] * JANUS_NULL_PADS +
                                   [self.cfg["image_start_id"]])
        self.rows, self.grid = len(self.prompt), grid
        self.codes = self.cfg["image_token_count"]

    def embed(self, tokens):
        return self.model.gen_aligner(self.model.gen_embed(tokens))

    def hidden(self, tokens):
        text = self.model.language_model.model.embed_tokens(
            self.prompt.to(tokens.device).expand(tokens.size(0), -1))
        return self.model.hidden(torch.cat([text, self.embed(tokens[:, :-1])], dim=1))

    def readout(self, h):
        return self.model.gen_head(h).float()


def load_teacher(family_dir):
    """(teacher, VQ directory, VQ config) of a family directory."""
    doc = read_json(os.path.join(family_dir, "family.json"))
    components = doc.get("components") or {}
    for key in ("target", "vq"):
        if key not in components:
            raise Error(f"{family_dir}/family.json: components.{key} missing")
    target_dir = os.path.join(family_dir, components["target"])
    config = read_json(os.path.join(target_dir, "config.json"))
    architecture = config.get("architecture", "llamagen")
    if architecture == "janus":
        if not isinstance(doc.get("grid_size"), int):
            raise Error(f"{family_dir}/family.json: grid_size missing (Janus-Pro's grid)")
        teacher = JanusTeacher(target_dir, doc["grid_size"])
    elif architecture == "llamagen":
        teacher = LlamaGenTeacher(target_dir, config["grid_size"])
    else:
        raise Error(f"{target_dir}/config.json: architecture {architecture!r}: heads are trained "
                    f"here for llamagen (Tar, LlamaGen) and janus targets")
    for p in teacher.model.parameters():
        p.requires_grad_(False)
    vq_dir = os.path.join(family_dir, components["vq"])
    return teacher, vq_dir, read_json(os.path.join(vq_dir, "config.json"))


def head_step(head, teacher, tokens):
    """Teacher-forced head outputs: (predicted features, the target's, the target's logits at
    them). Head position j pairs the feature that predicted token j with token j's embedding
    and predicts the feature that predicts token j + 1."""
    n, rows = tokens.size(1), teacher.rows
    with torch.no_grad():
        h = teacher.hidden(tokens)
        inputs, want = h[:, rows - 1: rows - 1 + n - 1], h[:, rows: rows + n - 1]
        emb = teacher.embed(tokens[:, : n - 1])
        want_logits = teacher.readout(want)
    return head(emb, inputs), want, want_logits


def train_step(head, teacher, batch, opt):
    """One step on token sequences `batch` [B, n]: (feature loss, cross-entropy)."""
    pred, want, want_logits = head_step(head, teacher, batch)
    feature_loss = F.smooth_l1_loss(pred, want)
    ce = -(torch.softmax(want_logits, -1) *
           torch.log_softmax(teacher.readout(pred), -1)).sum(-1).mean()
    opt.zero_grad()
    (feature_loss + 0.1 * ce).backward()
    torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
    opt.step()
    return feature_loss.item(), ce.item()


def new_head(teacher, seed, device):
    """The head for `teacher`'s target (EAGLE-1's layout: fc and one block of its width) and
    its optimiser."""
    cfg = dict(dim=teacher.cfg["dim"], n_head=teacher.cfg["n_head"], multiple_of=256,
               norm_eps=teacher.cfg["norm_eps"])
    torch.manual_seed(seed)
    head = eh.EagleHead(cfg).to(device)
    return cfg, head


def target_next(teacher, tokens, batch):
    """The target's argmax next token at every head position, flattened."""
    n, rows, out = tokens.size(1), teacher.rows, []
    with torch.no_grad():
        for i in range(0, len(tokens), batch):
            h = teacher.hidden(tokens[i:i + batch])
            out.append(teacher.readout(h[:, rows: rows + n - 1]).argmax(-1).flatten())
    return torch.cat(out)


def agreement(head, teacher, tokens, batch):
    """Top-1 / top-3 agreement of the head's readout with the target's next token."""
    top1 = top3 = total = 0
    with torch.no_grad():
        for i in range(0, len(tokens), batch):
            pred, _, want_logits = head_step(head, teacher, tokens[i:i + batch])
            want = want_logits.argmax(-1)
            top = teacher.readout(pred).topk(3, dim=-1).indices
            top1 += (top[..., 0] == want).sum().item()
            top3 += (top == want[..., None]).any(-1).sum().item()
            total += want.numel()
    return {"top1_agreement": round(top1 / total, 4), "top3_agreement": round(top3 / total, 4)}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True, help="a converted family directory")
    ap.add_argument("--images", required=True, help="a folder of .png / .jpg / .jpeg images")
    ap.add_argument("--out", help="write eagle/ here instead of into the family")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=4, help="images per step")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (AdamW)")
    ap.add_argument("--heldout_fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encode_batch", type=int, default=4, help="images per VQ encoder call")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    for name in ("steps", "batch", "encode_batch"):
        if getattr(args, name) < 1:
            raise Error(f"--{name} {getattr(args, name)}: must be at least 1")
    return args


def run(args):
    teacher, vq_dir, vq_config = load_teacher(args.family)
    pixels = teacher.grid * 2 ** (len(vq_config["ch_mult"]) - 1)
    paths = images_io.image_files(args.images)
    train_idx, heldout_idx = images_io.split(len(paths), args.heldout_fraction, args.seed,
                                             args.images)
    device = torch.device(args.device)
    vq_model = images_io.load_vq(vq_dir, vq_config).to(device)
    print(f"[eagle] {args.family}: {teacher.grid}x{teacher.grid} tokens ({pixels} px), "
          f"{len(paths)} images ({len(train_idx)} to train on, {len(heldout_idx)} held out)",
          flush=True)
    ids, _, encode_seconds = images_io.encode_images(vq_model, paths, (pixels,), device,
                                                     args.encode_batch, False)
    del vq_model
    tokens = ids[pixels].to(device)
    teacher.model.to(device)
    cfg, head = new_head(teacher, args.seed, device)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed + 1)
    train_tokens = tokens[train_idx.to(device)]
    every, start, logged = max(1, args.steps // 20), time.time(), []
    for step in range(args.steps):
        batch = train_tokens[torch.randint(len(train_tokens), (args.batch,), generator=gen)
                             .to(device)]
        for group in opt.param_groups:
            group["lr"] = images_io.lr_at(step, args.steps, args.lr)
        logged.append(train_step(head, teacher, batch, opt))
        if (step + 1) % every == 0 or step + 1 == args.steps:
            f_mean, ce_mean = (sum(col) / len(logged) for col in zip(*logged))
            print(f"[eagle] step {step + 1}/{args.steps}: feature loss {f_mean:.4f}, "
                  f"cross-entropy {ce_mean:.3f} nats ({time.time() - start:.1f} s)", flush=True)
            logged = []
    report = {"family": os.path.abspath(args.family), "images": len(paths),
              "train_images": len(train_idx), "heldout_images": len(heldout_idx),
              "steps": args.steps, "batch": args.batch, "seed": args.seed,
              "device": str(device), "encode_seconds": round(encode_seconds, 1),
              "train_seconds": round(time.time() - start, 1),
              "parameters": sum(p.numel() for p in head.parameters()),
              "train": agreement(head, teacher, train_tokens, args.batch)}
    sets = [("train", train_tokens)]
    if len(heldout_idx):
        heldout = tokens[heldout_idx.to(device)]
        report["heldout"] = agreement(head, teacher, heldout, args.batch)
        sets.append(("heldout", heldout))
    # The floor: always the target's most frequent next token on the training images.
    top = torch.bincount(target_next(teacher, train_tokens, args.batch)).argmax()
    report["seconds_per_step"] = round(report["train_seconds"] / args.steps, 4)
    for name, set_tokens in sets:
        nxt = target_next(teacher, set_tokens, args.batch)
        report[name]["majority_agreement"] = round((nxt == top).float().mean().item(), 4)
    print(f"[eagle] training images: {report['train']}", flush=True)
    print(f"[eagle] held-out images: {report.get('heldout', 'none held out')}", flush=True)
    out = args.out or args.family
    source = dict(tool=TOOL, images=os.path.abspath(args.images), image_count=len(paths),
                  steps=args.steps, seed=args.seed)
    component.write(os.path.join(out, "eagle"), cfg,
                    {k: v.detach().cpu() for k, v in head.state_dict().items()}, "f32", source)
    with open(os.path.join(out, "eagle_report.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    if not args.out:
        family.add_components(args.family, ["eagle"],
                              {"eagle": dict(source, report="eagle_report.json")})
    return report


def main(argv=None):
    try:
        run(parse_args(argv))
    except Error as e:
        print(f"train_eagle_head: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
