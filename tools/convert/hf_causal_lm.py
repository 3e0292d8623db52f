"""A Hugging Face Qwen2 / LLaMA causal language model directory -> a `causal_lm` component.

The upstream directory (what `huggingface-cli download Qwen/Qwen2.5-1.5B-Instruct` or Tar's
MLLM checkpoint gives): config.json (model_type "qwen2" or "llama"; hidden_size,
num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, rms_norm_eps,
rope_theta, vocab_size, tie_word_embeddings, max_position_embeddings) and the weights as
model.safetensors or shards listed by model.safetensors.index.json.

tokenizer.json must be there (the server tokenises prompts with it; convert.py refuses a
directory without it, naming the file). When its added tokens include image tokens written
`<I0>`, `<I1>`, ... (Tar's MLLM: `<I0>`-`<I65535>`), their ids must run consecutively inside the
vocabulary; the component's config.json then names them (image_token_offset: the id of `<I0>`,
image_token_count) and tokenizer.json is copied beside the weights, so that a family can use
the model as its MLLM stage (engine/model/causal_lm.h) and the server can tokenise prompts.

Our component keeps the block layout the engine's other transformers use: q, k and v are stacked
into attention.wqkv (with their biases for Qwen2), gate / up / down become feed_forward.w1 / w3
/ w2. Hugging Face rotates dims i and i + d/2 of a head together; the engine rotates
interleaved pairs (2i, 2i + 1) with the same frequencies, so the rows of q and k (weights and
biases) are reordered per head: row 2i <- i, 2i + 1 <- i + d/2. Attention scores are unchanged
(the same reordering of q and k), so the logits are the upstream model's.
"""
import json
import os
import re
import shutil

import torch

import component
import hf_files
import kinds
import upstream

ARCHITECTURES = {"qwen2": True, "llama": False}  # model_type -> q/k/v biases by default
ROPE_SCALING_NONE = (None, {}, {"type": "default"}, {"rope_type": "default"})


def _interleave_rotary_rows(w, heads, head_dim):
    """Rows of q or k (weight [heads * d, in] or bias [heads * d]) from the rotate-half order
    to interleaved pairs, per head."""
    half = head_dim // 2
    order = torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).reshape(-1)
    shaped = w.reshape(heads, head_dim, *w.shape[1:])
    return shaped[:, order].reshape(w.shape)


IMAGE_TOKEN = re.compile(r"<I(0|[1-9][0-9]*)>")


def image_tokens(directory, vocab):
    """(offset, count) of the `<Ik>` added tokens in directory/tokenizer.json, or None."""
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except ValueError as e:
        raise upstream.ConversionError(f"{path}: not JSON ({e}): expected the model's "
                                       f"Hugging Face tokenizer.json")
    added = (doc.get("added_tokens") if isinstance(doc, dict) else None) or []
    codes = {}
    for token in added:
        if not isinstance(token, dict):
            continue
        match = IMAGE_TOKEN.fullmatch(str(token.get("content", "")))
        if match:
            if not isinstance(token.get("id"), int):
                upstream.fail(path, "added_tokens", f"{match.group(0)} has no integer id")
            codes[int(match.group(1))] = token["id"]
    if not codes:
        return None
    count = len(codes)
    offset = codes.get(0)
    if offset is None or sorted(codes) != list(range(count)) or any(
            codes[k] != offset + k for k in range(count)):
        upstream.fail(path, "added_tokens", f"the {count} image tokens <I0>.. must be <I0>.."
                                            f"<I{count - 1}> at consecutive ids")
    if offset + count > vocab:
        upstream.fail(path, "added_tokens", f"image tokens up to id {offset + count - 1} lie "
                                            f"past config.json's vocab_size {vocab}")
    return offset, count


def language_model_config(cfg, config_path):
    """A LLaMA / Qwen2 language model's Hugging Face config dict (read from config_path) ->
    our component config. Refusals name the file and the field."""
    model_type = cfg.get("model_type")
    if model_type not in ARCHITECTURES:
        upstream.fail(config_path, "model_type", f"{model_type!r}: only "
                                                 f"{', '.join(sorted(ARCHITECTURES))} are supported")
    hf_files.require_positive(config_path, cfg, (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "vocab_size", "rms_norm_eps"))
    if cfg.get("rope_scaling") not in ROPE_SCALING_NONE:
        upstream.fail(config_path, "rope_scaling", f"{cfg['rope_scaling']!r}: only unscaled "
                                                   f"rotary positions are supported")
    dim, n_layer = cfg["hidden_size"], cfg["num_hidden_layers"]
    n_head = cfg["num_attention_heads"]
    n_kv_head = cfg.get("num_key_value_heads") or n_head
    if dim % n_head or n_head % n_kv_head or (dim // n_head) % 2:
        upstream.fail(config_path, "num_attention_heads",
                      f"{n_head} heads of {dim} / {n_kv_head} key-value heads do not divide")
    head_dim = dim // n_head
    if cfg.get("head_dim", head_dim) != head_dim:
        upstream.fail(config_path, "head_dim", f"{cfg['head_dim']}: only hidden_size / "
                                               f"num_attention_heads ({head_dim}) is supported")
    hidden, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    bias = ARCHITECTURES[model_type] if model_type == "qwen2" else bool(
        cfg.get("attention_bias", False))
    tied = bool(cfg.get("tie_word_embeddings", False))
    return dict(architecture=model_type, dim=dim, n_layer=n_layer, n_head=n_head,
                n_kv_head=n_kv_head, vocab_size=vocab, ffn_hidden_dim=hidden,
                norm_eps=float(cfg["rms_norm_eps"]),
                rope_theta=float(cfg.get("rope_theta", 10000.0)), qkv_bias=bias,
                tie_word_embeddings=tied,
                max_positions=int(cfg.get("max_position_embeddings", 32768)))


def language_model_tensors(config, sd, prefix=""):
    """The language model's tensors (keys under `prefix` in the StateDict sd: "" for a plain
    directory, "language_model." for one nested in a multimodal checkpoint such as
    Janus-Pro's) in our block layout, for `config` (language_model_config's). Refusals name
    the file and the key."""
    dim, n_layer, n_head, n_kv_head = (config["dim"], config["n_layer"], config["n_head"],
                                       config["n_kv_head"])
    head_dim, hidden, vocab = dim // n_head, config["ffn_hidden_dim"], config["vocab_size"]
    bias, tied = config["qkv_bias"], config["tie_word_embeddings"]
    m = prefix + "model."
    out = {"tok_embeddings.weight": sd.get(m + "embed_tokens.weight", [vocab, dim])}
    for i in range(n_layer):
        p, q = f"{m}layers.{i}.", f"layers.{i}."
        a = p + "self_attn."
        wq = _interleave_rotary_rows(sd.get(a + "q_proj.weight", [n_head * head_dim, dim]),
                                     n_head, head_dim)
        wk = _interleave_rotary_rows(sd.get(a + "k_proj.weight", [n_kv_head * head_dim, dim]),
                                     n_kv_head, head_dim)
        wv = sd.get(a + "v_proj.weight", [n_kv_head * head_dim, dim])
        out[q + "attention.wqkv.weight"] = torch.cat([wq, wk, wv])
        if bias:
            bq = _interleave_rotary_rows(sd.get(a + "q_proj.bias", [n_head * head_dim]),
                                         n_head, head_dim)
            bk = _interleave_rotary_rows(sd.get(a + "k_proj.bias", [n_kv_head * head_dim]),
                                         n_kv_head, head_dim)
            bv = sd.get(a + "v_proj.bias", [n_kv_head * head_dim])
            out[q + "attention.wqkv.bias"] = torch.cat([bq, bk, bv])
        out[q + "attention.wo.weight"] = sd.get(a + "o_proj.weight", [dim, n_head * head_dim])
        out[q + "feed_forward.w1.weight"] = sd.get(p + "mlp.gate_proj.weight", [hidden, dim])
        out[q + "feed_forward.w3.weight"] = sd.get(p + "mlp.up_proj.weight", [hidden, dim])
        out[q + "feed_forward.w2.weight"] = sd.get(p + "mlp.down_proj.weight", [dim, hidden])
        out[q + "attention_norm.weight"] = sd.get(p + "input_layernorm.weight", [dim])
        out[q + "ffn_norm.weight"] = sd.get(p + "post_attention_layernorm.weight", [dim])
    if sd.has(f"{m}layers.{n_layer}.input_layernorm.weight"):
        upstream.fail(sd.path, f"{m}layers.{n_layer}.input_layernorm.weight",
                      f"the checkpoint has more layers than config.json's {n_layer}")
    out["norm.weight"] = sd.get(m + "norm.weight", [dim])
    if not tied:
        out["output.weight"] = sd.get(prefix + "lm_head.weight", [vocab, dim])
    elif sd.has(prefix + "lm_head.weight"):
        # Some tied checkpoints store the head anyway; it must be the embedding.
        head = sd.get(prefix + "lm_head.weight", [vocab, dim])
        if not torch.equal(head, out["tok_embeddings.weight"]):
            upstream.fail(sd.path, prefix + "lm_head.weight",
                          f"differs from {m}embed_tokens.weight, though config.json ties them")
    return out


def inspect(directory, flag="hf-causal-lm --dir", require_tokenizer=True):
    """What the directory's config.json and tokenizer.json say, read before any weight (so a
    family command can refuse early): (config_path, our config, (offset, count) of the image
    tokens or None). Refuses a directory that is not a Qwen2 / LLaMA language model, naming
    what it is, and (require_tokenizer) one without tokenizer.json."""
    config_path, cfg = hf_files.read_config(directory, flag)
    kinds.check_config(config_path, cfg, ("hf-lm",),
                       f"the Hugging Face Qwen2 / LLaMA language model directory {flag} takes")
    config = language_model_config(cfg, config_path)
    tokenizer = os.path.join(directory, "tokenizer.json")
    if require_tokenizer and not os.path.isfile(tokenizer):
        raise upstream.ConversionError(
            f"{tokenizer}: missing: the server tokenises prompts with the model's own "
            f"tokenizer.json (and finds Tar's image tokens <I0>.. in it); download it with the "
            f"weights (huggingface-cli download csuhan/Tar-1.5B fetches it) into {directory}")
    return config_path, config, image_tokens(directory, config["vocab_size"])


def convert(directory, out_dir, dtype="auto", flag="hf-causal-lm --dir", require_tokenizer=False,
            image_token_count=None):
    """`flag`: the option that named the directory, for refusals. require_tokenizer: refuse a
    directory without tokenizer.json (the command line does). image_token_count: the number of
    image tokens <I0>.. the tokenizer must name (a Tar MLLM: the TA-Tok codebook's size)."""
    config_path, config, images = inspect(directory, flag, require_tokenizer)
    tokenizer = os.path.join(directory, "tokenizer.json")
    if image_token_count is not None:
        if not images:
            upstream.fail(tokenizer, "added_tokens",
                          f"no image tokens <I0>..: a Tar MLLM writes the {image_token_count} "
                          f"TA-Tok ids as <I0>..<I{image_token_count - 1}>; give {flag} the "
                          f"Tar MLLM's own directory (csuhan/Tar-1.5B)")
        if images[1] != image_token_count:
            upstream.fail(tokenizer, "added_tokens",
                          f"{images[1]} image tokens <I0>..<I{images[1] - 1}>, but the family's "
                          f"TA-Tok codebook has {image_token_count} codes: the MLLM and ta_tok "
                          f"must come from the same Tar release")
    path, raw = hf_files.load_weights(directory)
    sd = upstream.StateDict(path, raw, ("model.rotary_emb.", "*.rotary_emb.inv_freq"))
    out = language_model_tensors(config, sd)
    sd.finish()
    model_type, vocab = config["architecture"], config["vocab_size"]
    dim, n_layer, n_head, n_kv_head = (config["dim"], config["n_layer"], config["n_head"],
                                       config["n_kv_head"])
    if images:
        config.update(image_token_offset=images[0], image_token_count=images[1])
    print(f"{directory}: {model_type}, {n_layer} layers, {dim} wide, {n_head} / {n_kv_head} "
          f"heads, vocabulary {vocab}" +
          (f", image tokens {images[1]} from id {images[0]}" if images else
           "; no image tokens <I0>.. in tokenizer.json: a text-only component, which cannot be "
           "a family's mllm" if os.path.isfile(tokenizer) else ""), flush=True)
    component.write(out_dir, config, out, dtype,
                    dict(upstream=f"Hugging Face {model_type}", file=directory))
    if os.path.isfile(tokenizer):
        shutil.copyfile(tokenizer, os.path.join(out_dir, "tokenizer.json"))
    return config
