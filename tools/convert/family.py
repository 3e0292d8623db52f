"""Assembling a family directory (family.json + one directory per component) from converted
components, checking that they fit together before the server ever sees them."""
import json
import os
import shutil

import upstream


def check_drafter(target, drafter, where):
    for key in ("condition_mode", "cls_token_num", "cond_dim", "vocab_size"):
        if target.get(key) != drafter.get(key):
            raise upstream.ConversionError(
                f"{where}: the drafter's {key} {drafter.get(key)} differs from the target's "
                f"{target.get(key)}: MuLo-SD drafts from the same condition and codebook")
    if target["grid_size"] != 2 * drafter["grid_size"]:
        raise upstream.ConversionError(
            f"{where}: the drafter's {drafter['grid_size']}x{drafter['grid_size']} grid is not "
            f"half the target's {target['grid_size']}x{target['grid_size']} (MuLo-SD's factor 2)")


def copy_resamplers(resamplers_dir, out_dir, vq_config):
    """U_2 / D_2 trained for this family, when the user has them: copied in and checked
    against the family's codebook. tools/convert/train_resamplers.py trains them from a folder
    of images on an already converted family and adds them to it itself; with its --out DIR it
    writes DIR/upsampler and DIR/downsampler instead, for --resamplers DIR here."""
    found = []
    for name in ("upsampler", "downsampler"):
        src = os.path.join(resamplers_dir, name)
        if not os.path.isfile(os.path.join(src, "config.json")):
            raise upstream.ConversionError(f"{src}: missing (expected config.json and "
                                           f"model.safetensors from train_resamplers.py)")
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        if cfg.get("codebook_size") != vq_config["codebook_size"]:
            raise upstream.ConversionError(
                f"{src}/config.json: codebook_size {cfg.get('codebook_size')} differs from the "
                f"VQ's {vq_config['codebook_size']}")
        dst = os.path.join(out_dir, name)
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copytree(src, dst, dirs_exist_ok=True)
        found.append(name)
    return found


def _write_family_doc(out_dir, doc, sort_keys=True):
    """family.json written whole or not at all (a temporary file renamed over it): a server
    reading the family meanwhile sees the old document or the new one."""
    path = os.path.join(out_dir, "family.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=sort_keys)
        f.write("\n")
    os.replace(tmp, path)


def write_family_json(out_dir, name, default_cfg_scale, components, pixel_rounding, notes,
                      extra=None):
    """`extra`: more top-level fields (Janus-Pro's grid_size and method_defaults)."""
    doc = {"name": name, "default_cfg_scale": default_cfg_scale,
           "components": {c: c for c in components}, "pixel_rounding": pixel_rounding,
           "converted": notes, **(extra or {})}
    _write_family_doc(out_dir, doc)
    print(f"wrote {os.path.join(out_dir, 'family.json')}: {name}, components "
          f"{', '.join(components)}", flush=True)
    return doc


def add_components(out_dir, components, notes):
    """Adds components (each in the directory of its name) to an existing family.json,
    keeping everything else in it, in its order; `notes` go under "converted" (what made
    them)."""
    with open(os.path.join(out_dir, "family.json")) as f:
        doc = json.load(f)
    doc.setdefault("components", {}).update({c: c for c in components})
    converted = doc.get("converted")
    doc["converted"] = dict(converted if isinstance(converted, dict) else {}, **notes)
    _write_family_doc(out_dir, doc, sort_keys=False)
    print(f"updated {os.path.join(out_dir, 'family.json')}: components "
          f"{', '.join(doc['components'])}", flush=True)
    return doc
