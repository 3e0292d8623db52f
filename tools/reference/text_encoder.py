"""Reference text conditioner of the bundled family: the analogue of Tar's TA-Tok features.

A word-level tokenizer (vocab.json: id -> word; 0 = <pad>, 1 = <unk>) and a small
bidirectional transformer with the same block layout and key names as the AR models
(layers.N.attention.wqkv, ...), learned positions `pos_embeddings` [max_tokens, dim] and a
final `norm`. Output: features [max_tokens, dim], consumed by every AR model of the family
through its own clip_proj (condition_mode clip_cond). Prompts are padded with <pad> to
max_tokens and the pads are attended like any token, which keeps the C++ port mask-free.

Config keys: vocab_size, dim, n_layer, n_head, max_tokens, multiple_of, norm_eps.
"""
import torch
from torch import nn

import transformer as tr


def tokenize(text):
    """Lower-case words; ':' and ',' are tokens of their own."""
    return text.lower().replace(":", " : ").replace(",", " , ").split()


def encode_ids(text, vocab, max_tokens):
    index = {w: i for i, w in enumerate(vocab)}
    ids = [index.get(w, 1) for w in tokenize(text)]
    if len(ids) > max_tokens:
        raise ValueError(f"prompt has {len(ids)} tokens, more than {max_tokens}")
    return ids + [0] * (max_tokens - len(ids))


class TextEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        block_cfg = dict(dim=cfg["dim"], n_head=cfg["n_head"], multiple_of=cfg.get("multiple_of", 256),
                         norm_eps=cfg.get("norm_eps", 1e-5))
        self.tok_embeddings = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        self.pos_embeddings = nn.Parameter(torch.randn(cfg["max_tokens"], cfg["dim"]) * 0.02)
        self.layers = nn.ModuleList([tr.Block(block_cfg) for _ in range(cfg["n_layer"])])
        self.norm = tr.RMSNorm(cfg["dim"], cfg.get("norm_eps", 1e-5))

    def forward(self, ids):
        """ids [B, max_tokens] -> features [B, max_tokens, dim]."""
        h = self.tok_embeddings(ids) + self.pos_embeddings[None]
        mask = torch.ones(ids.size(1), ids.size(1), dtype=torch.bool, device=ids.device)
        for layer in self.layers:
            h = layer(h, None, mask)
        return self.norm(h)
