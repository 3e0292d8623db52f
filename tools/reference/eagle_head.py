"""Reference EAGLE-style drafter head of the bundled family (EAGLE-1 layout, as LANTERN's
LlamaGen drafter): input = concat(target token embedding of x_{t+1}, target feature f_t),
`fc` (2D -> D, with bias), one decoder block (same key layout as the AR models:
layers.0.attention.wqkv, ...), output = predicted feature f_{t+1}, read out through the
target's own `output` head. No position encoding of its own: the target features carry it.

Head position j pairs the target feature at sequence position cls-1+j (the one that predicted
token j) with token j's embedding, and predicts the feature at position cls+j (which predicts
token j+1). Keys: fc.weight [D, 2D], fc.bias [D], layers.0.*.
Config: dim, n_head, multiple_of, norm_eps.
"""
import torch
from torch import nn

import transformer as tr


class EagleHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(2 * cfg["dim"], cfg["dim"])
        self.layers = nn.ModuleList([tr.Block(cfg)])

    def forward(self, token_embeddings, features):
        """[B, n, D] each -> predicted next features [B, n, D] (causal)."""
        h = self.fc(torch.cat([token_embeddings, features], dim=-1))
        n = h.size(1)
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool, device=h.device))
        return self.layers[0](h, None, mask)
