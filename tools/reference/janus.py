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
        positions = torch.arange(embeds.shape[1])
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
