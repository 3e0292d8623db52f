"""Tar's TA-Tok (tok/ta_tok.py TextAlignedTokenizer): ta_tok.pth -> a ta_tok component holding
only the de-quantiser (TA-Tok ids -> AR-DTok condition features); the SigLIP2 teacher encoder
and the encode path stay behind.

The upstream file: torch.save({"model": {"args": <TextAlignedTokenizer kwargs>, "sd": ...}}),
loaded upstream with strict=True. Sizes: the bottleneck args give the codebook; the decoder is
transformers' Siglip2VisionConfig() updated with patch_size 1, num_hidden_layers
decoder_depth, hidden_size 1152, so its 12 heads and layer_norm_eps 1e-6 are the library
defaults. The file does not record them: 12 heads are taken for the released 1152-wide
decoder, where Tar's code is known to have built it so, and said; a decoder of any other width
needs --ta-tok-heads (n_head here), which must divide its width. Never a silent guess.
"""
import math

import component
import kinds
import upstream

# Tar builds the decoder from transformers' Siglip2VisionConfig() defaults: 12 heads; the
# released ta_tok.pth's decoder is 1152 wide (its SigLIP2 so400m teacher's width).
DEFAULT_HEADS = 12
RELEASED_WIDTH = 1152

# The parts of TextAlignedTokenizer that encoding uses and decoding never does.
ENCODE_ONLY = ("encoder.", "encode_task_layer.", "bottleneck.in_linear.", "teacher.",
               "scale_layer.", "decoder.vision_model.head.")


def nested(path, args, keys, default=None):
    obj = args
    for k in keys:
        obj = upstream.as_dict(obj).get(k) if obj is not None else None
    return default if obj is None else obj


def heads_for(path, key, hidden, n_head, flag):
    """(heads, where the count comes from) for a decoder `hidden` wide; n_head: the flag's
    value or None."""
    if n_head is not None:
        if n_head <= 0 or hidden % n_head:
            upstream.fail(path, key, f"the decoder is {hidden} wide, which {flag} {n_head} does "
                                     f"not divide into heads; pass the head count it was built "
                                     f"with")
        return n_head, flag
    if hidden == RELEASED_WIDTH:
        return DEFAULT_HEADS, (f"the released TA-Tok's: Tar builds its {RELEASED_WIDTH}-wide "
                               f"decoder with Siglip2VisionConfig's default; {flag} to change")
    divides = "" if hidden % DEFAULT_HEADS == 0 else f", which does not even divide {hidden}"
    upstream.fail(path, key, f"the decoder is {hidden} wide, not the released TA-Tok's "
                             f"{RELEASED_WIDTH}, and the file does not record its attention "
                             f"heads (Tar's code would use Siglip2VisionConfig's default, "
                             f"{DEFAULT_HEADS}{divides}); pass {flag} N with the count it was "
                             f"built with")


def convert(path, out_dir, n_head=None, layer_norm_eps=1e-6, dtype="f32", trust_pickle=False,
            flag="ta-tok --ckpt", heads_flag="--ta-tok-heads"):
    """n_head None: 12 for the released 1152-wide decoder, else refused (heads_for).
    `flag`: the option that named the file, for refusals."""
    ckpt = upstream.load_pickle(path, trust_pickle)
    kinds.check_checkpoint(path, ckpt, ("ta-tok",),
                           f"Tar's TA-Tok (ta_tok.pth from csuhan/TA-Tok) that {flag} takes")
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
    n_head, heads_from = heads_for(path, vm + "embeddings.patch_embedding.weight", hidden,
                                   n_head, heads_flag)
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
          f"{depth}-layer decoder of width {hidden}, {n_head} heads ({heads_from})", flush=True)
    component.write(out_dir, config, tensors, dtype,
                    dict(upstream="csuhan/Tar TA-Tok", file=path))
    return config
