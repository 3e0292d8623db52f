"""Writing one converted component: <dir>/config.json, <dir>/model.safetensors (upstream tensor
names, the storage dtype asked for) and <dir>/source.json (which upstream file it came from)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import safetensors_io  # noqa: E402

import staging  # noqa: E402
import upstream  # noqa: E402


def write(out_dir, config, tensors, dtype_name, source):
    dtype = upstream.storage_dtype(dtype_name, tensors)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    converted = {k: v.to(dtype) for k, v in tensors.items()}
    safetensors_io.save(converted, os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "source.json"), "w") as f:
        json.dump(dict(source, stored_as=str(dtype).replace("torch.", "")), f, indent=2,
                  sort_keys=True)
        f.write("\n")
    n = upstream.parameter_count(tensors)
    print(f"  wrote {staging.shown(out_dir)}: {n / 1e6:.2f} M parameters as {str(dtype).replace('torch.', '')}",
          flush=True)
    return n


# Buffers a Tar or LlamaGen transformer saved after generation set up its caches may hold;
# never weights.
CACHE_BUFFERS = ("freqs_cis", "causal_mask", "*.kv_cache.k_cache", "*.kv_cache.v_cache")


def read_trunk(sd, n_layer, dim, n_head, n_kv_head, hidden, vocab):
    """What Tar AR-DTok and LlamaGen GPT share under the same key names: token embeddings,
    the LLaMA-style blocks, the final norm and the output head."""
    sd.get("tok_embeddings.weight", [vocab, dim])
    head_dim = dim // n_head
    qkv = (n_head + 2 * n_kv_head) * head_dim
    for i in range(n_layer):
        p = f"layers.{i}."
        sd.get(p + "attention.wqkv.weight", [qkv, dim])
        sd.get(p + "attention.wo.weight", [dim, dim])
        sd.get(p + "feed_forward.w1.weight", [hidden, dim])
        sd.get(p + "feed_forward.w3.weight", [hidden, dim])
        sd.get(p + "feed_forward.w2.weight", [dim, hidden])
        sd.get(p + "attention_norm.weight", [dim])
        sd.get(p + "ffn_norm.weight", [dim])
    if sd.has(f"layers.{n_layer}.attention.wqkv.weight"):
        upstream.fail(sd.path, f"layers.{n_layer}.attention.wqkv.weight",
                      f"the checkpoint has more layers than the {n_layer} its args give")
    sd.get("norm.weight", [dim])
    sd.get("output.weight", [vocab, dim])


def ffn_hidden(dim, multiple_of, ffn_dim_multiplier):
    """LLaMA's SwiGLU width: find_multiple(int(m * int(2 * 4 * dim / 3)), multiple_of)."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    if hidden % multiple_of:
        hidden += multiple_of - hidden % multiple_of
    return hidden
