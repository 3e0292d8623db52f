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
    """U_2 / D_2 trained for this family (tools/convert/train_resamplers.py), when the user has
    them: copied in and checked against the family's codebook."""
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


def write_family_json(out_dir, name, default_cfg_scale, components, pixel_rounding, notes):
    doc = {"name": name, "default_cfg_scale": default_cfg_scale,
           "components": {c: c for c in components}, "pixel_rounding": pixel_rounding,
           "converted": notes}
    with open(os.path.join(out_dir, "family.json"), "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {os.path.join(out_dir, 'family.json')}: {name}, components "
          f"{', '.join(components)}", flush=True)
    return doc
