"""Reference MuLo-SD up-sampler U_r and down-sampler D_r (r = 2) of the bundled family.

Both are small convolutional nets with residual blocks that work on codebook vectors and end
in codebook logits (cosine similarity with the L2-normalised VQ codebook times a learned scale;
argmax = quantisation to the codebook). Every convolution is row-causal (input padded two rows
on top and none at the bottom), so an output row depends only on input rows at or above it,
which MuLo-SD needs: committed target rows must not depend on rows still being drafted. Norms
are per pixel (RMS over channels) for the same reason; GroupNorm would mix rows.

  U_r: drafter ids [B, h*w] -> codebook vectors -> convs at low resolution -> pixel shuffle
       -> target logits [B, V, r*h, r*w]; target rows r*i .. r*i+r-1 depend on drafter rows <= i.
  D_r: target ids [B, (r*h)*(r*w)] -> codebook vectors -> pixel unshuffle -> convs -> drafter
       logits [B, V, h, w]; drafter row i depends on target rows <= r*i + r - 1.

Keys: codebook [V, e]; conv_in.{weight,bias}; blocks.N.{norm1,norm2}.weight,
blocks.N.{conv1,conv2}.{weight,bias}; norm_out.weight; conv_out.{weight,bias}; logit_scale.
Config: kind ("up" | "down"), factor, channels, num_blocks, codebook_size, codebook_embed_dim.
"""
import contextlib

import torch
import torch.nn.functional as F
from torch import nn


class RowCausalConv(nn.Conv2d):
    """3x3 convolution whose output row i sees input rows i-2 .. i (never below)."""

    def __init__(self, cin, cout):
        super().__init__(cin, cout, 3, padding=0)

    def forward(self, x):
        return super().forward(F.pad(x, (1, 1, 2, 0)))


class PixelRmsNorm(nn.Module):
    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + self.eps) * self.weight[None, :, None, None]


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = PixelRmsNorm(c)
        self.conv1 = RowCausalConv(c, c)
        self.norm2 = PixelRmsNorm(c)
        self.conv2 = RowCausalConv(c, c)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        return x + self.conv2(F.silu(self.norm2(h)))


class Resampler(nn.Module):
    def __init__(self, cfg, codebook):
        super().__init__()
        self.cfg = cfg
        r, c, e = cfg["factor"], cfg["channels"], cfg["codebook_embed_dim"]
        self.register_buffer("codebook", F.normalize(codebook.float(), dim=-1))
        cin = e if cfg["kind"] == "up" else e * r * r
        self.conv_in = RowCausalConv(cin, c)
        self.blocks = nn.ModuleList([ResBlock(c) for _ in range(cfg["num_blocks"])])
        self.norm_out = PixelRmsNorm(c)
        cout = e * r * r if cfg["kind"] == "up" else e
        self.conv_out = nn.Conv2d(c, cout, 1)
        self.logit_scale = nn.Parameter(torch.tensor(10.0))

    def forward(self, ids, h, w):
        """ids [B, h*w] on the input grid -> logits [B, V, H, W] on the output grid."""
        return self.logits(self.vectors(ids, h, w))

    def logits(self, vectors):
        """Cosine similarity with the codebook times the learned scale; argmax = quantisation."""
        return self.logit_scale * torch.einsum("behw,ve->bvhw", vectors, self.codebook)

    def vectors(self, ids, h, w):
        """ids [B, h*w] -> unit vectors [B, e, H, W] in codebook space on the output grid."""
        r = self.cfg["factor"]
        x = self.codebook[ids].view(ids.size(0), h, w, -1).permute(0, 3, 1, 2)
        if self.cfg["kind"] == "down":
            x = F.pixel_unshuffle(x, r)
        x = self.conv_in(x)
        for block in self.blocks:
            x = block(x)
        x = self.conv_out(F.silu(self.norm_out(x)))
        if self.cfg["kind"] == "up":
            x = F.pixel_shuffle(x, r)
        return F.normalize(x, dim=1)


def decode_straight_through(vq, vectors, codebook, autocast=contextlib.nullcontext):
    """Decodes the codebook entries nearest to the predicted unit vectors [B, e, H, W] (what
    argmax of the logits picks) with the frozen VQ decoder (tools/reference/vq_decoder.py), the
    gradient passed straight through to the vectors: the pixel loss of the resampler trainers.
    codebook: the L2-normalised VQ codebook [V, e]; autocast: a context for the decoder's
    convolutions (mixed precision)."""
    hard = codebook[torch.einsum("behw,ve->bvhw", vectors, codebook).argmax(1)]
    zq = vectors + (hard.permute(0, 3, 1, 2) - vectors).detach()
    with autocast():
        return vq.decoder(vq.post_quant_conv(zq)).float()
