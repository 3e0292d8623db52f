"""Random weights for test models (fixtures, tiny upstream-layout files) and for the
full-size replicas (tools/convert/write_replicas.py)."""
import torch


def spread_init(model, gen):
    """Random weights with enough spread that greedy choices have clear margins (upstream's
    0.02 init gives near-uniform logits, where float noise could flip an argmax)."""
    for name, p in sorted(model.named_parameters()):
        if name.endswith("norm.weight") or ".norm" in name and name.endswith("weight"):
            p.data = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
        elif p.dim() == 1:
            p.data = 0.1 * torch.randn(p.shape, generator=gen)
        else:
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.data = torch.randn(p.shape, generator=gen) * (1.5 / fan_in ** 0.5)
    for name, b in model.named_buffers():
        if name.endswith("uncond_embedding"):
            b.data = torch.randn(b.shape, generator=gen)


def upstream_init(model, gen):
    """Upstream's initialisation in spirit: N(0, 0.02) matrices and embeddings, unit norm
    weights, zero biases. Fast (one randn per tensor) and keeps activations finite."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0 if "norm" in name else 0.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        for name, b in model.named_buffers():
            if name.endswith("uncond_embedding"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.02)
