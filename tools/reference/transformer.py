"""Reference LlamaGen GPT / Tar AR-DTok transformer in PyTorch, with the upstream state_dict
key names. It is the yardstick the C++ engine is tested against, so it is written for clarity:
every forward recomputes the whole sequence (no KV cache), which keeps it independent of the
engine's cache logic.

Config keys (also read by the C++ engine, engine/model/transformer_config.cc):
  dim, n_layer, n_head, n_kv_head (default n_head), vocab_size, grid_size, cls_token_num,
  position_mode: "abs_pe" (Tar) | "rope_2d" (LlamaGen),
  condition_mode: "clip_cond" (Tar) | "class_label" (LlamaGen c2i) | "caption" (LlamaGen t2i),
  cond_dim (clip_cond, caption), num_classes (class_label),
  multiple_of (default 256), ffn_dim_multiplier (optional), ffn_hidden_dim (optional override),
  norm_eps (default 1e-5), rope_base (default 10000).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def find_multiple(n, k):
    return n if n % k == 0 else n + k - n % k


def ffn_hidden_dim(cfg):
    if cfg.get("ffn_hidden_dim"):
        return cfg["ffn_hidden_dim"]
    hidden = int(2 * (4 * cfg["dim"]) / 3)
    if cfg.get("ffn_dim_multiplier"):
        hidden = int(cfg["ffn_dim_multiplier"] * hidden)
    return find_multiple(hidden, cfg.get("multiple_of", 256))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def apply_rotary(x, freqs):
    """x [B, T, H, hd]; freqs [T, hd/2, 2] (cos, sin); rotates interleaved pairs."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    f = freqs.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * f[..., 0] - xs[..., 1] * f[..., 1],
                       xs[..., 1] * f[..., 0] + xs[..., 0] * f[..., 1]], dim=-1)
    return out.flatten(3).type_as(x)


def rope_2d_table(grid, head_dim, base, cls_token_num):
    """[cls + grid*grid, head_dim/2, 2]: first half of the pairs rotate by row, second half by
    column; condition positions get zeros (as upstream LlamaGen)."""
    half = head_dim // 2
    freqs = 1.0 / (base ** (torch.arange(0, half, 2)[: half // 2].float() / half))
    t = torch.arange(grid, dtype=torch.float32)
    f = torch.outer(t, freqs)
    grid_f = torch.cat([f[:, None, :].expand(-1, grid, -1), f[None, :, :].expand(grid, -1, -1)], dim=-1)
    cache = torch.stack([torch.cos(grid_f), torch.sin(grid_f)], dim=-1).flatten(0, 1)
    return torch.cat([torch.zeros(cls_token_num, half, 2), cache])


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg["n_head"]
        self.n_kv_head = cfg.get("n_kv_head") or cfg["n_head"]
        self.head_dim = cfg["dim"] // self.n_head
        total = (self.n_head + 2 * self.n_kv_head) * self.head_dim
        self.wqkv = nn.Linear(cfg["dim"], total, bias=False)
        self.wo = nn.Linear(cfg["dim"], cfg["dim"], bias=False)

    def forward(self, x, freqs, mask):
        b, t, _ = x.shape
        kv = self.n_kv_head * self.head_dim
        q, k, v = self.wqkv(x).split([self.n_head * self.head_dim, kv, kv], dim=-1)
        q = q.view(b, t, self.n_head, self.head_dim)
        k = k.view(b, t, self.n_kv_head, self.head_dim)
        v = v.view(b, t, self.n_kv_head, self.head_dim)
        if freqs is not None:
            q, k = apply_rotary(q, freqs), apply_rotary(k, freqs)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        rep = self.n_head // self.n_kv_head
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores.float(), dim=-1).type_as(q) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = Attention(cfg)
        self.feed_forward = FeedForward(cfg["dim"], ffn_hidden_dim(cfg))
        eps = cfg.get("norm_eps", 1e-5)
        self.attention_norm = RMSNorm(cfg["dim"], eps)
        self.ffn_norm = RMSNorm(cfg["dim"], eps)

    def forward(self, x, freqs, mask):
        h = x + self.attention(self.attention_norm(x), freqs, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, dim):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, dim)  # last row = null class


class Mlp(nn.Module):
    """LlamaGen's caption MLP: fc1 / fc2 without biases (upstream gpt.py MLP, bias=False)."""

    def __init__(self, in_dim, hidden, out_dim):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden, bias=False)
        self.fc2 = nn.Linear(hidden, out_dim, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class CaptionEmbedder(nn.Module):
    """Upstream keeps `token_num` (120) null rows whatever cls_token_num is; the model uses the
    first cls_token_num of cap_proj's output, so a file may carry more rows than it uses."""

    def __init__(self, in_dim, dim, token_num):
        super().__init__()
        self.cap_proj = Mlp(in_dim, dim, dim)
        self.register_buffer("uncond_embedding", torch.randn(token_num, in_dim) / in_dim ** 0.5)


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        dim, cls = cfg["dim"], cfg["cls_token_num"]
        n_tokens = cfg["grid_size"] ** 2
        mode = cfg["condition_mode"]
        if mode == "clip_cond":
            self.clip_proj = nn.Linear(cfg["cond_dim"], dim)
        elif mode == "class_label":
            self.cls_embedding = LabelEmbedder(cfg["num_classes"], dim)
        elif mode == "caption":
            self.cls_embedding = CaptionEmbedder(cfg["cond_dim"], dim, cls)
        else:
            raise ValueError(mode)
        self.tok_embeddings = nn.Embedding(cfg["vocab_size"], dim)
        if cfg["position_mode"] == "abs_pe":
            self.abs_pe = nn.Parameter(torch.randn(1, n_tokens + cls - 1, dim) * 0.02)
            self.freqs = None
        else:
            head_dim = dim // cfg["n_head"]
            self.register_buffer("freqs", rope_2d_table(cfg["grid_size"], head_dim,
                                                        cfg.get("rope_base", 10000), cls),
                                 persistent=False)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])])
        self.norm = RMSNorm(dim, cfg.get("norm_eps", 1e-5))
        self.output = nn.Linear(dim, cfg["vocab_size"], bias=False)

    def embed_condition(self, cond, null):
        """cond: features [B, n, cond_dim] or labels [B]; null: bool [B] (CFG's null rows)."""
        mode = self.cfg["condition_mode"]
        if mode == "clip_cond":
            feats = torch.where(null[:, None, None], torch.zeros_like(cond), cond)
            return self.clip_proj(feats)
        if mode == "class_label":
            labels = torch.where(null, torch.full_like(cond, self.cfg["num_classes"]), cond)
            return self.cls_embedding.embedding_table(labels)[:, None, :]
        unc = self.cls_embedding.uncond_embedding[None, :cond.size(1)].expand_as(cond)
        feats = torch.where(null[:, None, None], unc, cond)
        return self.cls_embedding.cap_proj(feats)

    def forward(self, cond, null, tokens, return_hidden=False, caption_length=None):
        """Full causal forward over [condition positions, tokens]; logits for every position.

        caption_length (caption mode): the prompt's real T5 tokens, left-padded as upstream's
        sample_t2i.py does (the last caption_length positions hold the caption). Upstream's
        generate() then multiplies the causal mask's condition columns by the caption mask and
        sets the diagonal, in both CFG halves: every row attends to the real caption positions
        only, a padded position to itself alone; the padded features are zeroed."""
        if caption_length is not None:
            valid = torch.arange(cond.size(1)) >= cond.size(1) - caption_length
            cond = cond * valid[None, :, None].to(cond.dtype)
        h = self.embed_condition(cond, null)
        if tokens is not None and tokens.numel() > 0:
            h = torch.cat([h, self.tok_embeddings(tokens)], dim=1)
        t = h.size(1)
        freqs = None
        if self.freqs is None:
            h = h + self.abs_pe[:, :t]
        else:
            freqs = self.freqs[:t]
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=h.device))
        if caption_length is not None:
            n_cond = cond.size(1)
            emb_mask = torch.ones(t, dtype=torch.bool)
            emb_mask[:n_cond] = valid
            mask = (mask & emb_mask[None, :]) | torch.eye(t, dtype=torch.bool)
        for layer in self.layers:
            h = layer(h, freqs, mask)
        h = self.norm(h)
        logits = self.output(h).float()
        return (logits, h) if return_hidden else logits


def cfg_mix(logits, scale):
    """logits [2B, ...] with the conditional rows first; uncond + s * (cond - uncond)."""
    cond, uncond = logits.chunk(2, dim=0)
    return uncond + scale * (cond - uncond)


@torch.no_grad()
def greedy_generate(model, cond, cfg_scale):
    """AR greedy decoding with CFG as batch 2, recomputing the full sequence every step."""
    n_tokens = model.cfg["grid_size"] ** 2
    cond2 = torch.cat([cond, cond])
    null = torch.tensor([False, True])
    tokens = torch.zeros(2, 0, dtype=torch.long)
    for _ in range(n_tokens):
        logits = model(cond2, null, tokens)[:, -1]
        nxt = cfg_mix(logits, cfg_scale).argmax(dim=-1)
        tokens = torch.cat([tokens, nxt.repeat(2)[:, None]], dim=1)
    return tokens[0]
