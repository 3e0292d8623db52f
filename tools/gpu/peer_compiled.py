#!/usr/bin/env python3
"""The peer of mulo's AR step (issue 63): what a user could run instead on the same GPU, the
gpt-fast recipe in the machine's PyTorch on the same converted weights.

  python3 tools/gpu/peer_compiled.py --family /tmp/replicas/repository/janus-pro-1b \\
      --check RESULTS/janus_mulo_logits.safetensors --modes eager,reduce-overhead --json OUT.json

- Reads the family's target as mulo does (tools/convert's layout: config.json and
  model.safetensors with the engine's block keys), its architecture from config.json as
  engine/model/architectures.cc picks it: janus (Janus-Pro's LLaMA: prompt ids, rotary
  positions, gen_head) or llamagen, which the peer runs as Tar AR-DTok's target (clip_cond
  feature rows through clip_proj, abs_pe position rows, output.weight; the Tar LP replica).
- A static KV cache of the condition plus the image's codes, guidance batch 2 (the conditioned
  row and the null one), a decode step = one code's forward for both rows, the guidance
  combine, a Gumbel-max draw on the device (no host sync) and the code fed back.
- The step compiled with torch.compile in each of --modes (eager: not compiled), warm-up and
  compilation excluded; per mode the step in ms (median of --repeats timed runs of --steps
  steps) and the seconds per image (the prefill, which draws the first code, and a step for
  each other code, timed whole).
- --check: bench/token_model_bench --logits_out's file (mulo's logits of a fixed condition and
  codes): the peer's logits of the same tokens must agree within --tolerance (relative to the
  largest compared logit), so both run the same model: both guidance rows, Janus's from the
  file's prompt ids, Tar's from its `features` (the rows the bench drew at random; a file
  without them, from before it wrote them, checks the null row alone).
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
    treat a module's buffers as fixed addresses (other tensors would be copied in per replay).
    bqkv: the QKV bias, or None (Qwen2's; Janus-Pro's LLaMA and Tar have none)."""

    def __init__(self, wqkv, bqkv, wo, w13, w2, attention_norm, ffn_norm, cache_shape):
        super().__init__()
        for name, t in dict(wqkv=wqkv, bqkv=bqkv, wo=wo, w13=w13, w2=w2,
                            attention_norm=attention_norm, ffn_norm=ffn_norm).items():
            self.register_buffer(name, t)
        self.register_buffer("k_cache", torch.zeros(cache_shape, dtype=wo.dtype, device=wo.device))
        self.register_buffer("v_cache", torch.zeros(cache_shape, dtype=wo.dtype, device=wo.device))


def read_target(directory, device, dtype):
    """config.json and model.safetensors (the engine's layout), the weights on the device."""
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    w = {k: v.to(device, dtype) for k, v in
         safetensors_io.load(os.path.join(directory, "model.safetensors")).items()}
    return c, w


class Peer(torch.nn.Module):
    """The decoder every target shares (engine/model/block.cc): pre-norm blocks, one QKV
    projection (with its bias where the weights hold one), SwiGLU, over a static cache of
    `length` positions for the 2 guidance rows (the conditioned row first). Cache row =
    sequence position: both architectures feed every condition row from position 0.
    An architecture adds its embeddings, positions (add_positions: absolute rows added to x,
    or a rotary table returned), head, prefill and the condition of the check."""

    def init_blocks(self, c, w, length):
        self.c, self.eps = c, c["norm_eps"]
        self.heads, self.kv_heads = c["n_head"], c.get("n_kv_head", c["n_head"])
        self.hd = c["dim"] // c["n_head"]
        self.layers = torch.nn.ModuleList()
        for i in range(c["n_layer"]):
            p = f"layers.{i}."
            self.layers.append(Layer(
                w[p + "attention.wqkv.weight"], w.get(p + "attention.wqkv.bias"),
                w[p + "attention.wo.weight"],
                torch.cat([w[p + "feed_forward.w1.weight"], w[p + "feed_forward.w3.weight"]]),
                w[p + "feed_forward.w2.weight"], w[p + "attention_norm.weight"],
                w[p + "ffn_norm.weight"], (2, self.kv_heads, length, self.hd)))
        self.register_buffer("norm", w["norm.weight"])
        self.register_buffer("causal", torch.ones(length, length, dtype=torch.bool,
                                                  device=self.norm.device).tril())

    def step_bytes(self, context):
        """Bytes a guided one-code step reads: weights it uses and the cache up to `context`
        (the embedding and position rows of one code are left out: a row each)."""
        weights = sum(t.numel() * t.element_size() for name, t in self.named_buffers()
                      if name.startswith(("layers.", "norm", "head_"))
                      and not name.endswith(("k_cache", "v_cache")))
        cache = 2 * len(self.layers) * 2 * self.kv_heads * context * self.hd
        return weights + cache * self.norm.element_size()

    def forward(self, x, pos):
        """x [2, n, dim] at positions pos [n]: the image logits [2, n, codes] (float32)."""
        b, n, _ = x.shape
        x, rope = self.add_positions(x, pos)
        mask = self.causal[pos]
        for layer in self.layers:
            qkv = F.linear(rms_norm(x, layer.attention_norm, self.eps), layer.wqkv, layer.bqkv)
            q = qkv[..., :self.heads * self.hd].view(b, n, self.heads, self.hd)
            k = qkv[..., self.heads * self.hd:(self.heads + self.kv_heads) * self.hd] \
                .view(b, n, self.kv_heads, self.hd)
            if rope is not None:
                qk = rotary(qkv[..., :(self.heads + self.kv_heads) * self.hd]
                            .view(b, n, self.heads + self.kv_heads, self.hd), rope)
                q, k = qk[:, :, :self.heads], qk[:, :, self.heads:]
            q, k = q.transpose(1, 2), k.transpose(1, 2)
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
        return self.head(rms_norm(x, self.norm, self.eps)).float()

    def decode(self, codes, pos):
        """codes [2, n] image tokens at positions pos [n]."""
        return self.forward(F.embedding(codes, self.codes), pos)


class JanusPeer(Peer):
    """Janus-Pro's generation path (architecture janus): text ids as the condition (the
    guidance pair as mulo's EmbedCondition makes it), rotary positions, the aligner's code
    rows and gen_head."""

    def __init__(self, c, w, prompt, n_codes, device):
        super().__init__()
        length = prompt + n_codes
        self.init_blocks(c, w, length)
        self.condition_rows, self.n_codes = prompt, n_codes  # the first code sits at prompt
        self.register_buffer("text", w["tok_embeddings.weight"])
        x = w["gen_embed.weight"]
        for i in range(c["aligner_depth"]):  # every code's input row, once (as mulo)
            if i:
                x = F.gelu(x)
            x = F.linear(x, w[f"gen_aligner.layers.{2 * i}.weight"],
                         w[f"gen_aligner.layers.{2 * i}.bias"])
        self.register_buffer("codes", x.contiguous())
        for name in ("output_mlp_projector.weight", "output_mlp_projector.bias",
                     "vision_head.weight", "vision_head.bias"):
            self.register_buffer("head_" + name.replace(".", "_"), w["gen_head." + name])
        inv = 1.0 / c.get("rope_theta", 10000.0) ** (
            torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)
        angles = torch.arange(length, dtype=torch.float32).unsqueeze(1) * inv.unsqueeze(0)
        self.register_buffer("rope", torch.stack((angles.cos(), angles.sin()), -1).to(device))

    def add_positions(self, x, pos):
        return x, self.rope[pos]

    def head(self, h):
        h = F.gelu(F.linear(h, self.head_output_mlp_projector_weight,
                            self.head_output_mlp_projector_bias))
        return F.linear(h, self.head_vision_head_weight, self.head_vision_head_bias)

    def timing_condition(self):
        return list(range(1, self.condition_rows + 1))  # as token_model_bench's

    def first_code(self, prompt_ids):
        """The first image code's position after these prompt ids."""
        return len(prompt_ids)

    def check_condition(self, expected):
        """The condition of token_model_bench --logits_out's file and the rows to compare."""
        return expected["prompt_ids"].tolist(), [0, 1], None

    def prefill(self, prompt_ids):
        """The guidance pair as mulo's EmbedCondition makes it: inner prompt ids -> pad_id."""
        ids = torch.tensor(prompt_ids, device=self.norm.device).unsqueeze(0).repeat(2, 1)
        if ids.shape[1] > 2:
            ids[1, 1:-1] = self.c["pad_id"]
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.forward(F.embedding(ids, self.text), pos)


class TarPeer(Peer):
    """Tar AR-DTok's target (architecture llamagen with clip_cond and abs_pe, as
    engine/model/transformer.cc): cls_token_num feature rows through clip_proj (the null row's
    features are zeros), absolute position rows added to the input, output.weight as the
    head."""

    def __init__(self, c, w, n_codes):
        super().__init__()
        if c["position_mode"] != "abs_pe" or c["condition_mode"] != "clip_cond":
            raise SystemExit(f"position_mode {c['position_mode']}, condition_mode "
                             f"{c['condition_mode']}: the peer runs Tar's target (abs_pe, "
                             "clip_cond) of the llamagen architecture")
        self.condition_rows, self.n_codes = c["cls_token_num"], n_codes
        self.init_blocks(c, w, self.condition_rows + n_codes)
        self.register_buffer("codes", w["tok_embeddings.weight"])
        self.register_buffer("abs_pe", w["abs_pe"].squeeze(0))  # [cls + codes - 1, dim]
        self.register_buffer("clip_proj_weight", w["clip_proj.weight"])
        self.register_buffer("clip_proj_bias", w["clip_proj.bias"])
        self.register_buffer("head_output_weight", w["output.weight"])

    def add_positions(self, x, pos):
        return x + self.abs_pe[pos].unsqueeze(0), None

    def head(self, h):
        return F.linear(h, self.head_output_weight)

    def timing_condition(self):
        return torch.randn(self.condition_rows, self.c["cond_dim"]).to(self.norm.device)

    def first_code(self, features):
        """The first image code's position: after every condition position."""
        return self.condition_rows

    def check_condition(self, expected):
        """token_model_bench writes the conditioned row's features (drawn at random) beside
        its logits, so both rows are compared; a file from before it did checks the null row,
        whose features are zeros, alone."""
        if "features" in expected:
            return expected["features"], [0, 1], None
        return (self.timing_condition(), [1],
                "the file has no features (written before token_model_bench kept them): "
                "the null row only")

    def prefill(self, features):
        """features [cls_token_num, cond_dim]: the guidance pair as mulo's EmbedCondition."""
        f = features.to(self.norm.device, self.norm.dtype).unsqueeze(0)
        x = F.linear(torch.cat([f, torch.zeros_like(f)]), self.clip_proj_weight,
                     self.clip_proj_bias)
        pos = torch.arange(self.condition_rows, device=x.device)
        return self.forward(x, pos)


def load_peer(directory, grid, prompt, device, dtype):
    """The family's target as mulo picks its architecture (engine/model/architectures.cc:
    config.json's `architecture`, llamagen when it names none), for a grid x grid image (the
    family's grid, else the target's own: a llamagen target names its grid)."""
    c, w = read_target(directory, device, dtype)
    n_codes = (grid or c["grid_size"]) ** 2
    architecture = c.get("architecture", "llamagen")
    if architecture == "janus":
        return JanusPeer(c, w, prompt, n_codes, device)
    if architecture == "llamagen":
        return TarPeer(c, w, n_codes)
    raise SystemExit(f"{directory}: architecture {architecture!r}: the peer runs janus and "
                     "llamagen (Tar) targets")


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
    ap.add_argument("--prompt", type=int, default=40,
                    help="prompt ids (1..N, as mulo's bench) of a janus target; Tar's target "
                         "reads its cls_token_num feature rows")
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
    cfg = family["default_cfg_scale"]
    t0 = time.time()
    model = load_peer(target, family.get("grid_size"), a.prompt, device, dtype)
    n_codes, first = model.n_codes, model.condition_rows  # first: the first code's position
    report = dict(family=family["name"], architecture=type(model).__name__, device=str(device),
                  dtype=a.dtype, torch=torch.__version__, load_s=round(time.time() - t0, 1),
                  codes=n_codes, condition_rows=first, cfg_scale=cfg)
    if a.check:
        expected = safetensors_io.load(a.check)
        condition, rows, note = model.check_condition(expected)
        model.prefill(condition)
        codes = expected["codes"].to(device)
        at = model.first_code(condition)
        got = model.decode(codes.unsqueeze(0).repeat(2, 1),
                           torch.arange(at, at + len(codes), device=device)).cpu()[rows]
        want = expected["logits"][rows]
        error = ((got - want).abs().max() / want.abs().max()).item()
        report["check"] = dict(relative_error=error, tolerance=a.tolerance,
                               agrees=error <= a.tolerance, logits=list(expected["logits"].shape),
                               rows=rows)
        if note:
            report["check"]["note"] = note
        verdict = "within" if error <= a.tolerance else "OUTSIDE"
        print(f"check against mulo's logits (rows {rows}{': ' + note if note else ''}): "
              f"{error:.2e} relative ({verdict} {a.tolerance})", flush=True)
    bandwidth = copy_bandwidth(device)
    step_bytes = model.step_bytes(first + n_codes // 2)
    report["step_bytes"] = step_bytes
    if bandwidth:
        report["copy_bandwidth_gb_s"] = round(bandwidth / 1e9, 1)
        report["floor_ms"] = round(1e3 * step_bytes / bandwidth, 4)
    condition = model.timing_condition()
    # An image: the prefill draws its first code, each of the other codes takes a step (at
    # positions first .. first + n_codes - 2: Tar's absolute table ends there).
    steps = min(a.steps, n_codes - 1)
    report["modes"] = {}
    for mode in a.modes.split(","):
        if mode != "eager" and not hasattr(torch, "compile"):
            print(f"{mode}: this PyTorch ({torch.__version__}) has no torch.compile; skipped")
            continue
        step = guided_step if mode == "eager" else torch.compile(guided_step, mode=mode,
                                                                 fullgraph=True)
        t0 = time.time()
        model.prefill(condition)
        code = torch.zeros(2, 1, dtype=torch.long, device=device)
        pos = torch.tensor([first], device=device)
        code = run_steps(step, model, code, pos, 3, cfg)  # compiles (and captures) here
        sync(device)
        warm_s = time.time() - t0
        times = []
        for _ in range(a.repeats):
            model.prefill(condition)
            pos = torch.tensor([first], device=device)
            sync(device)
            t0 = time.perf_counter()
            code = run_steps(step, model, code, pos, steps, cfg)
            sync(device)
            times.append((time.perf_counter() - t0) / steps)
        images = []
        for _ in range(a.images):
            sync(device)
            t0 = time.perf_counter()
            model.prefill(condition)
            pos = torch.tensor([first], device=device)
            code = run_steps(step, model, code, pos, n_codes - 1, cfg)
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
