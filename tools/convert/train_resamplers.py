#!/usr/bin/env python3
"""Trains MuLo-SD's up-sampler U_2 and down-sampler D_2 for a converted family from a folder of
your own images, and adds them to the family: the server then offers the `mulo` method for
it. Any family directory with a target, a drafter at half its grid and a VQ with its encoder
will do: convert.py tar-family --drafter ... makes one; convert.py llamagen-family converts no
drafter, and such a family is refused.

  /usr/bin/python3 tools/convert/train_resamplers.py --family models/tar --images my_images/
      [--steps 2000] [--batch 8] [--lr 2e-3] [--channels 128] [--num_blocks 4]
      [--heldout_fraction 0.1] [--seed 0] [--pixel_weight 0] [--out DIR]

Every .png / .jpg / .jpeg in --images is centre-cropped to a square, resized to the target's
and the drafter's image sizes (grid x the VQ's downsampling factor: 512 and 256 px for Tar)
and tokenised once with the family's own VQ encoder. U_2 learns drafter tokens -> target
tokens and D_2 target tokens -> drafter tokens, both with token cross-entropy. A seeded share
of the images (--heldout_fraction) is kept out of training; the token agreement of U_2, D_2
and the round trip D_2(U_2(.)) on them is printed at the end, beside the agreement of always
answering the most frequent token (the floor to beat).

Writes FAMILY/upsampler/ and FAMILY/downsampler/ (config.json, model.safetensors and
source.json: the form engine/model/resampler.cc loads) and FAMILY/resamplers_report.json
(agreement, losses, image count, steps, seconds), and adds upsampler and downsampler to
FAMILY/family.json (all else in it kept; replaced atomically). With --out DIR they go to
DIR/ instead and family.json is left alone; then
  /usr/bin/python3 tools/convert/convert.py tar-family ... --resamplers DIR
copies them into a family as it is converted.

The result is deterministic for a fixed --seed on CPU (same machine and thread count). A real
VQ-16 encodes a 512 px image in seconds on a CPU: progress is printed as it goes. Errors
(no images, an unreadable image, too few images for the held-out split, a family without a
drafter, a VQ file without its encoder) name the file and exit with status 2.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.append(os.path.join(HERE, "..", "synth"))  # after ours: trainer only
import component  # noqa: E402
import family  # noqa: E402
import resampler as rs  # noqa: E402
import safetensors_io  # noqa: E402
import trainer  # noqa: E402  (tools/synth/trainer.py: the learning-rate schedule)
import upstream  # noqa: E402
import vq_decoder as vq  # noqa: E402

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
TOOL = "tools/convert/train_resamplers.py"
Error = upstream.ConversionError


def read_json(path):
    if not os.path.isfile(path):
        raise Error(f"{path}: no such file")
    with open(path) as f:
        return json.load(f)


class Family:
    """What the training needs from a family directory: the two grids and the VQ."""

    def __init__(self, directory):
        self.dir = directory
        doc = read_json(os.path.join(directory, "family.json"))
        components = doc.get("components") or {}
        for key in ("target", "vq"):
            if key not in components:
                raise Error(f"{directory}/family.json: components.{key} missing")
        if "drafter" not in components:
            raise Error(f"{directory}/family.json: the family has no drafter; MuLo-SD drafts at "
                        f"half the target's grid and needs one (Tar: convert.py tar-family "
                        f"--drafter ar_dtok_lp_256px.pth)")
        path = {k: os.path.join(directory, v) for k, v in components.items()}
        target = read_json(os.path.join(path["target"], "config.json"))
        drafter = read_json(os.path.join(path["drafter"], "config.json"))
        family.check_drafter(target, drafter, os.path.join(path["drafter"], "config.json"))
        self.target_grid, self.drafter_grid = target["grid_size"], drafter["grid_size"]
        self.vq_dir = path["vq"]
        self.vq_config = read_json(os.path.join(self.vq_dir, "config.json"))
        self.downsample = 2 ** (len(self.vq_config["ch_mult"]) - 1)

    def sizes(self):
        """Image sizes in pixels: (drafter, target)."""
        return self.drafter_grid * self.downsample, self.target_grid * self.downsample

    def load_vq(self):
        return load_vq(self.vq_dir, self.vq_config)


def load_vq(vq_dir, vq_config):
    """A family's VQ with its encoder (frozen, eval), or an Error naming the file."""
    weights = os.path.join(vq_dir, "model.safetensors")
    if not os.path.isfile(weights):
        raise Error(f"{weights}: no such file")
    state = safetensors_io.load(weights)
    model = vq.VQModel(vq_config, with_encoder=True)
    needed = [k for k in model.state_dict() if k.startswith(("encoder.", "quant_conv."))]
    missing = [k for k in needed if k not in state]
    if missing:
        raise Error(f"{weights}: the VQ's encoder is missing ({len(missing)} of its "
                    f"{len(needed)} tensors, e.g. {missing[0]}); training tokenises images "
                    f"with it: convert the upstream VQ file again with "
                    f"tools/convert/convert.py, which keeps the encoder")
    vq.load_state_dict(model, {k: v.float() for k, v in state.items()})
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def image_files(folder):
    if not os.path.isdir(folder):
        raise Error(f"{folder}: not a directory")
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(IMAGE_SUFFIXES)
                   and os.path.isfile(os.path.join(folder, n)))
    if not names:
        raise Error(f"{folder}: no .png, .jpg or .jpeg images")
    return [os.path.join(folder, n) for n in names]


def square_crops(path, sizes):
    """The image's centred square, RGB uint8 [S, S, 3], at each size, and its side before."""
    from PIL import Image  # here: the rest of this module (and its importers) run without PIL
    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
    except Exception as e:  # noqa: BLE001 (PIL raises several kinds for a bad file)
        raise Error(f"{path}: cannot read the image ({e})")
    w, h = image.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    box = (left, top, left + side, top + side)
    # LANCZOS: its kernel widens with the reduction, so a large photo is low-passed before it
    # is subsampled (no aliasing that the VQ would tokenise as texture).
    crops = [np.asarray(image.resize((s, s), Image.Resampling.LANCZOS, box=box)) for s in sizes]
    return crops, side


def to_unit(pixels):
    """uint8 [B, 3, S, S] -> float in [-1, 1], the VQ's input range."""
    return pixels.float() / 127.5 - 1.0


def encode_images(model, paths, sizes, device, batch, keep_pixels):
    """Token ids [N, g*g] at each size (and the uint8 pixels when `keep_pixels`)."""
    ids = {s: [] for s in sizes}
    pixels = {s: [] for s in sizes}
    start = time.time()
    small = 0
    for i in range(0, len(paths), batch):
        crops, sides = zip(*(square_crops(p, sizes) for p in paths[i:i + batch]))
        small += sum(1 for side in sides if side < max(sizes))
        for k, size in enumerate(sizes):
            x = torch.from_numpy(np.stack([c[k] for c in crops])).permute(0, 3, 1, 2)
            with torch.no_grad():
                ids[size].append(vq.encode_ids(model, to_unit(x).to(device)).cpu())
            if keep_pixels:
                pixels[size].append(x)
        print(f"[resamplers] encoded {min(i + batch, len(paths))}/{len(paths)} images "
              f"({time.time() - start:.0f} s)", flush=True)
    if small:
        print(f"[resamplers] note: {small} images are smaller than {max(sizes)} px and were "
              f"up-scaled", flush=True)
    return ({s: torch.cat(v) for s, v in ids.items()},
            {s: torch.cat(v) for s, v in pixels.items()} if keep_pixels else None,
            time.time() - start)


def split(count, fraction, seed, where):
    """Seeded (train, held-out) image indices."""
    if not 0 <= fraction < 1:
        raise Error(f"--heldout_fraction {fraction}: must be in [0, 1)")
    heldout = 0 if fraction == 0 else max(1, round(fraction * count))
    if count - heldout < 1:
        raise Error(f"{where}: {count} image(s), too few to hold {heldout} out (--heldout_fraction "
                    f"{fraction}) and train on the rest; give at least {heldout + 1} images "
                    f"or --heldout_fraction 0")
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    return order[heldout:].sort().values, order[:heldout].sort().values


def flat_logits(module, vectors):
    """module.logits(vectors) as rows [B*H*W, V] in raster order (the same numbers): with the
    codebook last, cross-entropy runs on contiguous rows, and scaling the e-wide vectors
    instead of the V-wide logits keeps the big tensor out of logit_scale's gradient; a
    training step with a 16384-entry codebook at 32x32 is about 5x faster on a CPU."""
    rows = vectors.permute(0, 2, 3, 1).reshape(-1, vectors.size(1))
    return (module.logit_scale * rows) @ module.codebook.t()


class Pair:
    """U_2 and D_2 with the grids they map between."""

    def __init__(self, cfg, codebook, drafter_grid, target_grid):
        self.up = rs.Resampler(dict(cfg, kind="up"), codebook)
        self.down = rs.Resampler(dict(cfg, kind="down"), codebook)
        self.gd, self.gt = drafter_grid, target_grid

    def modules(self):
        return {"upsampler": self.up, "downsampler": self.down}

    def vectors(self, low, high):
        """U_2's output vectors for drafter ids `low` [B, gd*gd] and D_2's for target ids
        `high` [B, gt*gt]."""
        return self.up.vectors(low, self.gd, self.gd), self.down.vectors(high, self.gt, self.gt)

    def logits(self, up_vec, down_vec):
        return flat_logits(self.up, up_vec), flat_logits(self.down, down_vec)

    @staticmethod
    def token_losses(up_logits, down_logits, low, high, reduction="mean"):
        return (F.cross_entropy(up_logits, high.flatten(), reduction=reduction),
                F.cross_entropy(down_logits, low.flatten(), reduction=reduction))

    def measure(self, low, high, batch):
        """Token cross-entropy (nats per token, the training loss) and argmax agreement over
        images with drafter ids `low` [N, gd*gd] and target ids `high` [N, gt*gt]; round trip:
        D_2(U_2(low)) against low, what the drafter continues from when MuLo-SD accepts U_2's
        tokens as they are."""
        sums = dict(up_loss=0.0, down_loss=0.0, up=0, down=0, round_trip=0)
        with torch.no_grad():
            for i in range(0, len(low), batch):
                lo, hi = low[i:i + batch], high[i:i + batch]
                up_logits, down_logits = self.logits(*self.vectors(lo, hi))
                up_loss, down_loss = self.token_losses(up_logits, down_logits, lo, hi, "sum")
                sums["up_loss"] += up_loss.item()
                sums["down_loss"] += down_loss.item()
                up_ids = up_logits.argmax(1).view(hi.shape)
                sums["up"] += (up_ids == hi).sum().item()
                sums["down"] += (down_logits.argmax(1).view(lo.shape) == lo).sum().item()
                back = flat_logits(self.down, self.down.vectors(up_ids, self.gt, self.gt))
                sums["round_trip"] += (back.argmax(1).view(lo.shape) == lo).sum().item()
        n_low, n_high = max(low.numel(), 1), max(high.numel(), 1)
        return {"up_loss": round(sums["up_loss"] / n_high, 4),
                "down_loss": round(sums["down_loss"] / n_low, 4),
                "up_agreement": round(sums["up"] / n_high, 4),
                "down_agreement": round(sums["down"] / n_low, 4),
                "round_trip_agreement": round(sums["round_trip"] / n_low, 4)}


def majority_agreement(train_ids, ids):
    """How often the most frequent token of the training images is right on `ids`: what a
    resampler that ignores its input reaches."""
    top = torch.bincount(train_ids.flatten()).argmax()
    return round((ids == top).float().mean().item(), 4)


def lr_at(step, steps, peak):
    """Linear warm-up over the first tenth (at most 100 steps), then cosine down to 5%."""
    return trainer.cosine_lr(step, steps, peak, warmup=max(1, min(100, steps // 10)), floor=0.05)


def train(pair, low, high, pixels, vq_model, args, device):
    params = [p for m in pair.modules().values() for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed + 1)
    codebook = vq_model.quantize.codebook().detach() if pixels else None
    every = max(1, args.steps // 20)
    logged, start = [], time.time()
    for step in range(args.steps):
        pick = torch.randint(len(low), (args.batch,), generator=gen)
        lo, hi = low[pick].to(device), high[pick].to(device)
        up_vec, down_vec = pair.vectors(lo, hi)
        up_loss, down_loss = pair.token_losses(*pair.logits(up_vec, down_vec), lo, hi)
        loss = up_loss + down_loss
        if pixels:
            for vec, image in ((up_vec, pixels["high"]), (down_vec, pixels["low"])):
                decoded = rs.decode_straight_through(vq_model, vec, codebook)
                target = to_unit(image[pick]).to(device)
                loss = loss + args.pixel_weight * (F.mse_loss(decoded, target) +
                                                   F.l1_loss(decoded, target))
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        logged.append((up_loss.item(), down_loss.item(), loss.item()))
        if (step + 1) % every == 0 or step + 1 == args.steps:
            up_mean, down_mean, total = (sum(col) / len(logged) for col in zip(*logged))
            extra = f", with pixels {total:.3f}" if pixels else ""
            print(f"[resamplers] step {step + 1}/{args.steps}: token loss up {up_mean:.3f} "
                  f"down {down_mean:.3f} nats{extra} (lr {group['lr']:.2e}, "
                  f"{time.time() - start:.0f} s)", flush=True)
            logged = []
    return time.time() - start


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True, help="a converted family directory")
    ap.add_argument("--images", required=True, help="a folder of .png / .jpg / .jpeg images")
    ap.add_argument("--out", help="write upsampler/ and downsampler/ here instead of into the "
                                  "family (family.json untouched)")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8, help="images per step")
    ap.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (Adam)")
    ap.add_argument("--channels", type=int, default=128, help="width of both nets")
    ap.add_argument("--num_blocks", type=int, default=4, help="residual blocks in each net")
    ap.add_argument("--heldout_fraction", type=float, default=0.1,
                    help="share of the images kept out of training to measure agreement on "
                         "(0: none; at least one image otherwise)")
    ap.add_argument("--seed", type=int, default=0)
    # Off by default: with the token ids cached a step is two small conv nets, while the pixel
    # loss runs the VQ decoder at both sizes on every step (for VQ-16 at 512 px far more work
    # than the nets themselves, minutes per step on a CPU at batch 8) and keeps every image
    # in memory. It helps where near-duplicate codes make exact tokens ambiguous (the
    # synthetic family's U_2 got it, on a GPU); try it when one is at hand.
    ap.add_argument("--pixel_weight", type=float, default=0.0,
                    help="weight of an MSE + L1 loss through the frozen VQ decoder on U_2's and "
                         "D_2's decoded output (0: tokens only)")
    ap.add_argument("--encode_batch", type=int, default=4, help="images per VQ encoder call")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    for name in ("steps", "batch", "channels", "encode_batch"):
        if getattr(args, name) < 1:
            raise Error(f"--{name} {getattr(args, name)}: must be at least 1")
    if args.num_blocks < 0 or args.pixel_weight < 0:
        raise Error("--num_blocks and --pixel_weight must not be negative")
    return args


def run(args):
    fam = Family(args.family)
    drafter_px, target_px = fam.sizes()
    paths = image_files(args.images)
    train_idx, heldout_idx = split(len(paths), args.heldout_fraction, args.seed,
                                    args.images)
    device = torch.device(args.device)
    vq_model = fam.load_vq().to(device)
    print(f"[resamplers] {args.family}: drafter {fam.drafter_grid}x{fam.drafter_grid} tokens "
          f"({drafter_px} px) <-> target {fam.target_grid}x{fam.target_grid} ({target_px} px); "
          f"{len(paths)} images ({len(train_idx)} to train on, {len(heldout_idx)} held out)",
          flush=True)
    ids, pixels, encode_seconds = encode_images(vq_model, paths, (drafter_px, target_px), device,
                                                args.encode_batch, args.pixel_weight > 0)
    low, high = ids[drafter_px], ids[target_px]
    cfg = dict(factor=2, channels=args.channels, num_blocks=args.num_blocks,
               codebook_size=fam.vq_config["codebook_size"],
               codebook_embed_dim=fam.vq_config["codebook_embed_dim"])
    torch.manual_seed(args.seed)  # the nets' initial weights
    pair = Pair(cfg, vq_model.quantize.embedding.weight.detach().cpu(), fam.drafter_grid,
                fam.target_grid)
    for m in pair.modules().values():
        m.to(device)
    train_low, train_high = low[train_idx].to(device), high[train_idx].to(device)
    before = pair.measure(train_low, train_high, args.batch)
    train_pixels = None
    if pixels:
        train_pixels = {"low": pixels[drafter_px][train_idx], "high": pixels[target_px][train_idx]}
    seconds = train(pair, train_low.cpu(), train_high.cpu(), train_pixels, vq_model, args, device)
    report = {"family": os.path.abspath(args.family), "images": len(paths),
              "train_images": len(train_idx), "heldout_images": len(heldout_idx),
              "steps": args.steps, "batch": args.batch, "seed": args.seed,
              "pixel_weight": args.pixel_weight, "channels": args.channels,
              "num_blocks": args.num_blocks, "encode_seconds": round(encode_seconds, 1),
              "train_seconds": round(seconds, 1),
              "train_loss_before": round(before["up_loss"] + before["down_loss"], 4),
              "train": pair.measure(train_low, train_high, args.batch)}
    report["train_loss_after"] = round(report["train"]["up_loss"] +
                                       report["train"]["down_loss"], 4)
    sets = [("train", train_low, train_high)]
    if len(heldout_idx):
        held_low, held_high = low[heldout_idx].to(device), high[heldout_idx].to(device)
        report["heldout"] = pair.measure(held_low, held_high, args.batch)
        sets.append(("heldout", held_low, held_high))
    for name, set_low, set_high in sets:
        report[name]["majority_up_agreement"] = majority_agreement(train_high, set_high)
        report[name]["majority_down_agreement"] = majority_agreement(train_low, set_low)
    print(f"[resamplers] training images: {report['train']}", flush=True)
    print(f"[resamplers] held-out images: {report.get('heldout', 'none held out')}", flush=True)
    out = args.out or args.family
    source = dict(tool=TOOL, images=os.path.abspath(args.images), image_count=len(paths),
                  steps=args.steps, seed=args.seed)
    for name, module in pair.modules().items():
        state = {k: v.cpu() for k, v in module.state_dict().items()}
        component.write(os.path.join(out, name), dict(cfg, kind=module.cfg["kind"]), state,
                        "f32", source)
    with open(os.path.join(out, "resamplers_report.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    if not args.out:
        family.add_components(args.family, list(pair.modules()),
                              {"resamplers": dict(source, report="resamplers_report.json")})
    return report


def main(argv=None):
    try:
        run(parse_args(argv))
    except Error as e:
        print(f"train_resamplers: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
