"""Reading upstream pickled checkpoints (torch.save files) strictly and loudly.

Every problem is a ConversionError whose message names the file and the key, so a user who
hands the converter the wrong file learns which file and which tensor disagree.

Pickles can run code when loaded. The reader (torch_zip.py) unpickles with an allowlist of
what upstream files contain (tensors, OrderedDict, argparse.Namespace, numbers, strings);
anything else is refused, naming the class, unless the user passes --trust-pickle.
"""
import math
import os

import torch

import torch_zip


class ConversionError(Exception):
    pass


def fail(path, key, problem):
    raise ConversionError(f"{path}: {key}: {problem}")


def require_file(path, flag, what):
    """An input file given as `flag` (what: the file expected) exists and is a file."""
    if os.path.isdir(path):
        raise ConversionError(f"{path}: a directory; {flag} takes {what}")
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: no such file ({flag} takes {what}; check the path)")


def require_dir(path, flag, what):
    """An input directory given as `flag` exists and is a directory."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConversionError(f"{path}: a file; {flag} takes {what}")
    if not os.path.isdir(path):
        raise ConversionError(f"{path}: no such directory ({flag} takes {what}; check the path)")


def load_pickle(path, trust_pickle=False):
    if os.path.isdir(path):
        raise ConversionError(f"{path}: a directory, expected a checkpoint file (.pth / .pt)")
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: no such file")
    if not trust_pickle:
        if not torch_zip.is_zip(path):
            raise ConversionError(
                f"{path}: not a torch.save zip archive (PyTorch >= 1.6 writes those; an older "
                f"file loads only with --trust-pickle, which lets it run pickled code)")
        try:
            return torch_zip.load(path)
        except torch_zip.Refused as e:
            raise ConversionError(
                f"{path}: {e}: the file pickles more than upstream checkpoints do and loading "
                f"it could run code; pass --trust-pickle if it comes from a source you trust")
        except Exception as e:  # noqa: BLE001 (truncated, corrupt, ...)
            raise ConversionError(f"{path}: not a readable torch.save file: {e}")
    try:
        return torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001
        raise ConversionError(f"{path}: not a readable torch.save file: {e}")


def as_dict(obj):
    """argparse.Namespace / dataclass / dict -> dict (for the `args` upstream files carry)."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return dict(obj)
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    return {}


def state_dict_of(path, ckpt, keys):
    """The first of `keys` that holds a dict of tensors (upstream wrappers differ)."""
    if not isinstance(ckpt, dict):
        fail(path, "<root>", f"expected a dict, found {type(ckpt).__name__}")
    for k in keys:
        if k in ckpt and isinstance(ckpt[k], dict):
            return ckpt[k]
    fail(path, "<root>", f"none of {keys} holds a state dict (found keys {sorted(ckpt)[:8]})")


class StateDict:
    """Strict access to an upstream state dict: every key read is checked for its shape, and
    `finish` refuses keys nobody read (except the ones a layout is known to carry)."""

    def __init__(self, path, sd, ignorable=()):
        self.path = path
        self.sd = {k[len("module."):] if k.startswith("module.") else k: v
                   for k, v in sd.items()}
        for k, v in self.sd.items():
            if not torch.is_tensor(v):
                fail(path, k, f"expected a tensor, found {type(v).__name__}")
        self.ignorable = ignorable
        self.used = set()

    def has(self, key):
        return key in self.sd

    def get(self, key, shape):
        if key not in self.sd:
            fail(self.path, key, f"missing (expected shape {list(shape)})")
        t = self.sd[key]
        if list(t.shape) != list(shape):
            fail(self.path, key, f"shape {list(t.shape)} disagrees with the args, which give "
                                 f"{list(shape)}")
        if not t.is_floating_point():
            fail(self.path, key, f"expected floating point weights, found {t.dtype}")
        self.used.add(key)
        return t

    def shape(self, key):
        if key not in self.sd:
            fail(self.path, key, "missing")
        return list(self.sd[key].shape)

    def finish(self):
        extra = [k for k in sorted(self.sd) if k not in self.used
                 and not any(k == p or (p.endswith(".") and k.startswith(p))
                             or (p.startswith("*") and k.endswith(p[1:]))
                             for p in self.ignorable)]
        if extra:
            more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
            fail(self.path, extra[0], f"unexpected tensor{more}: not part of this layout")
        return {k: self.sd[k] for k in sorted(self.used)}


def grid_of(path, key, tokens):
    g = int(round(math.sqrt(tokens)))
    if g * g != tokens:
        fail(path, key, f"{tokens} image tokens do not form a square grid")
    return g


def parameter_count(tensors):
    return sum(t.numel() for t in tensors.values())


def storage_dtype(name, tensors):
    """'auto' keeps small models in float32 and stores big ones (>= 100 M parameters, where
    the halved file and resident memory matter) as bfloat16, as upstream serves them."""
    if name == "auto":
        return torch.bfloat16 if parameter_count(tensors) >= 100_000_000 else torch.float32
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]
