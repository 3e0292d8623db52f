"""Writes files in the upstream layouts (the same state-dict names and pickled structure as the
upstream save code) from our reference modules: the converter's test inputs and the
full-size random-weight replicas. Nothing here is used to serve real checkpoints.

  Tar AR-DTok  torch.save({"model": {"name", "args", "sd"}})              (tok/ar_dtok)
  TA-Tok       torch.save({"model": {"args", "sd"}}), encoder included    (tok/ta_tok.py)
  LlamaGen GPT torch.save({"model": sd, "steps", "args": Namespace})      (train_*.py)
  LlamaGen VQ  torch.save({"model": sd}) with quantize.codebook_used      (train_vq.py)
"""
import argparse

import torch

NULL_ROWS = 120  # LlamaGen's CaptionEmbedder keeps 120 null rows whatever cls_token_num is


def tar_ar(path, model, name, max_seq_len, cls_token_num, dtype=torch.float32):
    sd = {k: v.to(dtype) for k, v in model.state_dict().items()}
    args = dict(vocab_size=model.cfg["vocab_size"], max_seq_len=max_seq_len,
                cls_token_num=cls_token_num, model_type="clip_cond",
                multiple_of=model.cfg.get("multiple_of", 256),
                norm_eps=model.cfg.get("norm_eps", 1e-5), dropout_p=0.1)
    torch.save({"model": {"name": name, "args": args, "sd": sd}}, path)


def ta_tok(path, dequantizer, gen, bottleneck_token_num=729):
    """The de-quantiser's tensors plus stand-ins for the encode-only parts the real file holds
    (SigLIP2 teacher encoder, encode_task_layer, in_linear, the pooling head)."""
    cfg = dequantizer.cfg
    sd = dict(dequantizer.state_dict())
    h, bd = cfg["hidden"], cfg["bottleneck_dim"]
    for key, shape in (("encoder.embeddings.patch_embedding.weight", [h, 3, 14, 14]),
                       ("encoder.post_layernorm.weight", [h]),
                       ("encode_task_layer.0.weight", [h, h]),
                       ("encode_task_layer.0.bias", [h]),
                       ("bottleneck.in_linear.weight", [bd, h]),
                       ("bottleneck.in_linear.bias", [bd]),
                       ("decoder.vision_model.head.probe", [1, 1, h])):
        sd[key] = torch.randn(shape, generator=gen)
    args = dict(bottleneck=dict(name="bottleneck", args=dict(
                    bottleneck_dim=bd, regularizer=dict(name="simvq", args=dict(
                        codebook_size=cfg["codebook_size"], l2_normalized=cfg["l2_normalized"],
                        stochastic=True, stochastic_temperature=0.03)))),
                bottleneck_token_num=bottleneck_token_num, input_size=384,
                teacher="google/siglip2-so400m-patch14-384", input_type="rec", pool_scale=1,
                decoder_depth=cfg["n_layer"], select_layer_id=-2)
    torch.save({"model": {"args": args, "sd": sd}}, path)


def llamagen_gpt(path, model, gen, namespace_args=None, dtype=torch.float32):
    """namespace_args: a dict saved as the argparse.Namespace training checkpoints carry; None
    saves the weights only, as the released files are."""
    sd = {k: v.to(dtype) for k, v in model.state_dict().items()}
    key = "cls_embedding.uncond_embedding"
    if key in sd and sd[key].size(0) < NULL_ROWS:
        extra = torch.randn(NULL_ROWS - sd[key].size(0), sd[key].size(1), generator=gen)
        sd[key] = torch.cat([sd[key], extra.to(dtype)])
    ckpt = {"model": sd}
    if namespace_args is not None:
        ckpt.update(steps=0, args=argparse.Namespace(**namespace_args))
    torch.save(ckpt, path)


def llamagen_vq(path, model, dtype=torch.float32):
    sd = {k: v.to(dtype) for k, v in model.state_dict().items()}
    sd["quantize.codebook_used"] = torch.zeros(65536)
    torch.save({"model": sd}, path)
