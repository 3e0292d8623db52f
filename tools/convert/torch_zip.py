"""A torch.save reader that never runs pickled code: it parses the zip container itself
(<root>/data.pkl plus one raw little-endian file per storage, the format since PyTorch 1.6)
and unpickles data.pkl with an allowlist, rebuilding tensors from the raw bytes without
PyTorch's unpickling internals (which differ by version, and in Debian's 1.13 ignore a custom
pickle module unless weights_only is set, which in turn cannot read floats).
"""
import collections
import pickle
import zipfile

import torch

STORAGE_DTYPES = {
    "FloatStorage": torch.float32, "DoubleStorage": torch.float64,
    "HalfStorage": torch.float16, "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64, "IntStorage": torch.int32, "ShortStorage": torch.int16,
    "CharStorage": torch.int8, "ByteStorage": torch.uint8, "BoolStorage": torch.bool,
}
DTYPE_NAMES = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8", "bool"}


class Refused(pickle.UnpicklingError):
    """The pickle names a class outside the allowlist."""


def _rebuild_tensor(storage, offset, size, stride, *unused):
    dtype, data = storage
    flat = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
    return flat.as_strided(tuple(size), tuple(stride), offset).clone()


def _rebuild_parameter(data, *unused):
    return data


def _namespace(*args, **kwargs):
    import argparse
    return argparse.Namespace(*args, **kwargs)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, root):
        super().__init__(file, encoding="utf-8")
        self.archive = archive
        self.root = root

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter",
                                                 "_rebuild_parameter_with_state"):
            return _rebuild_parameter
        if module == "torch" and name in STORAGE_DTYPES:
            return STORAGE_DTYPES[name]
        if module == "torch" and name in DTYPE_NAMES:
            return getattr(torch, name)
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch", "Size"):
            return torch.Size
        if (module, name) in (("argparse", "Namespace"), ("copyreg", "_reconstructor"),
                              ("builtins", "object"), ("builtins", "set"),
                              ("builtins", "frozenset")):
            return super().find_class(module, name)
        raise Refused(f"refusing to load {module}.{name}")

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 3 or pid[0] != "storage":
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r:.80}")
        dtype, key = pid[1], pid[2]
        if not isinstance(dtype, torch.dtype):
            raise Refused(f"refusing storage type {dtype!r:.80}")
        return dtype, self.archive.read(f"{self.root}/data/{key}")


def is_zip(path):
    return zipfile.is_zipfile(path)


def load(path):
    """The object torch.save wrote to `path` (tensors on the CPU). Raises Refused for a class
    outside the allowlist and other exceptions for files that are not torch zip archives."""
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise pickle.UnpicklingError("no data.pkl in the archive")
        root = pickles[0][:-len("/data.pkl")]
        order = f"{root}/byteorder"
        if order in archive.namelist() and archive.read(order).strip() != b"little":
            raise pickle.UnpicklingError("big-endian archives are not supported")
        with archive.open(pickles[0]) as f:
            return _Unpickler(f, archive, root).load()
