"""Reference TA-Tok de-quantiser (Tar's TextAlignedTokenizer.decode_from_bottleneck) with the
upstream key names: TA-Tok ids -> condition features for Tar's AR-DTok models.

  ids [B, n] -> SimVQ codebook: embedding_proj(embedding.weight), L2-normalised when the
  tokenizer was trained so -> rows ids -> bottleneck.out_linear -> p x p grid (p = sqrt n) ->
  SigLIP2 vision transformer with patch size 1 (patch_embedding, the position table resized
  bilinearly with antialiasing to p x p, `decoder_depth` pre-LN encoder layers with
  gelu-tanh MLPs, no attention mask) -> post_layernorm -> decode_task_layer
  (Linear, Tanh, Linear) -> [B, n, hidden].

Config keys: codebook_size, bottleneck_dim, l2_normalized, in_dim (out_linear's width, the
decoder's input), hidden, n_layer, n_head, intermediate, num_patches, layer_norm_eps.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class SimVq(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.l2_normalized = cfg["l2_normalized"]
        self.embedding = nn.Embedding(cfg["codebook_size"], cfg["bottleneck_dim"])
        self.embedding_proj = nn.Linear(cfg["bottleneck_dim"], cfg["bottleneck_dim"])

    def lookup(self, ids):
        emb = self.embedding_proj(self.embedding.weight)
        if self.l2_normalized:
            emb = F.normalize(emb, p=2, dim=-1)
        return F.embedding(ids, emb)


class Bottleneck(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.regularizer = SimVq(cfg)
        self.out_linear = nn.Linear(cfg["bottleneck_dim"], cfg["in_dim"])


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["hidden"]
        self.n_head = cfg["n_head"]
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        b, n, d = x.shape
        hd = d // self.n_head
        q, k, v = (proj(x).view(b, n, self.n_head, hd).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        w = torch.softmax((q @ k.transpose(-1, -2)) * hd ** -0.5, dim=-1, dtype=torch.float32)
        out = (w.to(q.dtype) @ v).transpose(1, 2).reshape(b, n, d)
        return self.out_proj(out)


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg["hidden"], cfg["intermediate"])
        self.fc2 = nn.Linear(cfg["intermediate"], cfg["hidden"])

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class EncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg["layer_norm_eps"]
        self.layer_norm1 = nn.LayerNorm(cfg["hidden"], eps=eps)
        self.self_attn = Attention(cfg)
        self.layer_norm2 = nn.LayerNorm(cfg["hidden"], eps=eps)
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.patch_embedding = nn.Linear(cfg["in_dim"], cfg["hidden"])
        self.position_embedding = nn.Embedding(cfg["num_patches"], cfg["hidden"])

    def positions(self, p):
        side = int(math.isqrt(self.position_embedding.num_embeddings))
        table = self.position_embedding.weight.reshape(side, side, -1).permute(2, 0, 1)[None]
        resized = F.interpolate(table.float(), size=(p, p), mode="bilinear",
                                align_corners=False, antialias=True)
        return resized.reshape(table.size(1), p * p).transpose(0, 1)

    def forward(self, z):
        p = math.isqrt(z.size(1))
        return self.patch_embedding(z) + self.positions(p)[None]


class VisionModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg["n_layer"])])
        self.post_layernorm = nn.LayerNorm(cfg["hidden"], eps=cfg["layer_norm_eps"])

    def forward(self, z):
        h = self.embeddings(z)
        for layer in self.encoder.layers:
            h = layer(h)
        return self.post_layernorm(h)


class TaTokDequantizer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.bottleneck = Bottleneck(cfg)
        self.decoder = nn.Module()
        self.decoder.vision_model = VisionModel(cfg)
        self.decode_task_layer = nn.Sequential(nn.Linear(cfg["hidden"], cfg["hidden"]), nn.Tanh(),
                                               nn.Linear(cfg["hidden"], cfg["hidden"]))

    def forward(self, ids):
        """ids [B, n] (n a square) -> features [B, n, hidden]."""
        n = ids.size(1)
        if math.isqrt(n) ** 2 != n:
            raise ValueError(f"{n} TA-Tok ids do not form a square grid")
        z = self.bottleneck.out_linear(self.bottleneck.regularizer.lookup(ids))
        return self.decode_task_layer(self.decoder.vision_model(z))
