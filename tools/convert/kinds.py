"""What kind of upstream file a checkpoint or a Hugging Face directory is, read off its keys or
its config.json, so that a file handed to the wrong command is refused by what it is and what
to do with it, not by the first key that happens to disagree.

  identify_checkpoint(ckpt) -> (kind, key, evidence) | (None, None, None)  a torch.save object
  identify_config(cfg)      -> (kind, key, evidence) | (None, None, None)  a config.json dict
  refuse(path, key, kind, evidence, expected)   raises upstream.ConversionError

`key` is the field that gave the kind away and `evidence` says what it holds, for the
message, which names the file, that field, what the file is, what was expected and what to do.
"""
import upstream

# kind -> (what it is, where it goes)
KINDS = {
    "tar-ar": ("a Tar AR-DTok checkpoint (csuhan/TA-Tok ar_dtok_*.pth)",
               "convert it as tar-family's --target or --drafter (or with tar-ar)"),
    "ta-tok": ("Tar's TA-Tok (csuhan/TA-Tok ta_tok.pth)",
               "give it as tar-family's --ta-tok (or convert it with ta-tok)"),
    "vq": ("a LlamaGen VQ tokenizer (vq_ds16_*.pt)",
           "give it as --vq (tar-family, llamagen-family) or convert it with vq"),
    "llamagen-c2i": ("a LlamaGen class-to-image GPT (c2i_*.pt)",
                     "convert it with llamagen-family --gpt FILE --gpt-type c2i (and "
                     "vq_ds16_c2i.pt as --vq)"),
    "llamagen-t2i": ("a LlamaGen text-to-image GPT (t2i_*.pt)",
                     "convert it with llamagen-family --gpt FILE --gpt-type t2i (and "
                     "vq_ds16_t2i.pt as --vq)"),
    "janus": ("Janus-Pro (deepseek-ai/Janus-Pro-*)",
              "convert its directory with janus-family --dir"),
    "hf-lm": ("a Hugging Face Qwen2 / LLaMA language model (e.g. Tar's MLLM, csuhan/Tar-1.5B)",
              "give its directory as tar-family's --mllm (or convert it with hf-causal-lm)"),
    "t5": ("a Hugging Face T5 (e.g. google/flan-t5-xl)",
           "give its directory as llamagen-family's --t5 (or convert it with hf-t5-encoder)"),
}

LM_TYPES = ("qwen2", "llama")


def _state_dict(obj):
    """The {name: tensor} dict a wrapper holds (LlamaGen: model / module / state_dict; a
    pytorch_model.bin: itself), with DDP's "module." prefix dropped; else None."""
    if not isinstance(obj, dict):
        return None
    for key in ("model", "module", "state_dict"):
        inner = obj.get(key)
        if isinstance(inner, dict) and inner and all(isinstance(k, str) for k in inner) \
                and "sd" not in inner:
            obj = inner
            break
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in obj.items()
            if isinstance(k, str)}


def identify_checkpoint(ckpt):
    """(kind, key, evidence) of a loaded torch.save object, or (None, None, None)."""
    if not isinstance(ckpt, dict):
        return None, None, None
    model = ckpt.get("model")
    if isinstance(model, dict) and "sd" in model:
        sd = upstream.as_dict(model.get("sd"))
        if "bottleneck.regularizer.embedding.weight" in sd:
            return "ta-tok", "model.sd", "it holds bottleneck.regularizer.embedding.weight"
        if "clip_proj.weight" in sd or "abs_pe" in sd or "name" in model:
            return "tar-ar", "model.name", (f"{model.get('name')!r}, beside model.args and "
                                            f"model.sd with abs_pe and clip_proj")
    sd = _state_dict(ckpt) or {}
    for kind, key, found in (
            ("llamagen-c2i", "cls_embedding.embedding_table.weight", "a class-label embedding"),
            ("llamagen-t2i", "cls_embedding.cap_proj.fc1.weight", "a caption projection"),
            ("janus", "gen_embed.weight", "Janus-Pro's image-code embedding"),
            ("hf-lm", "model.embed_tokens.weight", "a Hugging Face language model's embedding"),
            ("t5", "shared.weight", "T5's shared embedding")):
        if key in sd:
            return kind, key, found
    if any(k.startswith("language_model.") for k in sd):
        return "janus", "language_model.*", "Janus-Pro's language model"
    if "quantize.embedding.weight" in sd and "tok_embeddings.weight" not in sd:
        return "vq", "quantize.embedding.weight", "a VQ codebook and no token embedding"
    return None, None, None


def identify_config(cfg):
    """(kind, key, evidence) of a Hugging Face config.json dict, or (None, None, None)."""
    if not isinstance(cfg, dict):
        return None, None, None
    model_type = cfg.get("model_type")
    arch = cfg.get("architectures")
    arch = arch[0] if isinstance(arch, list) and arch else None
    said = f"{model_type!r}" + (f", architectures [{arch!r}]" if arch else "")
    if model_type == "multi_modality" or "language_config" in cfg and "gen_head_config" in cfg:
        return "janus", "model_type", said + " with language_config and gen_* sections"
    if model_type in LM_TYPES:
        return "hf-lm", "model_type", said
    if model_type == "t5":
        return "t5", "model_type", said
    return None, None, None


def refuse(path, key, kind, evidence, expected):
    """Raises the refusal for a file of `kind` where `expected` (a phrase) was wanted."""
    what, todo = KINDS[kind]
    raise upstream.ConversionError(
        f"{path}: {key}: {evidence}: this is {what}, not {expected}; {todo}")


def check_checkpoint(path, ckpt, accepted, expected):
    """Refuses a checkpoint whose kind is known and not in `accepted`. Returns (kind, key,
    evidence); kind None when unknown (the layout's own checks then name the key that
    disagrees)."""
    found = identify_checkpoint(ckpt)
    if found[0] is not None and found[0] not in accepted:
        refuse(path, found[1], found[0], found[2], expected)
    return found


def check_config(path, cfg, accepted, expected):
    """The same for a Hugging Face directory's config.json."""
    found = identify_config(cfg)
    if found[0] is not None and found[0] not in accepted:
        refuse(path, found[1], found[0], found[2], expected)
    return found
