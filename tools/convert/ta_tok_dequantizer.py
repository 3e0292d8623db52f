"""Tar's TA-Tok (tok/ta_tok.py TextAlignedTokenizer): ta_tok.pth -> a ta_tok component holding
only the de-quantiser (TA-Tok ids -> AR-DTok condition features); the SigLIP2 teacher encoder
and the encode path stay behind.

The upstream file: torch.save({"model": {"args": <TextAlignedTokenizer kwargs>, "sd": ...}}),
loaded upstream with strict=True. Sizes: the bottleneck args give the codebook; the decoder is
transformers' Siglip2VisionConfig() updated with patch_size 1, num_hidden_layers
decoder_depth, hidden_size 1152, so its 12 heads and layer_norm_eps 1e-6 are the library
defaults (flags here, since the file cannot say them).
"""
import math

import component
import upstream

# The parts of TextAlignedTokenizer that encoding uses and decoding never does.
ENCODE_ONLY = ("encoder.", "encode_task_layer.", "bottleneck.in_linear.", "teacher.",
               "scale_layer.", "decoder.vision_model.head.")


def nested(path, args, keys, default=None):
    obj = args
    for k in keys:
        obj = upstream.as_dict(obj).get(k) if obj is not None else None
    return default if obj is None else obj


def convert(path, out_dir, n_head=12, layer_norm_eps=1e-6, dtype="f32", trust_pickle=False):
    ckpt = upstream.load_pickle(path, trust_pickle)
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        upstream.fail(path, "model", "expected ckpt['model'] = {args, sd} (TA-Tok's layout)")
    entry = ckpt["model"]
    if "sd" not in entry:
        upstream.fail(path, "model.sd", "missing")
    args = upstream.as_dict(entry.get("args"))
    sd = upstream.StateDict(path, upstream.as_dict(entry["sd"]), ENCODE_ONLY)
    reg = "bottleneck.regularizer."
    codebook_size, bottleneck_dim = sd.shape(reg + "embedding.weight")
    for key, want in (("codebook_size", codebook_size), ("bottleneck_dim", bottleneck_dim)):
        given = nested(path, args, ["bottleneck", "args", "regularizer", "args", key]) \
            if key == "codebook_size" else nested(path, args, ["bottleneck", "args", key])
        if given is not None and given > 0 and given != want:
            upstream.fail(path, reg + "embedding.weight",
                          f"{key} {want} disagrees with the args' {given}")
    l2 = bool(nested(path, args, ["bottleneck", "args", "regularizer", "args", "l2_normalized"],
                     False))
    depth = int(args.get("decoder_depth", 3))
    vm = "decoder.vision_model."
    hidden, in_dim = sd.shape(vm + "embeddings.patch_embedding.weight")
    num_patches = sd.shape(vm + "embeddings.position_embedding.weight")[0]
    if math.isqrt(num_patches) ** 2 != num_patches:
        upstream.fail(path, vm + "embeddings.position_embedding.weight",
                      f"{num_patches} positions do not form a square table")
    intermediate = sd.shape(vm + "encoder.layers.0.mlp.fc1.weight")[0]
    if hidden % n_head:
        upstream.fail(path, vm + "embeddings.patch_embedding.weight",
                      f"hidden size {hidden} is not divisible by {n_head} heads")
    sd.get(reg + "embedding.weight", [codebook_size, bottleneck_dim])
    sd.get(reg + "embedding_proj.weight", [bottleneck_dim, bottleneck_dim])
    sd.get(reg + "embedding_proj.bias", [bottleneck_dim])
    sd.get("bottleneck.out_linear.weight", [in_dim, bottleneck_dim])
    sd.get("bottleneck.out_linear.bias", [in_dim])
    sd.get(vm + "embeddings.patch_embedding.weight", [hidden, in_dim])
    sd.get(vm + "embeddings.patch_embedding.bias", [hidden])
    sd.get(vm + "embeddings.position_embedding.weight", [num_patches, hidden])
    for i in range(depth):
        p = f"{vm}encoder.layers.{i}."
        for norm in ("layer_norm1", "layer_norm2"):
            sd.get(p + norm + ".weight", [hidden])
            sd.get(p + norm + ".bias", [hidden])
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            sd.get(p + f"self_attn.{proj}.weight", [hidden, hidden])
            sd.get(p + f"self_attn.{proj}.bias", [hidden])
        sd.get(p + "mlp.fc1.weight", [intermediate, hidden])
        sd.get(p + "mlp.fc1.bias", [intermediate])
        sd.get(p + "mlp.fc2.weight", [hidden, intermediate])
        sd.get(p + "mlp.fc2.bias", [hidden])
    if sd.has(f"{vm}encoder.layers.{depth}.mlp.fc1.weight"):
        upstream.fail(path, f"{vm}encoder.layers.{depth}.mlp.fc1.weight",
                      f"the decoder has more layers than decoder_depth {depth}")
    sd.get(vm + "post_layernorm.weight", [hidden])
    sd.get(vm + "post_layernorm.bias", [hidden])
    for i in (0, 2):
        sd.get(f"decode_task_layer.{i}.weight", [hidden, hidden])
        sd.get(f"decode_task_layer.{i}.bias", [hidden])
    tensors = sd.finish()
    config = dict(codebook_size=codebook_size, bottleneck_dim=bottleneck_dim, l2_normalized=l2,
                  in_dim=in_dim, hidden=hidden, n_layer=depth, n_head=n_head,
                  intermediate=intermediate, num_patches=num_patches,
                  layer_norm_eps=layer_norm_eps)
    print(f"{path}: TA-Tok de-quantiser, {codebook_size} codes of width {bottleneck_dim}, "
          f"{depth}-layer decoder of width {hidden}", flush=True)
    component.write(out_dir, config, tensors, dtype,
                    dict(upstream="csuhan/Tar TA-Tok", file=path))
    return config
