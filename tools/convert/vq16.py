"""LlamaGen VQ tokenizer (tokenizer/tokenizer_image/vq_model.py): vq_ds16_*.pt / vq_ds8_*.pt
-> a vq component.

The upstream file: torch.save({"model": <state dict>, ...}). Every key is checked against our
reference VQModel (upstream key names, encoder included: the resampler training tokenises
images with it); `quantize.codebook_used` is upstream's usage counter and is dropped.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import vq_decoder as vq  # noqa: E402

import component  # noqa: E402
import kinds  # noqa: E402
import upstream  # noqa: E402

# VQ_models: name -> the architecture (ModelArgs defaults: ch 128, 2 res blocks,
# GroupNorm(32), z_channels 256, an L2-normalised codebook).
_VQ_ARGS = dict(z_channels=256, ch=128, num_res_blocks=2, norm_groups=32, codebook_l2_norm=True,
                out_channels=3)
REGISTRY = {
    "VQ-16": dict(_VQ_ARGS, ch_mult=[1, 1, 2, 2, 4]),
    "VQ-8": dict(_VQ_ARGS, ch_mult=[1, 2, 2, 4]),
}


def vq_config(name, codebook_size, codebook_embed_dim):
    return dict(REGISTRY[name], codebook_size=codebook_size,
                codebook_embed_dim=codebook_embed_dim)


def expected_shapes(cfg):
    """Names and shapes of the reference model's state dict."""
    with torch.no_grad():
        model = vq.VQModel(cfg, with_encoder=True)
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def convert(path, out_dir, vq_model="VQ-16", dtype="f32", trust_pickle=False,
            flag="vq --ckpt"):
    """The codebook's size and width are read off quantize.embedding.weight (upstream's
    --codebook-size / --codebook-embed-dim); the rest of the architecture from `vq_model`.
    `flag`: the option that named the file, for refusals."""
    if vq_model not in REGISTRY:
        upstream.fail(path, "vq_model", f"unknown {vq_model!r} (known: {', '.join(REGISTRY)})")
    ckpt = upstream.load_pickle(path, trust_pickle)
    kinds.check_checkpoint(path, ckpt, ("vq",),
                           f"the LlamaGen VQ tokenizer (vq_ds16_*.pt) {flag} takes")
    sd = upstream.StateDict(path, upstream.state_dict_of(path, ckpt, ("model", "state_dict")),
                            vq.UPSTREAM_BOOKKEEPING)
    return convert_state(sd, "", out_dir, vq_model, dtype,
                         dict(upstream="FoundationVision/LlamaGen VQ", file=path,
                              registry_name=vq_model))


def convert_state(sd, prefix, out_dir, vq_model, dtype, source):
    """The VQ's tensors under `prefix` of the upstream.StateDict sd (Janus-Pro nests the same
    model as gen_vision_model.*) -> a vq component. Marks them read in sd."""
    if vq_model not in REGISTRY:
        upstream.fail(sd.path, "vq_model", f"unknown {vq_model!r} (known: {', '.join(REGISTRY)})")
    codebook = sd.shape(prefix + "quantize.embedding.weight")
    if len(codebook) != 2:
        upstream.fail(sd.path, prefix + "quantize.embedding.weight",
                      f"shape {codebook}, expected [size, dim]")
    config = vq_config(vq_model, *codebook)
    tensors = {key: sd.get(prefix + key, shape) for key, shape in expected_shapes(config).items()}
    if not prefix:
        sd.finish()
    print(f"{sd.path}: LlamaGen {vq_model}, {config['codebook_size']} x "
          f"{config['codebook_embed_dim']} codebook", flush=True)
    component.write(out_dir, config, tensors, dtype, source)
    return config
