"""PyTorch reference of a Qwen2 / LLaMA causal language model in the Hugging Face layout (the
parity reference of engine/model/causal_lm), written from the facts of transformers'
Qwen2ForCausalLM:

- token embeddings `model.embed_tokens`; per layer: RMSNorm `input_layernorm`, attention with
  q/k/v projections (biases when `qkv_bias`, Qwen2's; none for LLaMA), grouped-query heads
  (`num_key_value_heads`), rotary positions in the rotate-half layout (dims i and i + d/2 form
  a pair, frequency theta^(-2i/d)), softmax in float32, `o_proj` without bias; residual; RMSNorm
  `post_attention_layernorm`, SwiGLU `down_proj(silu(gate_proj(x)) * up_proj(x))`; residual;
- `model.norm`, then `lm_head` (the embedding matrix when `tie_word_embeddings`);
- RMSNorm: x in float32 times rsqrt(mean(x^2) + eps), cast back, times the weight.
"""
import math

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(positions, head_dim, theta):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64,
                                             device=positions.device).float() / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, h, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.heads, self.kv_heads, self.head_dim = h, kv, d // h
        bias = cfg.get("model_type") == "qwen2" or cfg.get("attention_bias", False)
        self.q_proj = nn.Linear(d, h * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d, kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d, kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(h * self.head_dim, d, bias=False)
        self.theta = cfg["rope_theta"]

    def forward(self, x, positions):
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = rotary(positions, self.head_dim, self.theta)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        attn = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = (attn @ v).transpose(1, 2).reshape(b, n, -1)
        return self.o_proj(out)


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.mlp = Mlp(cfg)

    def forward(self, x, positions):
        x = x + self.self_attn(self.input_layernorm(x), positions)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class CausalLm(nn.Module):
    """Qwen2ForCausalLM's module tree, so state_dict() has the Hugging Face key names."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Body(cfg)
        self.tied = cfg.get("tie_word_embeddings", False)
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, ids):
        """ids [B, n] -> logits [B, n, vocab] (float32), positions 0 .. n - 1."""
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, positions)
        x = self.model.norm(x)
        weight = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return (x @ weight.t()).float()

    def state_dict_hf(self):
        """The state dict as Hugging Face saves it: without lm_head when tied."""
        return {k: v for k, v in self.state_dict().items()}


def greedy_generate(model, ids, steps):
    """`steps` argmax tokens after ids [1, n], recomputing the whole sequence each step."""
    out = ids
    with torch.no_grad():
        for _ in range(steps):
            nxt = model(out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], dim=1)
    return out[0, ids.shape[1]:].tolist()
