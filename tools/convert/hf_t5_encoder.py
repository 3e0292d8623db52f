"""The encoder of a Hugging Face T5 v1.1 directory (google/flan-t5-xl, LlamaGen t2i's text
encoder) -> a `t5_encoder` component.

The upstream directory: config.json (model_type "t5", feed_forward_proj "gated-gelu": d_model,
d_kv, d_ff, num_layers, num_heads, relative_attention_num_buckets,
relative_attention_max_distance, layer_norm_epsilon, vocab_size) and the weights as
model.safetensors or shards. A whole T5ForConditionalGeneration checkpoint carries the decoder
and the LM head too; only the encoder is kept.

spiece.model (FLAN-T5's sentencepiece model, which the Hugging Face repository ships beside the
weights) is copied into the component when present: the server reads it to tokenise a text
prompt for LlamaGen t2i (server/prompt_encoder.h).

Our component keeps the encoder's own names without "encoder." (block.{i}.layer.0.SelfAttention
.{q,k,v,o}, block.0's relative_attention_bias, block.{i}.layer.1.DenseReluDense.{wi_0,wi_1,wo},
the layer norms, final_layer_norm) and the shared embedding as embed_tokens.weight.
"""
import os
import shutil

import torch

import component
import hf_files
import kinds
import upstream

IGNORED = ("decoder.", "lm_head.weight")  # the rest of a full T5 checkpoint


def convert(directory, out_dir, dtype="auto", flag="hf-t5-encoder --dir"):
    """`flag`: the option that named the directory, for refusals."""
    config_path, cfg = hf_files.read_config(directory, flag)
    kinds.check_config(config_path, cfg, ("t5",),
                       f"the Hugging Face T5 v1.1 directory (google/flan-t5-xl) {flag} takes")
    if cfg.get("model_type") != "t5":
        upstream.fail(config_path, "model_type", f"{cfg.get('model_type')!r}: expected 't5'")
    if cfg.get("feed_forward_proj") != "gated-gelu":
        upstream.fail(config_path, "feed_forward_proj",
                      f"{cfg.get('feed_forward_proj')!r}: only T5 v1.1's 'gated-gelu' is "
                      f"supported (FLAN-T5, LlamaGen t2i)")
    hf_files.require_positive(config_path, cfg, (
        "d_model", "d_kv", "d_ff", "num_layers", "num_heads", "vocab_size",
        "relative_attention_num_buckets", "relative_attention_max_distance",
        "layer_norm_epsilon"))
    d, dk, ff = cfg["d_model"], cfg["d_kv"], cfg["d_ff"]
    n_layer, heads, vocab = cfg["num_layers"], cfg["num_heads"], cfg["vocab_size"]
    buckets = cfg["relative_attention_num_buckets"]
    inner = heads * dk

    path, raw = hf_files.load_weights(directory)
    sd = upstream.StateDict(path, raw, IGNORED)
    out = {"embed_tokens.weight": sd.get("shared.weight", [vocab, d])}
    if sd.has("encoder.embed_tokens.weight"):  # the same matrix, saved twice by some writers
        if not torch.equal(sd.get("encoder.embed_tokens.weight", [vocab, d]),
                           out["embed_tokens.weight"]):
            upstream.fail(path, "encoder.embed_tokens.weight", "differs from shared.weight")
    shapes = {
        "layer.0.SelfAttention.q.weight": [inner, d],
        "layer.0.SelfAttention.k.weight": [inner, d],
        "layer.0.SelfAttention.v.weight": [inner, d],
        "layer.0.SelfAttention.o.weight": [d, inner],
        "layer.0.layer_norm.weight": [d],
        "layer.1.DenseReluDense.wi_0.weight": [ff, d],
        "layer.1.DenseReluDense.wi_1.weight": [ff, d],
        "layer.1.DenseReluDense.wo.weight": [d, ff],
        "layer.1.layer_norm.weight": [d],
    }
    for i in range(n_layer):
        for name, shape in shapes.items():
            out[f"block.{i}.{name}"] = sd.get(f"encoder.block.{i}.{name}", shape)
    bias = "block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    out[bias] = sd.get("encoder." + bias, [buckets, heads])
    if sd.has(f"encoder.block.{n_layer}.layer.0.layer_norm.weight"):
        upstream.fail(path, f"encoder.block.{n_layer}.layer.0.layer_norm.weight",
                      f"the checkpoint has more blocks than config.json's {n_layer}")
    out["final_layer_norm.weight"] = sd.get("encoder.final_layer_norm.weight", [d])
    sd.finish()
    config = dict(architecture="t5_encoder", d_model=d, d_kv=dk, d_ff=ff, num_layers=n_layer,
                  num_heads=heads, vocab_size=vocab, num_buckets=buckets,
                  max_distance=cfg["relative_attention_max_distance"],
                  norm_eps=float(cfg["layer_norm_epsilon"]))
    print(f"{directory}: T5 v1.1 encoder, {n_layer} blocks, {d} wide, {heads} heads of {dk}, "
          f"vocabulary {vocab}", flush=True)
    component.write(out_dir, config, out, dtype,
                    dict(upstream="Hugging Face t5 (encoder)", file=directory))
    spiece = os.path.join(directory, "spiece.model")
    if os.path.exists(spiece):
        shutil.copyfile(spiece, os.path.join(out_dir, "spiece.model"))
    else:
        print(f"{directory}: no spiece.model: the component serves features, not text prompts",
              flush=True)
    return config
