"""A Hugging Face Janus-Pro directory (deepseek-ai/Janus-Pro-1B or -7B) -> a mulo family.

The upstream directory: config.json (`language_config`: the LLaMA's sizes; `gen_vision_config`,
`gen_aligner_config`, `gen_head_config`: the generation path), the weights as
pytorch_model.bin (or shards listed by pytorch_model.bin.index.json, or safetensors), and the
tokenizer files (tokenizer.json, with the added tokens <｜begin▁of▁sentence｜>, <｜▁pad▁｜>,
<|User|>, <|Assistant|> and <begin_of_image>).

What is kept (key names as in deepseek-ai/Janus, janus/models/modeling_vlm.py):
  language_model.model.*                  -> target/ (block layout, hf_causal_lm)
  gen_embed, gen_aligner, gen_head        -> target/ (under the same names)
  gen_vision_model.*                      -> vq/ (LlamaGen's VQ-16 layout, vq16)
  tokenizer.json                          -> target/tokenizer.json
What is skipped, and said so: the understanding path (vision_model.*: SigLIP, aligner.*) and
the text head (language_model.lm_head: image logits come from gen_head).

The family: target (architecture "janus") + vq, grid 24 at 384 px (image size / 16), CFG 5
(upstream's generation script), temperature 1, pixels by truncation (uint8 cast).
"""
import json
import os
import shutil

import torch

import component
import family
import hf_causal_lm
import hf_files
import kinds
import upstream
import vq16

# Upstream's special tokens (the tokenizer's added tokens).
BOS = "<｜begin▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
IMAGE_START = "<begin_of_image>"
PROMPT_TOKENS = ("<|User|>", "<|Assistant|>", IMAGE_START)
SKIPPED = ("vision_model.", "aligner.", "language_model.lm_head.")
BOOKKEEPING = ("gen_vision_model.quantize.codebook_used", "language_model.model.rotary_emb.",
               "*.rotary_emb.inv_freq")


def _section(path, cfg, name):
    section = cfg.get(name)
    if not isinstance(section, dict):
        upstream.fail(path, name, "missing or not an object")
    params = section.get("params", {})
    if not isinstance(params, dict):
        upstream.fail(path, f"{name}.params", "not an object")
    return params


def _positive(path, params, section, keys):
    for key in keys:
        if not isinstance(params.get(key), int) or params[key] <= 0:
            upstream.fail(path, f"{section}.params.{key}", "missing or not a positive integer")


def model_config(cfg, path):
    """config.json -> our janus component config (without the token ids)."""
    lang = cfg.get("language_config")
    if not isinstance(lang, dict):
        upstream.fail(path, "language_config", "missing or not an object")
    # LlamaConfig's defaults, which the file leaves out.
    lang = dict(lang, model_type="llama")
    lang.setdefault("rms_norm_eps", 1e-6)
    lm = hf_causal_lm.language_model_config(lang, f"{path} (language_config)")
    vision = _section(path, cfg, "gen_vision_config")
    aligner = _section(path, cfg, "gen_aligner_config")
    head = _section(path, cfg, "gen_head_config")
    _positive(path, vision, "gen_vision_config", ("image_token_size", "n_embed"))
    _positive(path, aligner, "gen_aligner_config", ("input_dim", "n_embed"))
    _positive(path, head, "gen_head_config", ("n_embed", "image_token_embed", "image_token_size"))
    if aligner.get("projector_type", "mlp_gelu") != "mlp_gelu":
        upstream.fail(path, "gen_aligner_config.params.projector_type",
                      f"{aligner['projector_type']!r}: only mlp_gelu is Janus-Pro's")
    depth = aligner.get("depth", 1)
    if not isinstance(depth, int) or depth < 1:
        upstream.fail(path, "gen_aligner_config.params.depth", "must be a positive integer")
    codes, dim = vision["image_token_size"], lm["dim"]
    for key, value, want in (
            ("gen_aligner_config.params.input_dim", aligner["input_dim"], vision["n_embed"]),
            ("gen_aligner_config.params.n_embed", aligner["n_embed"], dim),
            ("gen_head_config.params.n_embed", head["n_embed"], dim),
            ("gen_head_config.params.image_token_size", head["image_token_size"], codes)):
        if value != want:
            upstream.fail(path, key, f"{value}, expected {want}")
    if lm["qkv_bias"]:
        upstream.fail(path, "language_config.attention_bias", "Janus-Pro's LLaMA has no q/k/v biases")
    lm.update(architecture="janus", image_token_count=codes, image_embed_dim=vision["n_embed"],
              aligner_depth=depth, head_hidden_dim=head["image_token_embed"])
    lm.pop("tie_word_embeddings")
    return lm


def generation_tensors(config, sd):
    """gen_embed, gen_aligner and gen_head, shape-checked, under their upstream names."""
    codes, e, dim = config["image_token_count"], config["image_embed_dim"], config["dim"]
    hidden = config["head_hidden_dim"]
    out = {"gen_embed.weight": sd.get("gen_embed.weight", [codes, e])}
    width = e
    for i in range(config["aligner_depth"]):
        p = f"gen_aligner.layers.{2 * i}."
        out[p + "weight"] = sd.get(p + "weight", [dim, width])
        out[p + "bias"] = sd.get(p + "bias", [dim])
        width = dim
    deeper = f"gen_aligner.layers.{2 * config['aligner_depth']}.weight"
    if sd.has(deeper):
        upstream.fail(sd.path, deeper, f"the aligner is deeper than config.json's depth "
                                       f"{config['aligner_depth']}")
    for key, shape in (("gen_head.output_mlp_projector.weight", [hidden, dim]),
                       ("gen_head.output_mlp_projector.bias", [hidden]),
                       ("gen_head.vision_head.weight", [codes, hidden]),
                       ("gen_head.vision_head.bias", [codes])):
        out[key] = sd.get(key, shape)
    return out


def token_ids(directory, vocab):
    """{token: id} of the special tokens the prompt needs, from tokenizer.json's added tokens."""
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        raise upstream.ConversionError(f"{path}: missing (Janus-Pro's tokenizer, needed to serve "
                                       f"a text prompt)")
    try:
        with open(path, encoding="utf-8") as f:
            added = json.load(f).get("added_tokens") or []
    except ValueError as e:
        raise upstream.ConversionError(f"{path}: not JSON: {e}")
    ids = {str(t.get("content")): t.get("id") for t in added if isinstance(t, dict)}
    found = {}
    for token in (BOS, PAD) + PROMPT_TOKENS:
        if not isinstance(ids.get(token), int) or not 0 <= ids[token] < vocab:
            upstream.fail(path, "added_tokens", f"{token} is missing or outside the vocabulary "
                                                f"of {vocab}")
        found[token] = ids[token]
    return path, found


def convert_model(directory, out_dir, dtype="auto", trust_pickle=False, vq_out=None,
                  vq_model="VQ-16", flag="janus-family --dir"):
    """The janus component at out_dir (and, with vq_out, the VQ at vq_out; without it the
    checkpoint's gen_vision_model.* is left unread). Returns the component's config. `flag`:
    the option that named the directory, for refusals."""
    config_path, cfg = hf_files.read_config(directory, flag)
    kinds.check_config(config_path, cfg, ("janus",),
                       f"the Janus-Pro directory (deepseek-ai/Janus-Pro-1B / -7B) {flag} takes")
    config = model_config(cfg, config_path)
    tokenizer, ids = token_ids(directory, config["vocab_size"])
    config.update(pad_id=ids[PAD], bos_id=ids[BOS], image_start_id=ids[IMAGE_START])
    path, raw = hf_files.load_weights(directory, trust_pickle)
    ignorable = SKIPPED + BOOKKEEPING + (() if vq_out else ("gen_vision_model.",))
    sd = upstream.StateDict(path, raw, ignorable)
    lm = dict(config, architecture="llama", tie_word_embeddings=False, qkv_bias=False)
    tensors = hf_causal_lm.language_model_tensors(lm, sd, "language_model.")
    tensors.pop("output.weight", None)  # lm_head: the text head; not used to generate images
    tensors.update(generation_tensors(config, sd))
    vq_cfg = None
    if vq_out:
        vq_cfg = vq16.convert_state(sd, "gen_vision_model.", vq_out, vq_model, "f32",
                                    dict(upstream="deepseek-ai/Janus gen_vision_model",
                                         file=path, registry_name=vq_model))
        if vq_cfg["codebook_size"] != config["image_token_count"]:
            upstream.fail(path, "gen_vision_model.quantize.embedding.weight",
                          f"{vq_cfg['codebook_size']} codes, gen_embed has "
                          f"{config['image_token_count']}")
    sd.finish()
    skipped = [k for k in raw if any(k.startswith(p) for p in SKIPPED)]
    print(f"{directory}: Janus-Pro, LLaMA {config['n_layer']} layers, {config['dim']} wide, "
          f"vocabulary {config['vocab_size']}, {config['image_token_count']} image codes; "
          f"skipped {len(skipped)} tensors of the understanding path (vision_model, aligner) "
          f"and the text head (lm_head)", flush=True)
    component.write(out_dir, config, tensors, dtype,
                    dict(upstream="deepseek-ai/Janus MultiModalityCausalLM", file=path))
    shutil.copyfile(tokenizer, os.path.join(out_dir, "tokenizer.json"))
    return config, vq_cfg


# GSD's bound on the squared distance of two codes' input embeddings (0.5 in Lumina-mGPT's
# space) carried over by meaning, as tools/synth/scale_gsd_defaults.py does for the bundled
# family: the share of code pairs LANTERN's neighbourhood calls close (1000 of 16384).
GSD_SHARE = 1000 / 16384
GSD_SAMPLE = 2048  # codes whose pairwise distances estimate the quantile


def gsd_bound(target_dir, config):
    """The GSD_SHARE quantile of squared distances between the inputs the LLaMA reads for two
    codes, gen_aligner(gen_embed(k)), over GSD_SAMPLE codes (seeded)."""
    import safetensors_io
    t = {k: v.float() for k, v in safetensors_io.load(
        os.path.join(target_dir, "model.safetensors")).items() if k.startswith("gen_")}
    codes = config["image_token_count"]
    pick = torch.randperm(codes, generator=torch.Generator().manual_seed(0))[:GSD_SAMPLE]
    x = t["gen_embed.weight"][pick]
    for i in range(config["aligner_depth"]):
        if i:
            x = torch.nn.functional.gelu(x)
        p = f"gen_aligner.layers.{2 * i}."
        x = torch.nn.functional.linear(x, t[p + "weight"], t[p + "bias"])
    d2 = torch.cdist(x.double(), x.double()).pow(2)
    pairs = d2[torch.triu_indices(len(x), len(x), 1).unbind()]
    return float(torch.quantile(pairs, GSD_SHARE))


def convert_family(directory, out_dir, dtype="auto", trust_pickle=False, vq_model="VQ-16",
                   image_size=384, name=None, existing=None, shown_dir=None):
    """target/ + vq/ + family.json; the grid is image_size over the VQ's downsampling (16).
    existing: the family.json of a family converted again into shown_dir (out_dir: where this
    conversion writes, a staging directory); its eagle head is kept if it still fits."""
    if vq_model not in vq16.REGISTRY:
        upstream.fail(directory, "--vq-model", f"unknown {vq_model!r}")
    factor = 2 ** (len(vq16.REGISTRY[vq_model]["ch_mult"]) - 1)
    if image_size <= 0 or image_size % factor:
        upstream.fail(directory, "--image-size", f"{image_size} is not a multiple of the VQ's "
                                                 f"{factor} pixels per code")
    upstream.require_dir(directory, "janus-family --dir", "a Janus-Pro Hugging Face directory")
    os.makedirs(out_dir, exist_ok=True)
    config, _ = convert_model(directory, os.path.join(out_dir, "target"), dtype, trust_pickle,
                              os.path.join(out_dir, "vq"), vq_model)
    grid = image_size // factor
    if grid * grid >= config["max_positions"]:
        upstream.fail(directory, "--image-size", f"{grid * grid} codes do not fit "
                                                 f"max_position_embeddings {config['max_positions']}")
    distance = gsd_bound(os.path.join(out_dir, "target"), config)
    method_defaults = {"gsd": {
        "max_embedding_distance": round(distance, 6),
        "embedding_scaling": {
            "tool": "tools/convert/hf_janus.py",
            "rule": f"the {GSD_SHARE:.2%} quantile (LANTERN's share of the codebook) of the "
                    f"squared distances between gen_aligner(gen_embed(k)) of {GSD_SAMPLE} "
                    f"codes; the paper's 0.5 is measured in Lumina-mGPT's embeddings",
            "paper_max_embedding_distance": 0.5}}}
    if grid < 8:
        # ZipAR's window (the paper's 8 columns) cannot exceed a grid this narrow.
        method_defaults["zipar"] = {"window": grid}
    # generation_inference.py: cfg_weight 5, temperature 1, np.uint8 of the clipped pixels.
    kept = family.keep_components(shown_dir or out_dir, existing, ("target", "vq"),
                                  {"eagle": family.check_eagle(config)}, "janus-family")
    family.write_family_json(out_dir, name or (existing or {}).get("name") or "janus-pro", 5.0,
                             ["target", "vq"], "truncate",
                             {"tool": "tools/convert/convert.py janus-family"},
                             dict(grid_size=grid, method_defaults=method_defaults),
                             base=existing, kept=kept, shown_dir=shown_dir)
    print(f"  gsd.max_embedding_distance {distance:.4g} (the paper's 0.5 carried over by the "
          f"share of close code pairs)", flush=True)
    return config
