"""Reading a Hugging Face model directory: config.json and the weights as model.safetensors or
the shards model.safetensors.index.json lists. Errors name the file."""
import json
import os

import component  # noqa: F401  (puts tools/reference, where safetensors_io lives, on the path)
import safetensors_io
import upstream


def read_config(directory, flag="--dir"):
    """(path, dict) of <directory>/config.json; `flag`: the option that named the directory."""
    what = "a Hugging Face model directory (config.json beside the weights)"
    upstream.require_dir(directory, flag, what)
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        found = sorted(os.listdir(directory))
        raise upstream.ConversionError(
            f"{path}: missing: {flag} takes {what}, as huggingface-cli download writes it; "
            f"{directory} holds " + (", ".join(found[:8]) + (" ..." if len(found) > 8 else "")
                                     if found else "nothing"))
    try:
        with open(path) as f:
            cfg = json.load(f)
    except ValueError as e:
        raise upstream.ConversionError(f"{path}: not JSON: {e}")
    if not isinstance(cfg, dict):
        raise upstream.ConversionError(f"{path}: not a JSON object")
    return path, cfg


def require_positive(path, cfg, keys):
    """Each of `keys` in config.json is a positive number; else a ConversionError naming it."""
    for key in keys:
        if not isinstance(cfg.get(key), (int, float)) or cfg[key] <= 0:
            upstream.fail(path, key, "missing or not positive")


def load_weights(directory, trust_pickle=False):
    """(path, {name: tensor}): the single file or every shard the index lists, as safetensors
    (model.safetensors[.index.json]) or PyTorch .bin files (pytorch_model.bin[.index.json],
    what Janus-Pro ships), the latter read without running pickled code unless trust_pickle."""
    index = os.path.join(directory, "model.safetensors.index.json")
    single = os.path.join(directory, "model.safetensors")
    if not os.path.isfile(index) and not os.path.isfile(single):
        return _load_bin(directory, trust_pickle)
    if os.path.isfile(index):
        with open(index) as f:
            weight_map = json.load(f).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            upstream.fail(index, "weight_map", "missing or empty")
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            path = os.path.join(directory, shard)
            if not os.path.isfile(path):
                upstream.fail(index, "weight_map", f"lists {shard}, which is not in {directory}")
            tensors.update(safetensors_io.load(path))
        return index, tensors
    if os.path.isfile(single):
        return single, safetensors_io.load(single)


def _load_bin(directory, trust_pickle):
    index = os.path.join(directory, "pytorch_model.bin.index.json")
    single = os.path.join(directory, "pytorch_model.bin")
    if os.path.isfile(index):
        with open(index) as f:
            weight_map = json.load(f).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            upstream.fail(index, "weight_map", "missing or empty")
        paths = []
        for shard in sorted(set(weight_map.values())):
            path = os.path.join(directory, shard)
            if not os.path.isfile(path):
                upstream.fail(index, "weight_map", f"lists {shard}, which is not in {directory}")
            paths.append(path)
        found = index
    elif os.path.isfile(single):
        paths, found = [single], single
    else:
        raise upstream.ConversionError(
            f"{directory}: no model.safetensors, pytorch_model.bin or their .index.json")
    tensors = {}
    for path in paths:
        state = upstream.load_pickle(path, trust_pickle)
        if not isinstance(state, dict):
            upstream.fail(path, "<root>", f"expected a dict of tensors, found {type(state).__name__}")
        tensors.update(state)
    return found, tensors


