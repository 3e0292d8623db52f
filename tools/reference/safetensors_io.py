"""Minimal safetensors reader/writer (the format: u64 little-endian header length, a JSON
header mapping names to {dtype, shape, data_offsets}, then the raw little-endian bytes).

Debian bookworm has no python3-safetensors; the format is small enough to write directly.
"""
import json
import struct

import torch

_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}
_FROM_NAME = {v: k for k, v in _DTYPES.items()}


def save(tensors, path, metadata=None):
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        # bf16 has no numpy dtype: reinterpret as int16 to get the raw bytes.
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _FROM_NAME[info["dtype"]]
        buf = bytearray(data[base + begin:base + end])
        if not buf:  # an empty tensor (frombuffer refuses an empty buffer)
            t = torch.empty(0, dtype=dtype)
        elif dtype == torch.bfloat16:
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(buf, dtype=dtype)
        out[name] = t.reshape(info["shape"]).clone()
    return out
