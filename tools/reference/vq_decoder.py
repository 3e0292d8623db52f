"""Reference LlamaGen VQ model (encoder + decoder + quantizer) with the upstream key names.

The C++ engine only needs the decoder path (quantize.embedding -> post_quant_conv -> decoder);
the encoder is here because the bundled tokenizer is trained with it (tools/synth).

Config keys: codebook_size, codebook_embed_dim, z_channels, ch, ch_mult (list),
num_res_blocks, norm_groups (default 32), codebook_l2_norm (default true), out_channels (3).
"""
import torch
import torch.nn.functional as F
from torch import nn


def normalize(channels, groups):
    return nn.GroupNorm(groups, channels, eps=1e-6, affine=True)


def swish(x):
    return x * torch.sigmoid(x)


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.norm1 = normalize(cin, groups)
        self.conv1 = nn.Conv2d(cin, cout, 3, 1, 1)
        self.norm2 = normalize(cout, groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        if cin != cout:
            self.nin_shortcut = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = self.conv1(swish(self.norm1(x)))
        h = self.conv2(swish(self.norm2(h)))
        if hasattr(self, "nin_shortcut"):
            x = self.nin_shortcut(x)
        return x + h


class AttnBlock(nn.Module):
    def __init__(self, c, groups):
        super().__init__()
        self.norm = normalize(c, groups)
        self.q = nn.Conv2d(c, c, 1)
        self.k = nn.Conv2d(c, c, 1)
        self.v = nn.Conv2d(c, c, 1)
        self.proj_out = nn.Conv2d(c, c, 1)

    def forward(self, x):
        h = self.norm(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        b, c, hh, ww = q.shape
        q = q.reshape(b, c, hh * ww).permute(0, 2, 1)
        k = k.reshape(b, c, hh * ww)
        w = torch.softmax(torch.bmm(q, k) * (c ** -0.5), dim=2)
        out = torch.bmm(v.reshape(b, c, hh * ww), w.permute(0, 2, 1)).reshape(b, c, hh, ww)
        return x + self.proj_out(out)


class Upsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 1, 1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Downsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 2, 0)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        ch, mult, nres, g = cfg["ch"], cfg["ch_mult"], cfg["num_res_blocks"], cfg.get("norm_groups", 32)
        block_in = ch * mult[-1]
        self.conv_in = nn.Conv2d(cfg["z_channels"], block_in, 3, 1, 1)
        self.mid = nn.ModuleList([ResnetBlock(block_in, block_in, g), AttnBlock(block_in, g),
                                  ResnetBlock(block_in, block_in, g)])
        self.conv_blocks = nn.ModuleList()
        for level in range(len(mult)):
            block = nn.Module()
            block.res = nn.ModuleList()
            block.attn = nn.ModuleList()
            block_out = ch * mult[len(mult) - level - 1]
            for _ in range(nres + 1):
                block.res.append(ResnetBlock(block_in, block_out, g))
                block_in = block_out
                if level == 0:
                    block.attn.append(AttnBlock(block_in, g))
            if level != len(mult) - 1:
                block.upsample = Upsample(block_in)
            self.conv_blocks.append(block)
        self.norm_out = normalize(block_in, g)
        self.conv_out = nn.Conv2d(block_in, cfg.get("out_channels", 3), 3, 1, 1)

    def forward(self, z):
        h = self.conv_in(z)
        for m in self.mid:
            h = m(h)
        for level, block in enumerate(self.conv_blocks):
            for i, res in enumerate(block.res):
                h = res(h)
                if len(block.attn) > 0:
                    h = block.attn[i](h)
            if hasattr(block, "upsample"):
                h = block.upsample(h)
        return self.conv_out(swish(self.norm_out(h)))


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        ch, mult, nres, g = cfg["ch"], cfg["ch_mult"], cfg["num_res_blocks"], cfg.get("norm_groups", 32)
        self.conv_in = nn.Conv2d(cfg.get("in_channels", 3), ch, 3, 1, 1)
        self.conv_blocks = nn.ModuleList()
        in_mult = (1,) + tuple(mult)
        block_in = ch
        for level in range(len(mult)):
            block = nn.Module()
            block.res = nn.ModuleList()
            block.attn = nn.ModuleList()
            block_in = ch * in_mult[level]
            block_out = ch * mult[level]
            for _ in range(nres):
                block.res.append(ResnetBlock(block_in, block_out, g))
                block_in = block_out
                if level == len(mult) - 1:
                    block.attn.append(AttnBlock(block_in, g))
            if level != len(mult) - 1:
                block.downsample = Downsample(block_in)
            self.conv_blocks.append(block)
        self.mid = nn.ModuleList([ResnetBlock(block_in, block_in, g), AttnBlock(block_in, g),
                                  ResnetBlock(block_in, block_in, g)])
        self.norm_out = normalize(block_in, g)
        self.conv_out = nn.Conv2d(block_in, cfg["z_channels"], 3, 1, 1)

    def forward(self, x):
        h = self.conv_in(x)
        for block in self.conv_blocks:
            for i, res in enumerate(block.res):
                h = res(h)
                if len(block.attn) > 0:
                    h = block.attn[i](h)
            if hasattr(block, "downsample"):
                h = block.downsample(h)
        for m in self.mid:
            h = m(h)
        return self.conv_out(swish(self.norm_out(h)))


class Quantizer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.l2_norm = cfg.get("codebook_l2_norm", True)
        self.embedding = nn.Embedding(cfg["codebook_size"], cfg["codebook_embed_dim"])
        self.embedding.weight.data.uniform_(-1.0 / cfg["codebook_size"], 1.0 / cfg["codebook_size"])

    def codebook(self):
        w = self.embedding.weight
        return F.normalize(w, p=2, dim=-1) if self.l2_norm else w

    def lookup(self, ids, h, w):
        """ids [B, h*w] -> [B, embed_dim, h, w]"""
        z = self.codebook()[ids]
        return z.reshape(ids.size(0), h, w, -1).permute(0, 3, 1, 2).contiguous()


class VQModel(nn.Module):
    def __init__(self, cfg, with_encoder=True):
        super().__init__()
        self.cfg = cfg
        if with_encoder:
            self.encoder = Encoder(cfg)
            self.quant_conv = nn.Conv2d(cfg["z_channels"], cfg["codebook_embed_dim"], 1)
        self.decoder = Decoder(cfg)
        self.quantize = Quantizer(cfg)
        self.post_quant_conv = nn.Conv2d(cfg["codebook_embed_dim"], cfg["z_channels"], 1)

    def decode_code(self, ids, h, w):
        """Token ids [B, h*w] -> image [B, 3, H, W] in about [-1, 1]."""
        return self.decoder(self.post_quant_conv(self.quantize.lookup(ids, h, w)))


def quantize(model, z):
    """LlamaGen's VQ: L2-normalised z and codebook, nearest entry. Returns the codebook
    vectors zq [B, e, h, w], the ids [B, h*w] and the normalised z (for a straight-through
    gradient the caller forms z + (zq - z).detach())."""
    z = F.normalize(z, dim=1)
    b, c, h, w = z.shape
    flat = z.permute(0, 2, 3, 1).reshape(-1, c)
    book = model.quantize.codebook()
    ids = torch.cdist(flat, book).argmin(dim=1)
    zq = book[ids].view(b, h, w, c).permute(0, 3, 1, 2)
    return zq, ids.view(b, h * w), z


def encode_ids(model, images):
    """Images [B, 3, H, W] in [-1, 1] -> token ids [B, (H/f)*(W/f)] (raster order), as
    upstream's encode: encoder -> quant_conv -> nearest codebook entry."""
    with torch.no_grad():
        _, ids, _ = quantize(model, model.quant_conv(model.encoder(images)))
    return ids


# Upstream VectorQuantizer registers a usage counter (`codebook_used`, 65536 floats) that
# real checkpoints carry; it is training bookkeeping and never affects encoding or decoding.
UPSTREAM_BOOKKEEPING = ("quantize.codebook_used",)


def load_state_dict(model, sd):
    """Strict load of our files and of upstream ones (which add UPSTREAM_BOOKKEEPING)."""
    model.load_state_dict({k: v for k, v in sd.items() if k not in UPSTREAM_BOOKKEEPING})


def to_uint8(img):
    """[B, 3, H, W] in [-1, 1] -> uint8 [B, H, W, 3], rounding to nearest (LlamaGen's
    save_image and ours)."""
    x = torch.clamp(img * 0.5 + 0.5, 0.0, 1.0) * 255.0 + 0.5
    return x.floor().to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def to_uint8_truncated(img):
    """Tar's conversion (../shared/reference/models.md): clamp(x * 0.5 + 0.5, 0, 1) * 255 cast
    to uint8, which truncates."""
    x = torch.clamp(img * 0.5 + 0.5, 0.0, 1.0) * 255.0
    return x.to(torch.uint8).permute(0, 2, 3, 1).contiguous()
