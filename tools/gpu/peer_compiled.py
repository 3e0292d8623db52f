#!/usr/bin/env python3
"""The peer of mulo's AR step (issue 63): what a user could run instead on the same GPU, the
gpt-fast recipe in the machine's PyTorch on the same converted weights.

  python3 tools/gpu/peer_compiled.py --family /tmp/replicas/repository/janus-pro-1b \\
      --check RESULTS/janus_mulo_logits.safetensors --modes eager,reduce-overhead --json OUT.json

- Reads the family's target as mulo does (tools/convert's layout: config.json and
  model.safetensors with the engine's block keys; architecture janus, Janus-Pro's LLaMA).
- A static KV cache of the prompt plus the image's codes, guidance batch 2 (the conditioned row
  and the null one), a decode step = one code's forward for both rows, the guidance combine,
  a Gumbel-max draw on the device (no host sync) and the code fed back.
- The step compiled with torch.compile in each of --modes (eager: not compiled), warm-up and
  compilation excluded; per mode the step in ms (median of --repeats timed runs of --steps
  steps) and the seconds per image (prefill and every code, timed whole).
- --check: bench/token_model_bench --logits_out's file (mulo's logits of a fixed prompt and
  codes): the peer's logits of the same tokens must agree within --tolerance (relative to the
  largest logit), so both run the same model.
- The bandwidth floor: the bytes a step must read (every layer's weights, the final norm and
  the image head, the KV cache at half the image) over a device-to-device copy's rate.
Prints one JSON object (and writes it to --json).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import safetensors_io  # noqa: E402


def rms_norm(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def rotary(x, table):
    """x [B, n, heads, hd] rotated on interleaved pairs by table [n, hd / 2, 2] (cos, sin)."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    cos, sin = table[..., 0].unsqueeze(1), table[..., 1].unsqueeze(1)  # [n, 1, hd / 2]
    x0, x1 = xs[..., 0], xs[..., 1]
    return torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), -1).flatten(-2).to(x.dtype)


class Layer(torch.nn.Module):
    """One block's weights and its static K / V cache, as buffers: torch.compile's CUDA graphs
    treat a module's buffers as fixed addresses (other tensors would be copied in per replay)."""

    def __init__(self, wqkv, wo, w13, w2, attention_norm, ffn_norm, cache_shape):
        super().__init__()
        for name, t in dict(wqkv=wqkv, wo=wo, w13=w13, w2=w2, attention_norm=attention_norm,
                            ffn_norm=ffn_norm).items():
            self.register_buffer(name, t)
        self.register_buffer("k_cache", torch.zeros(cache_shape, dtype=wo.dtype, device=wo.device))
        self.register_buffer("v_cache", torch.zeros(cache_shape, dtype=wo.dtype, device=wo.device))


class JanusPeer(torch.nn.Module):
    """Janus-Pro's generation path over a static cache of `length` positions for 2 rows."""

    def __init__(self, directory, length, device, dtype):
        super().__init__()
        with open(os.path.join(directory, "config.json")) as f:
            c = json.load(f)
        if c.get("architecture") != "janus":
            raise SystemExit(f"{directory}: architecture {c.get('architecture')!r}: the peer "
                             "runs janus targets (Tar's comes next)")
        w = {k: v.to(device, dtype) for k, v in
             safetensors_io.load(os.path.join(directory, "model.safetensors")).items()}
        self.c, self.eps = c, c["norm_eps"]
        self.heads, self.kv_heads = c["n_head"], c["n_kv_head"]
        self.hd = c["dim"] // c["n_head"]
        self.register_buffer("text", w["tok_embeddings.weight"])
        x = w["gen_embed.weight"]
        for i in range(c["aligner_depth"]):  # every code's input row, once (as mulo)
            if i:
                x = F.gelu(x)
            x = F.linear(x, w[f"gen_aligner.layers.{2 * i}.weight"],
                         w[f"gen_aligner.layers.{2 * i}.bias"])
        self.register_buffer("codes", x.contiguous())
        self.layers = torch.nn.ModuleList()
        for i in range(c["n_layer"]):
            p = f"layers.{i}."
            self.layers.append(Layer(
                w[p + "attention.wqkv.weight"], w[p + "attention.wo.weight"],
                torch.cat([w[p + "feed_forward.w1.weight"], w[p + "feed_forward.w3.weight"]]),
                w[p + "feed_forward.w2.weight"], w[p + "attention_norm.weight"],
                w[p + "ffn_norm.weight"], (2, self.kv_heads, length, self.hd)))
        self.register_buffer("norm", w["norm.weight"])
        for name in ("output_mlp_projector.weight", "output_mlp_projector.bias",
                     "vision_head.weight", "vision_head.bias"):
            self.register_buffer("head_" + name.replace(".", "_"), w["gen_head." + name])
        inv = 1.0 / c.get("rope_theta", 10000.0) ** (
            torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)
        angles = torch.arange(length, dtype=torch.float32).unsqueeze(1) * inv.unsqueeze(0)
        self.register_buffer("rope", torch.stack((angles.cos(), angles.sin()), -1).to(device))
        self.register_buffer("causal", torch.ones(length, length, dtype=torch.bool,
                                                  device=device).tril())

    def step_bytes(self, context):
        """Bytes a guided one-code step reads: weights it uses and the cache up to `context`."""
        weights = sum(t.numel() * t.element_size() for name, t in self.named_buffers()
                      if name.startswith(("layers.", "norm", "head_"))
                      and not name.endswith(("k_cache", "v_cache")))
        cache = 2 * len(self.layers) * 2 * self.kv_heads * context * self.hd
        return weights + cache * self.norm.element_size()

    def forward(self, x, pos):
        """x [2, n, dim] at positions pos [n]: the image logits [2, n, codes] (float32)."""
        b, n, _ = x.shape
        rope, mask = self.rope[pos], self.causal[pos]
        for layer in self.layers:
            qkv = F.linear(rms_norm(x, layer.attention_norm, self.eps), layer.wqkv)
            qk = rotary(qkv[..., :(self.heads + self.kv_heads) * self.hd]
                        .view(b, n, self.heads + self.kv_heads, self.hd), rope)
            q = qk[:, :, :self.heads].transpose(1, 2)
            k = qk[:, :, self.heads:].transpose(1, 2)
            v = qkv[..., (self.heads + self.kv_heads) * self.hd:] \
                .view(b, n, self.kv_heads, self.hd).transpose(1, 2)
            layer.k_cache.index_copy_(2, pos, k)
            layer.v_cache.index_copy_(2, pos, v)
            keys, values = layer.k_cache, layer.v_cache
            if self.kv_heads != self.heads:
                keys = keys.repeat_interleave(self.heads // self.kv_heads, 1)
                values = values.repeat_interleave(self.heads // self.kv_heads, 1)
            if hasattr(F, "scaled_dot_product_attention"):
                a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            else:  # PyTorch 1.x (a dry run on Debian's)
                s = (q @ keys.transpose(-1, -2)) / math.sqrt(self.hd)
                a = torch.softmax(s.float().masked_fill(~mask, -math.inf), -1).to(q.dtype) @ values
            x = x + F.linear(a.transpose(1, 2).reshape(b, n, -1), layer.wo)
            gate, up = F.linear(rms_norm(x, layer.ffn_norm, self.eps), layer.w13).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, layer.w2)
        h = rms_norm(x, self.norm, self.eps)
        h = F.gelu(F.linear(h, self.head_output_mlp_projector_weight,
                            self.head_output_mlp_projector_bias))
        return F.linear(h, self.head_vision_head_weight, self.head_vision_head_bias).float()

    def prefill(self, prompt_ids):
        """The guidance pair as mulo's EmbedCondition makes it: inner prompt ids -> pad_id."""
        ids = torch.tensor(prompt_ids, device=self.norm.device).unsqueeze(0).repeat(2, 1)
        if ids.shape[1] > 2:
            ids[1, 1:-1] = self.c["pad_id"]
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.forward(F.embedding(ids, self.text), pos)

    def decode(self, codes, pos):
        """codes [2, n] image tokens at positions pos [n]."""
        return self.forward(F.embedding(codes, self.codes), pos)


def guided_step(model, code, pos, cfg, temperature):
    """One decode step, all on the device: forward, guidance, Gumbel-max draw: the next code
    for both rows."""
    logits = model.decode(code, pos)[:, -1]
    guided = logits[1] + cfg * (logits[0] - logits[1])
    probs = torch.softmax(guided / temperature, -1)
    drawn = torch.argmax(probs / torch.empty_like(probs).exponential_(1)).view(1, 1)
    return drawn.repeat(2, 1)


def run_steps(step, model, code, pos, count, cfg):
    """count steps from position pos (advanced in place); gpt-fast's loop: the drawn code is
    cloned before it is fed back (a CUDA graph's output is overwritten by its next replay)."""
    for _ in range(count):
        code = step(model, code, pos, cfg, 1.0).clone()
        pos += 1
    return code


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def copy_bandwidth(device):
    """Bytes per second of a device-to-device copy (read + write), median of 10."""
    if device.type != "cuda":
        return None
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = []
    for _ in range(12):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        times.append(time.perf_counter() - t0)
    return 2 * src.numel() / statistics.median(times[2:])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--modes", default="eager,reduce-overhead",
                    help="eager and torch.compile modes (reduce-overhead, max-autotune, ...)")
    ap.add_argument("--prompt", type=int, default=40, help="prompt ids (1..N, as mulo's bench)")
    ap.add_argument("--steps", type=int, default=64, help="decode steps per timed run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--images", type=int, default=1, help="whole images timed per mode")
    ap.add_argument("--check", help="token_model_bench --logits_out's file")
    ap.add_argument("--tolerance", type=float, default=5e-2,
                    help="largest |peer - mulo| over the largest |mulo| logit")
    ap.add_argument("--json")
    a = ap.parse_args()
    device, dtype = torch.device(a.device), getattr(torch, a.dtype)
    torch.set_grad_enabled(False)
    with open(os.path.join(a.family, "family.json")) as f:
        family = json.load(f)
    target = os.path.join(a.family, family["components"]["target"])
    grid, cfg = family["grid_size"], family["default_cfg_scale"]
    n_codes = grid * grid
    t0 = time.time()
    model = JanusPeer(target, a.prompt + n_codes, device, dtype)
    report = dict(family=family["name"], device=str(device), dtype=a.dtype,
                  torch=torch.__version__, load_s=round(time.time() - t0, 1), codes=n_codes,
                  prompt=a.prompt, cfg_scale=cfg)
    if a.check:
        expected = safetensors_io.load(a.check)
        prompt_ids = expected["prompt_ids"].tolist()
        model.prefill(prompt_ids)
        codes = expected["codes"].to(device)
        first = len(prompt_ids)
        got = model.decode(codes.unsqueeze(0).repeat(2, 1),
                           torch.arange(first, first + len(codes), device=device)).cpu()
        want = expected["logits"]
        error = ((got - want).abs().max() / want.abs().max()).item()
        report["check"] = dict(relative_error=error, tolerance=a.tolerance,
                               agrees=error <= a.tolerance, logits=list(want.shape))
        print(f"check against mulo's logits: {error:.2e} relative ({'within' if error <= a.tolerance else 'OUTSIDE'} {a.tolerance})", flush=True)
    bandwidth = copy_bandwidth(device)
    step_bytes = model.step_bytes(a.prompt + n_codes // 2)
    report["step_bytes"] = step_bytes
    if bandwidth:
        report["copy_bandwidth_gb_s"] = round(bandwidth / 1e9, 1)
        report["floor_ms"] = round(1e3 * step_bytes / bandwidth, 4)
    prompt_ids = list(range(1, a.prompt + 1))
    steps = min(a.steps, n_codes)
    report["modes"] = {}
    for mode in a.modes.split(","):
        if mode != "eager" and not hasattr(torch, "compile"):
            print(f"{mode}: this PyTorch ({torch.__version__}) has no torch.compile; skipped")
            continue
        step = guided_step if mode == "eager" else torch.compile(guided_step, mode=mode,
                                                                 fullgraph=True)
        t0 = time.time()
        model.prefill(prompt_ids)
        code = torch.zeros(2, 1, dtype=torch.long, device=device)
        pos = torch.tensor([a.prompt], device=device)
        code = run_steps(step, model, code, pos, 3, cfg)  # compiles (and captures) here
        sync(device)
        warm_s = time.time() - t0
        times = []
        for _ in range(a.repeats):
            model.prefill(prompt_ids)
            pos = torch.tensor([a.prompt], device=device)
            sync(device)
            t0 = time.perf_counter()
            code = run_steps(step, model, code, pos, steps, cfg)
            sync(device)
            times.append((time.perf_counter() - t0) / steps)
        images = []
        for _ in range(a.images):
            sync(device)
            t0 = time.perf_counter()
            model.prefill(prompt_ids)
            pos = torch.tensor([a.prompt], device=device)
            code = run_steps(step, model, code, pos, n_codes, cfg)
            sync(device)
            images.append(time.perf_counter() - t0)
        step_ms = 1e3 * statistics.median(times)
        row = dict(step_ms=round(step_ms, 4), s_per_image=round(statistics.median(images), 4),
                   warmup_s=round(warm_s, 1))
        if bandwidth:
            row["x_floor"] = round(step_ms / report["floor_ms"], 2)
        report["modes"][mode] = row
        print(f"{mode}: {json.dumps(row)}", flush=True)
    print(json.dumps(report))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if report.get("check", {}).get("agrees", True) else 1


if __name__ == "__main__":
    sys.exit(main())
