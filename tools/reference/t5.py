"""PyTorch reference of a T5 v1.1 encoder (FLAN-T5, LlamaGen t2i's text encoder) in the Hugging
Face layout, the parity reference of engine/model/t5_encoder, written from the facts of
transformers' T5EncoderModel:

- token embeddings `shared` (the encoder's `embed_tokens` is the same matrix);
- per block: layer 0 = RMS layer norm (no mean, no bias; the variance in float32), self
  attention with q / k / v / o projections without biases and **no 1/sqrt(d) scaling**, plus a
  relative position bias from block 0's `relative_attention_bias` [buckets, heads] that every
  block reuses; residual. Layer 1 = layer norm, gated GELU (tanh approximation)
  `wo(gelu(wi_0(x)) * wi_1(x))`; residual;
- `final_layer_norm`;
- buckets (bidirectional): half the buckets for keys after the query; distances below
  buckets / 4 exact, then logarithmic up to `max_distance`;
- padding: masked keys get the dtype's most negative value added to their scores.
"""
import math

import torch
from torch import nn


class LayerNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(self.weight.dtype)


def relative_buckets(relative_position, num_buckets, max_distance):
    num_buckets //= 2
    buckets = (relative_position > 0).long() * num_buckets
    distance = relative_position.abs()
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    large = max_exact + (torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, distance, large)


class Attention(nn.Module):
    def __init__(self, cfg, has_bias):
        super().__init__()
        d, h, dk = cfg["d_model"], cfg["num_heads"], cfg["d_kv"]
        self.h, self.dk = h, dk
        self.q = nn.Linear(d, h * dk, bias=False)
        self.k = nn.Linear(d, h * dk, bias=False)
        self.v = nn.Linear(d, h * dk, bias=False)
        self.o = nn.Linear(h * dk, d, bias=False)
        self.buckets = cfg["relative_attention_num_buckets"]
        self.max_distance = cfg["relative_attention_max_distance"]
        if has_bias:
            self.relative_attention_bias = nn.Embedding(self.buckets, h)

    def position_bias(self, n):
        position = torch.arange(n)
        relative = position[None, :] - position[:, None]  # key - query
        values = self.relative_attention_bias(relative_buckets(relative, self.buckets,
                                                               self.max_distance))
        return values.permute(2, 0, 1).unsqueeze(0)  # [1, heads, q, k]

    def forward(self, x, bias):
        b, n, _ = x.shape
        shape = lambda t: t.view(b, n, self.h, self.dk).transpose(1, 2)  # noqa: E731
        q, k, v = shape(self.q(x)), shape(self.k(x)), shape(self.v(x))
        scores = q @ k.transpose(-1, -2) + bias
        attn = torch.softmax(scores.float(), dim=-1).type_as(scores)
        return self.o((attn @ v).transpose(1, 2).reshape(b, n, -1))


class SelfAttentionLayer(nn.Module):
    def __init__(self, cfg, has_bias):
        super().__init__()
        self.SelfAttention = Attention(cfg, has_bias)
        self.layer_norm = LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])


class DenseGatedGelu(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["d_model"], cfg["d_ff"]
        self.wi_0 = nn.Linear(d, f, bias=False)
        self.wi_1 = nn.Linear(d, f, bias=False)
        self.wo = nn.Linear(f, d, bias=False)

    def forward(self, x):
        gelu = nn.functional.gelu(self.wi_0(x), approximate="tanh")
        return self.wo(gelu * self.wi_1(x))


class FfLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.DenseReluDense = DenseGatedGelu(cfg)
        self.layer_norm = LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])


class EncoderBlock(nn.Module):
    def __init__(self, cfg, has_bias):
        super().__init__()
        self.layer = nn.ModuleList([SelfAttentionLayer(cfg, has_bias), FfLayer(cfg)])

    def forward(self, x, bias):
        attn, ff = self.layer
        x = x + attn.SelfAttention(attn.layer_norm(x), bias)
        return x + ff.DenseReluDense(ff.layer_norm(x))


class Stack(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.block = nn.ModuleList(EncoderBlock(cfg, i == 0) for i in range(cfg["num_layers"]))
        self.final_layer_norm = LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])


class T5Encoder(nn.Module):
    """T5EncoderModel's module tree (`shared`, `encoder.block.*`, `encoder.final_layer_norm`)."""

    def __init__(self, cfg):
        super().__init__()
        self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.encoder = Stack(cfg)

    def forward(self, ids, mask):
        """ids [B, n] int64, mask [B, n] (1 = a token, 0 = padding) -> [B, n, d_model]."""
        x = self.shared(ids)
        n = ids.shape[1]
        bias = self.encoder.block[0].layer[0].SelfAttention.position_bias(n)
        bias = bias + (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for block in self.encoder.block:
            x = block(x, bias)
        return self.encoder.final_layer_norm(x)
