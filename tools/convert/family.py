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


# The fields a family command writes; anything else an existing family.json holds
# ("pipeline", a hand-set "method_defaults", ...) is kept when the family is converted again.
WRITTEN = ("name", "default_cfg_scale", "components", "pixel_rounding", "converted")
# "converted" notes the trainers add, and the components they describe.
NOTE_OWNERS = {"resamplers": ("upsampler", "downsampler"), "eagle": ("eagle",)}


def write_family_json(out_dir, name, default_cfg_scale, components, pixel_rounding, notes,
                      extra=None, base=None, kept=None, shown_dir=None):
    """`extra`: more top-level fields (Janus-Pro's grid_size and method_defaults). `base`: the
    family.json being replaced (its other fields and notes are kept); `kept`: {component:
    directory} from it that this conversion keeps (keep_components). `shown_dir`: the
    directory to name in the output (out_dir may be a staging directory)."""
    kept = kept or {}
    doc = {k: v for k, v in (base or {}).items() if k not in WRITTEN and k not in (extra or {})}
    old_notes = (base or {}).get("converted")
    old_notes = old_notes if isinstance(old_notes, dict) else {}
    notes = dict({k: v for k, v in old_notes.items()
                  if k in NOTE_OWNERS and all(c in kept for c in NOTE_OWNERS[k])}, **notes)
    extra = dict(extra or {})
    if isinstance(extra.get("method_defaults"), dict) and \
            isinstance((base or {}).get("method_defaults"), dict):
        # The converter's method defaults over the ones the family had (set by hand, say).
        extra["method_defaults"] = dict(base["method_defaults"], **extra["method_defaults"])
    doc.update({"name": name, "default_cfg_scale": default_cfg_scale,
                "components": dict({c: c for c in components}, **kept),
                "pixel_rounding": pixel_rounding, "converted": notes, **extra})
    _write_family_doc(out_dir, doc)
    print(f"wrote {os.path.join(shown_dir or out_dir, 'family.json')}: {name}, components "
          f"{', '.join(doc['components'])}", flush=True)
    return doc


def existing_family(out_dir):
    """The family.json already in out_dir (a family converted again), or None. An unreadable
    one is refused: converting over it would lose the components it names."""
    path = os.path.join(out_dir, "family.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
    except ValueError as e:
        raise upstream.ConversionError(
            f"{path}: not JSON ({e}): this directory holds a family whose components a new "
            f"conversion would keep; fix the file, or remove it to convert afresh")
    if not isinstance(doc, dict) or not isinstance(doc.get("components", {}), dict):
        raise upstream.ConversionError(f"{path}: components: not an object of component -> "
                                       f"directory; fix the file, or remove it to convert afresh")
    return doc


# What to do when a kept component no longer fits the family converted again.
REDO = {
    "drafter": "give --drafter (the AR-DTok at half the target's grid)",
    "mllm": "give --mllm with the Tar MLLM directory that writes these TA-Tok ids",
    "upsampler": "give --resamplers, or train them again with train_resamplers.py",
    "downsampler": "give --resamplers, or train them again with train_resamplers.py",
    "eagle": "train it again with train_eagle_head.py",
    "t5": "give --t5 with the FLAN-T5 directory whose width the GPT reads",
}


def keep_components(out_dir, doc, produced, checks, command):
    """The components of an existing family.json (doc) that this conversion does not make
    (`produced`) and keeps: {name: directory as family.json gives it}. One whose directory is
    gone is dropped, and said; each kept one must pass checks[name](its config, the config's
    path), else the conversion is refused, naming it and what to do. A component this command
    cannot check is refused too (it might not fit)."""
    if not doc:
        return {}
    family_json = os.path.join(out_dir, "family.json")
    kept, dropped = {}, []
    for name, rel in doc.get("components", {}).items():
        if name in produced:
            continue
        path = os.path.join(out_dir, rel) if isinstance(rel, str) else None
        if path is None or not os.path.isdir(path):
            dropped.append(f"{name} ({path} is gone)" if path else f"{name} (not a directory name)")
            continue
        if name not in checks:
            raise upstream.ConversionError(
                f"{family_json}: components.{name}: {command} does not make {name} and cannot "
                f"tell whether {path} fits the family it writes; remove {path} to drop it, or "
                f"convert into a new directory")
        config_path = os.path.join(path, "config.json")
        try:
            with open(config_path) as f:
                config = json.load(f)
        except (OSError, ValueError) as e:
            raise upstream.ConversionError(
                f"{config_path}: unreadable ({e}): the family's {name} would be kept; "
                f"{REDO.get(name, 'convert it again')}, or remove {path} to drop it")
        try:
            checks[name](config, config_path)
        except upstream.ConversionError as e:
            raise upstream.ConversionError(
                f"{e}; the family's {name} ({path}) no longer fits this conversion: "
                f"{REDO.get(name, 'convert it again')}, or remove {path} to drop it")
        kept[name] = rel
    if kept:
        print(f"kept from {family_json}: " + ", ".join(
            f"{n} ({os.path.join(out_dir, r)})" for n, r in kept.items()), flush=True)
    if dropped:
        print(f"dropped from {family_json}: {', '.join(dropped)}", flush=True)
    return kept


def check_resampler(vq_config):
    """A keep_components check: U_2 / D_2 over the family's codebook."""
    def check(config, where):
        if config.get("codebook_size") != vq_config["codebook_size"]:
            raise upstream.ConversionError(
                f"{where}: codebook_size {config.get('codebook_size')} differs from the VQ's "
                f"{vq_config['codebook_size']}")
    return check


def check_eagle(target):
    """A keep_components check: an EAGLE head as wide as the target."""
    def check(config, where):
        if config.get("dim") != target["dim"]:
            raise upstream.ConversionError(
                f"{where}: dim {config.get('dim')} differs from the target's {target['dim']}")
    return check


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
