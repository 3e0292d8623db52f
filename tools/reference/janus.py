"""PyTorch reference of Janus-Pro's image generation path (the parity reference of the coming
engine/model/janus, issue 44), written from the facts of deepseek-ai/Janus at 1daa72f
(`janus/models/modeling_vlm.py`, `projector.py`, `generation_inference.py`):

- the language model is a LLaMA (`language_model`, LlamaForCausalLM's tree: qwen2.CausalLm
  here with model_type "llama", so no q/k/v biases), sized by config.json's
  `language_config`;
- an image code k enters the language model as gen_aligner(gen_embed(k)): `gen_embed` an
  embedding of `gen_vision_config.params.image_token_size` codes, `n_embed` (8) wide;
  `gen_aligner` an MLP of type mlp_gelu (Linear input_dim -> n_embed, then per extra depth
  GELU and Linear n_embed -> n_embed), its Linears at `layers.0`, `layers.2`, ...;
- image logits are gen_head(last hidden state after the final norm): `output_mlp_projector`
  (n_embed -> image_token_embed), GELU, `vision_head` (-> image_token_size); not `lm_head`;
- guidance: rows in pairs, the unconditional row the prompt's ids with every position but the
  first and the last replaced by the pad id; logits uncond + w * (cond - uncond), softmax of
  logits / temperature, one draw; the drawn code is fed to both rows.

Understanding-only parts (`vision_model`, `aligner`) are not modelled; the VQ decoder is
LlamaGen's VQ-16 (tools/reference/vq_decoder.py).
"""
import torch
from torch import nn

import qwen2


def language_config(cfg):
    """config.json's language_config with LlamaConfig's defaults filled in."""
    lang = dict(cfg["language_config"])
    lang["model_type"] = "llama"
    lang.setdefault("num_key_value_heads", lang["num_attention_heads"])
    lang.setdefault("rms_norm_eps", 1e-6)
    lang.setdefault("rope_theta", 10000.0)
    lang.setdefault("tie_word_embeddings", False)
    return lang


class MlpGelu(nn.Module):
    """MlpProjector with projector_type mlp_gelu."""

    def __init__(self, input_dim, n_embed, depth):
        super().__init__()
        layers = [nn.Linear(input_dim, n_embed)]
        for _ in range(1, depth):
            layers += [nn.GELU(), nn.Linear(n_embed, n_embed)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


class GenHead(nn.Module):
    """The generation head (config cls "vision_head")."""

    def __init__(self, n_embed, image_token_embed, image_token_size):
        super().__init__()
        self.output_mlp_projector = nn.Linear(n_embed, image_token_embed)
        self.vision_activation = nn.GELU()
        self.vision_head = nn.Linear(image_token_embed, image_token_size)

    def forward(self, x):
        return self.vision_head(self.vision_activation(self.output_mlp_projector(x)))


class Janus(nn.Module):
    """The generation path of MultiModalityCausalLM, with its key names."""

    def __init__(self, cfg):
        super().__init__()
        vision = cfg["gen_vision_config"]["params"]
        aligner = cfg["gen_aligner_config"]["params"]
        head = cfg["gen_head_config"]["params"]
        self.language_model = qwen2.CausalLm(language_config(cfg))
        self.gen_embed = nn.Embedding(vision["image_token_size"], vision["n_embed"])
        self.gen_aligner = MlpGelu(aligner["input_dim"], aligner["n_embed"],
                                   aligner.get("depth", 1))
        self.gen_head = GenHead(head["n_embed"], head["image_token_embed"],
                                head["image_token_size"])

    def hidden(self, embeds):
        """Input embeddings [B, n, d] at positions 0 .. n - 1 -> normed hidden states."""
        positions = torch.arange(embeds.shape[1], device=embeds.device)
        x = embeds
        for layer in self.language_model.model.layers:
            x = layer(x, positions)
        return self.language_model.model.norm(x)

    def image_logits(self, prompt_ids, image_ids):
        """prompt_ids [B, n], image_ids [B, m] -> image logits [B, m + 1, codes] (float32):
        row j scores the image code at raster position j."""
        embeds = self.language_model.model.embed_tokens(prompt_ids)
        if image_ids.shape[1] > 0:
            embeds = torch.cat([embeds, self.gen_aligner(self.gen_embed(image_ids))], dim=1)
        h = self.hidden(embeds)[:, prompt_ids.shape[1] - 1:]
        return self.gen_head(h).float()


def guidance_pair(ids, pad_id):
    """[2, n]: the prompt's ids and the unconditional row (inner positions -> pad_id)."""
    uncond = ids.clone()
    uncond[1:-1] = pad_id
    return torch.stack([ids, uncond])


def generate(model, ids, pad_id, count, cfg_weight, temperature=0.0, generator=None):
    """`count` image codes for prompt ids [n] as generation_inference.py draws them (greedy
    when temperature is 0), recomputing the whole sequence each step."""
    rows = guidance_pair(ids, pad_id)
    codes = torch.zeros(2, 0, dtype=torch.int64)
    with torch.no_grad():
        for _ in range(count):
            logits = model.image_logits(rows, codes)[:, -1]
            mixed = logits[1] + cfg_weight * (logits[0] - logits[1])
            if temperature == 0.0:
                code = mixed.argmax()
            else:
                probs = torch.softmax(mixed / temperature, dim=-1)
                code = torch.multinomial(probs, 1, generator=generator)[0]
            codes = torch.cat([codes, code.view(1, 1).expand(2, 1)], dim=1)
    return codes[0].tolist()


# A tiny Janus-Pro in the upstream layout, for tests (random weights): config.json with
# upstream's sections, the tokenizer's special tokens at small ids.
TINY_CONFIG = dict(
    model_type="multi_modality",
    language_config=dict(hidden_size=64, intermediate_size=96, num_attention_heads=4,
                         num_hidden_layers=2, vocab_size=320, max_position_embeddings=64,
                         torch_dtype="bfloat16"),
    gen_vision_config=dict(cls="VQ-16", model_type="gen_vision",
                           params=dict(image_token_size=128, n_embed=8)),
    gen_aligner_config=dict(cls="MlpProjector", model_type="gen_aligner",
                            params=dict(depth=2, input_dim=8, n_embed=64,
                                        projector_type="mlp_gelu")),
    gen_head_config=dict(cls="vision_head", model_type="gen_head",
                         params=dict(image_token_embed=48, image_token_size=128, n_embed=64)),
    vision_config=dict(cls="CLIPVisionTower", model_type="vision",
                       params=dict(image_size=384, model_name="siglip_large_patch16_384")),
    aligner_config=dict(cls="MlpProjector", model_type="aligner",
                        params=dict(depth=2, input_dim=16, n_embed=64, projector_type="mlp_gelu")))
TINY_SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<|User|>",
                "<|Assistant|>", "<image_placeholder>", "<begin_of_image>", "<end_of_image>"]
TINY_PAD = 258  # 256 + TINY_SPECIAL.index("<｜▁pad▁｜>")


def byte_level_alphabet():
    """GPT-2's byte -> printable character map (the byte-level BPE vocabularies' alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
                 + list(range(0xAE, 0xFF + 1)))
    chars, extra = dict((b, chr(b)) for b in printable), 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def tiny_tokenizer():
    """tokenizer.json: byte-level BPE over the 256 bytes (no merges), a regex Split then
    ByteLevel, and the special tokens at ids 256.. (Janus-Pro's at 100000..)."""
    alphabet = byte_level_alphabet()
    added = [dict(id=256 + i, content=t, special=True, single_word=False, lstrip=False,
                  rstrip=False, normalized=False) for i, t in enumerate(TINY_SPECIAL)]
    split = dict(type="Split", pattern=dict(Regex=r"\s?\p{L}+|\s?\p{N}+|\s?[^\s\p{L}\p{N}]+|\s+"),
                 behavior="Isolated", invert=False)
    return dict(
        version="1.0", added_tokens=added, normalizer=None,
        pre_tokenizer=dict(type="Sequence", pretokenizers=[
            split, dict(type="ByteLevel", add_prefix_space=False, trim_offsets=True,
                        use_regex=False)]),
        model=dict(type="BPE", vocab={alphabet[b]: b for b in range(256)}, merges=[]))


def upstream_state(model, gen, vq_state=None):
    """model's state dict as MultiModalityCausalLM saves it, with stand-ins for the
    understanding path (vision_model, aligner) and, given a LlamaGen VQ's state dict, the
    generation VQ under gen_vision_model."""
    state = dict(model.state_dict())
    state["vision_model.vision_tower.pos_embed"] = torch.randn(1, 4, 16, generator=gen)
    state["vision_model.vision_tower.blocks.0.attn.qkv.weight"] = torch.randn(48, 16, generator=gen)
    state["aligner.layers.0.weight"] = torch.randn(64, 16, generator=gen)
    state["aligner.layers.0.bias"] = torch.randn(64, generator=gen)
    for key, value in (vq_state or {}).items():
        state["gen_vision_model." + key] = value
    return state


def _rotate_half_rows(w, heads, head_dim):
    """The inverse of the converter's reordering: rows of q or k from interleaved pairs back to
    Hugging Face's rotate-half order, per head."""
    half = head_dim // 2
    order = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    shaped = w.reshape(heads, head_dim, *w.shape[1:])
    return shaped[:, order].reshape(w.shape)


def load_component(directory):
    """A Janus (the reference, upstream key names) with the weights of a converted `janus`
    component (tools/convert/hf_janus.py's layout: the engine's blocks, gen_* as upstream): the
    teacher a head trained for a converted family reads features from. The text head is not
    in the component and stays random (image logits never use it)."""
    import json
    import os

    import safetensors_io
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    cfg = dict(
        language_config=dict(hidden_size=c["dim"], intermediate_size=c["ffn_hidden_dim"],
                             num_attention_heads=c["n_head"], num_key_value_heads=c["n_kv_head"],
                             num_hidden_layers=c["n_layer"], vocab_size=c["vocab_size"],
                             rms_norm_eps=c["norm_eps"], rope_theta=c["rope_theta"],
                             max_position_embeddings=c["max_positions"]),
        gen_vision_config=dict(params=dict(image_token_size=c["image_token_count"],
                                           n_embed=c["image_embed_dim"])),
        gen_aligner_config=dict(params=dict(depth=c["aligner_depth"],
                                            input_dim=c["image_embed_dim"], n_embed=c["dim"])),
        gen_head_config=dict(params=dict(n_embed=c["dim"], image_token_embed=c["head_hidden_dim"],
                                         image_token_size=c["image_token_count"])))
    model = Janus(cfg).eval()
    t = {k: v.float() for k, v in
         safetensors_io.load(os.path.join(directory, "model.safetensors")).items()}
    heads, kv_heads, dim = c["n_head"], c["n_kv_head"], c["dim"]
    head_dim = dim // heads
    state = {k: v for k, v in t.items() if k.startswith("gen_")}
    m = "language_model.model."
    state[m + "embed_tokens.weight"] = t["tok_embeddings.weight"]
    state[m + "norm.weight"] = t["norm.weight"]
    for i in range(c["n_layer"]):
        p, q = f"{m}layers.{i}.", f"layers.{i}."
        wq, wk, wv = t[q + "attention.wqkv.weight"].split(
            [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim])
        state[p + "self_attn.q_proj.weight"] = _rotate_half_rows(wq, heads, head_dim)
        state[p + "self_attn.k_proj.weight"] = _rotate_half_rows(wk, kv_heads, head_dim)
        state[p + "self_attn.v_proj.weight"] = wv
        state[p + "self_attn.o_proj.weight"] = t[q + "attention.wo.weight"]
        state[p + "mlp.gate_proj.weight"] = t[q + "feed_forward.w1.weight"]
        state[p + "mlp.up_proj.weight"] = t[q + "feed_forward.w3.weight"]
        state[p + "mlp.down_proj.weight"] = t[q + "feed_forward.w2.weight"]
        state[p + "input_layernorm.weight"] = t[q + "attention_norm.weight"]
        state[p + "post_attention_layernorm.weight"] = t[q + "ffn_norm.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all(k.startswith("language_model.lm_head") for k in missing), missing
    return model
