#!/usr/bin/env python3
"""Writes tiny random-weight checkpoints with the upstream layouts, inputs and the reference
outputs under tests/data/, for the C++ parity tests. Deterministic: re-running rewrites the
same bytes. Run with Debian's interpreter:  /usr/bin/python3 tools/reference/make_fixtures.py
"""
import argparse
import json
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "convert"))
import llamagen_gpt  # noqa: E402
import tar_ar  # noqa: E402
import upstream_layouts  # noqa: E402
import vq16  # noqa: E402
import safetensors_io  # noqa: E402
from random_init import spread_init  # noqa: E402
import eagle_head as eh  # noqa: E402
import hf_causal_lm  # noqa: E402
import hf_janus  # noqa: E402
import janus  # noqa: E402
import hf_t5_encoder  # noqa: E402
import t5  # noqa: E402
import qwen2  # noqa: E402
import resampler as rs  # noqa: E402
import ta_tok as tt  # noqa: E402
import ta_tok_dequantizer  # noqa: E402
import text_encoder as te  # noqa: E402
import transformer as tr  # noqa: E402
import vq_decoder as vq  # noqa: E402

COMMON = dict(dim=64, n_layer=2, n_head=4, vocab_size=128, grid_size=8, multiple_of=32,
              norm_eps=1e-5, rope_base=10000.0)

MODELS = {
    # Tar AR-DTok layout: learned absolute positions, float condition features via clip_proj.
    "tar_tiny": dict(COMMON, position_mode="abs_pe", condition_mode="clip_cond",
                     cls_token_num=4, cond_dim=24, storage="F32", cfg_scale=4.0),
    # LlamaGen c2i layout: 2D RoPE, class label, grouped-query attention, stored as bf16;
    # LlamaGen's FFN rounds to multiples of 256 (ModelArgs default, not in its files).
    "llamagen_c2i_tiny": dict(COMMON, position_mode="rope_2d", condition_mode="class_label",
                              cls_token_num=1, num_classes=10, n_kv_head=2, storage="BF16",
                              cfg_scale=4.0, multiple_of=256),
    # LlamaGen t2i layout: 2D RoPE, caption features through cap_proj, stored as f16.
    "llamagen_t2i_tiny": dict(COMMON, position_mode="rope_2d", condition_mode="caption",
                              cls_token_num=6, cond_dim=32, storage="F16", cfg_scale=7.5,
                              multiple_of=256),
}

# The tiny sizes, registered beside upstream's names so the converter reads the fixtures the
# way it reads real files (the registry is the only thing a tiny model adds).
TINY_NAMES = {"tar_tiny": "llama-abs-tiny", "llamagen_c2i_tiny": "GPT-tiny",
              "llamagen_t2i_tiny": "GPT-tiny"}
tar_ar.REGISTRY["llama-abs-tiny"] = (COMMON["n_layer"], COMMON["n_head"], COMMON["dim"])
llamagen_gpt.REGISTRY["GPT-tiny"] = (COMMON["n_layer"], COMMON["n_head"], COMMON["dim"])
STORAGE_FLAG = {"F32": "f32", "F16": "f16", "BF16": "bf16"}

VQ_TINY = dict(codebook_size=128, codebook_embed_dim=8, z_channels=32, ch=16, ch_mult=[1, 2],
               num_res_blocks=1, norm_groups=8, codebook_l2_norm=True, out_channels=3)

STORAGE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def round_trip(model, dtype):
    """Rounds the weights through the storage dtype, so the reference computes with exactly the
    values the engine will read back."""
    for p in list(model.parameters()) + [b for n, b in model.named_buffers() if "uncond" in n]:
        p.data = p.data.to(dtype).to(torch.float32)


def model_config(spec):
    return {k: v for k, v in spec.items() if k not in ("storage", "cfg_scale")}


def state_for_storage(model, dtype):
    sd = model.state_dict()
    return {k: v.to(dtype) for k, v in sd.items()}


def greedy_margin(model, cond, tokens, scale):
    cond2 = torch.cat([cond, cond])
    null = torch.tensor([False, True])
    logits = tr.cfg_mix(model(cond2, null, torch.cat([tokens, tokens])), scale)
    top2 = logits.topk(2, dim=-1).values
    return (top2[..., 0] - top2[..., 1]).min().item()


def make_transformer(name, spec, out_dir, seed):
    cfg = model_config(spec)
    for attempt in range(200):
        gen = torch.Generator().manual_seed(seed + 1000 * attempt)
        model = tr.Transformer(cfg).eval()
        spread_init(model, gen)
        round_trip(model, STORAGE[spec["storage"]])
        cls, n = cfg["cls_token_num"], cfg["grid_size"] ** 2
        if cfg["condition_mode"] == "class_label":
            cond = torch.tensor([3])
        else:
            cond = torch.randn(1, cls, cfg["cond_dim"], generator=gen)
        with torch.no_grad():
            greedy = tr.greedy_generate(model, cond, spec["cfg_scale"])
            margin = greedy_margin(model, cond, greedy[None, :-1], spec["cfg_scale"])
        # A clear margin keeps float noise from flipping an argmax; varied tokens make the
        # greedy test sensitive to positions (a constant sequence would hide position bugs).
        if margin > 1e-2 and len(set(greedy.tolist())) >= n // 4:
            break
    else:
        raise RuntimeError(f"{name}: no seed gave a clear greedy margin")
    tokens = torch.randint(0, cfg["vocab_size"], (1, n - 1), generator=gen)
    with torch.no_grad():
        cond2 = torch.cat([cond, cond])
        null = torch.tensor([False, True])
        logits, hidden = model(cond2, null, torch.cat([tokens, tokens]), return_hidden=True)
    write_through_converter(name, spec, model, out_dir, gen)
    expected = {
        "cond": cond if cond.dtype != torch.long else cond.to(torch.int64),
        "tokens": tokens,
        "logits": logits,
        "hidden": hidden,
        "greedy_tokens": greedy,
        "cfg_scale": torch.tensor([spec["cfg_scale"]]),
    }
    if cfg["condition_mode"] == "caption":
        # A prompt shorter than the caption window: upstream's left padding and attention
        # mask (the reference's caption_length), the logits the engine must reproduce.
        length = cls // 2
        with torch.no_grad():
            expected["caption_logits"] = model(cond2, null, torch.cat([tokens, tokens]),
                                               caption_length=length)
        expected["caption_length"] = torch.tensor([length])
    safetensors_io.save(expected, os.path.join(out_dir, "expected.safetensors"))
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, greedy margin "
          f"{margin:.3g}, first tokens {greedy[:8].tolist()}")


def write_through_converter(name, spec, model, out_dir, gen):
    """Saves the model as the upstream code does and writes the fixture with the converter,
    so every parity test also covers upstream file -> converter -> engine."""
    cfg = model.cfg
    storage = STORAGE_FLAG[spec["storage"]]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name + ".pt")
        if name == "tar_tiny":
            upstream_layouts.tar_ar(path, model, TINY_NAMES[name], cfg["grid_size"] ** 2,
                                    cfg["cls_token_num"])
            tar_ar.convert(path, out_dir, storage)
        elif cfg["condition_mode"] == "class_label":
            # A training checkpoint: the argparse Namespace says the size (and, here, GQA).
            upstream_layouts.llamagen_gpt(path, model, gen, namespace_args=dict(
                gpt_model=TINY_NAMES[name], gpt_type="c2i", image_size=cfg["grid_size"] * 16,
                downsample_size=16, cls_token_num=1, num_classes=cfg["num_classes"],
                codebook_size=cfg["vocab_size"], n_kv_head=cfg["n_kv_head"]))
            llamagen_gpt.convert(path, out_dir, dtype=storage)
        else:
            # A released file: weights only; the flags say the size, as for sample_t2i.py.
            upstream_layouts.llamagen_gpt(path, model, gen)
            llamagen_gpt.convert(path, out_dir, gpt_model=TINY_NAMES[name], gpt_type="t2i",
                                 image_size=cfg["grid_size"] * 16,
                                 cls_token_num=cfg["cls_token_num"],
                                 t5_feature_dim=cfg["cond_dim"],
                                 codebook_size=cfg["vocab_size"], dtype=storage)
    os.remove(os.path.join(out_dir, "source.json"))  # names a temporary file


def make_vq(out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    model = vq.VQModel(VQ_TINY, with_encoder=True).eval()
    spread_init(model, gen)
    round_trip(model, torch.float16)  # stored as f16 (keeps the fixtures small)
    grid = 8
    ids = torch.randint(0, VQ_TINY["codebook_size"], (2, grid * grid), generator=gen)
    with torch.no_grad():
        pixels = model.decode_code(ids, grid, grid)
    # Through an upstream-layout file (codebook_used included) and the converter.
    vq16.REGISTRY["VQ-tiny"] = {k: v for k, v in VQ_TINY.items()
                                if k not in ("codebook_size", "codebook_embed_dim")}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vq_tiny.pt")
        upstream_layouts.llamagen_vq(path, model)
        vq16.convert(path, out_dir, "VQ-tiny", dtype="f16")
    os.remove(os.path.join(out_dir, "source.json"))
    safetensors_io.save({"ids": ids, "pixels": pixels, "image": vq.to_uint8(pixels),
                         "image_truncated": vq.to_uint8_truncated(pixels)},
                        os.path.join(out_dir, "expected.safetensors"))
    print(f"vq_tiny: {sum(p.numel() for p in model.parameters())} params, pixel range "
          f"[{pixels.min():.2f}, {pixels.max():.2f}]")


TA_TOK_TINY = dict(codebook_size=96, bottleneck_dim=8, l2_normalized=True, in_dim=16, hidden=24,
                   n_layer=2, n_head=2, intermediate=40, num_patches=16, layer_norm_eps=1e-6)


def make_ta_tok(out_dir, seed):
    """TA-Tok's de-quantiser through an upstream-layout ta_tok.pth and the converter; features
    for grids larger (5x5) and smaller (3x3) than its 4x4 position table, as Tar's 27 / 13 / 9
    are against its 16x16 one."""
    gen = torch.Generator().manual_seed(seed)
    model = tt.TaTokDequantizer(TA_TOK_TINY).eval()
    spread_init(model, gen)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ta_tok.pth")
        upstream_layouts.ta_tok(path, model, gen)
        # The file cannot say its head count (transformers' default, 12, for the real one).
        ta_tok_dequantizer.convert(path, out_dir, n_head=TA_TOK_TINY["n_head"])
    os.remove(os.path.join(out_dir, "source.json"))
    expected = {}
    for side in (5, 3):
        ids = torch.randint(0, TA_TOK_TINY["codebook_size"], (1, side * side), generator=gen)
        with torch.no_grad():
            expected[f"ids_{side}"] = ids[0]
            expected[f"features_{side}"] = model(ids)[0]
    safetensors_io.save(expected, os.path.join(out_dir, "expected.safetensors"))
    print(f"ta_tok_tiny: {sum(p.numel() for p in model.parameters())} params")


def write_config(out_dir, cfg, extra=None):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    for name, content in (extra or {}).items():
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(content, f)
            f.write("\n")


def make_text_encoder(out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    vocab = ["<pad>", "<unk>", ",", ":", "a", "blue", "circle", "red", "small", "square", "top"]
    cfg = dict(vocab_size=len(vocab), dim=32, n_layer=2, n_head=4, max_tokens=12, multiple_of=32,
               norm_eps=1e-5)
    model = te.TextEncoder(cfg).eval()
    spread_init(model, gen)
    prompt = "A small red circle, top: Blue SQUARE zebra"
    ids = torch.tensor([te.encode_ids(prompt, vocab, cfg["max_tokens"])])
    with torch.no_grad():
        features = model(ids)
    write_config(out_dir, cfg, {"vocab.json": vocab})
    safetensors_io.save(model.state_dict(), os.path.join(out_dir, "model.safetensors"))
    safetensors_io.save({"ids": ids, "features": features},
                        os.path.join(out_dir, "expected.safetensors"))
    with open(os.path.join(out_dir, "prompt.txt"), "w") as f:
        f.write(prompt + "\n")
    print(f"text_encoder_tiny: ids {ids.tolist()}")


def make_resamplers(out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    codebook = torch.randn(128, 8, generator=gen)
    expected = {}
    for kind, h in (("up", 4), ("down", 8)):
        cfg = dict(kind=kind, factor=2, channels=8, num_blocks=2, codebook_size=128,
                   codebook_embed_dim=8)
        model = rs.Resampler(cfg, codebook).eval()
        spread_init(model, gen)
        ids = torch.randint(0, 128, (2, h * h), generator=gen)
        with torch.no_grad():
            logits = model(ids, h, h)
        write_config(os.path.join(out_dir, kind), cfg)
        safetensors_io.save(model.state_dict(), os.path.join(out_dir, kind, "model.safetensors"))
        expected[f"{kind}_ids"] = ids
        expected[f"{kind}_logits"] = logits
    safetensors_io.save(expected, os.path.join(out_dir, "expected.safetensors"))
    print("resampler_tiny: up and down")


def make_eagle(out_dir, target_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    with open(os.path.join(target_dir, "config.json")) as f:
        tcfg = json.load(f)
    cfg = dict(dim=tcfg["dim"], n_head=tcfg["n_head"], multiple_of=tcfg["multiple_of"],
               norm_eps=tcfg["norm_eps"])
    head = eh.EagleHead(cfg).eval()
    spread_init(head, gen)
    round_trip(head, torch.float16)  # stored as f16 (keeps the fixtures small)
    emb = torch.randn(2, 5, cfg["dim"], generator=gen)
    feats = torch.randn(2, 5, cfg["dim"], generator=gen)
    with torch.no_grad():
        out = head(emb, feats)
    write_config(out_dir, cfg)
    safetensors_io.save(state_for_storage(head, torch.float16),
                        os.path.join(out_dir, "model.safetensors"))
    safetensors_io.save({"embeddings": emb, "features": feats, "predicted": out},
                        os.path.join(out_dir, "expected.safetensors"))
    print("eagle_tiny: head over tar_tiny")


def make_tiny_family(out_dir, seed):
    """A complete random-weight family (conditioner with the synth vocabulary, target, VQ) for
    server and integration tests: the same code paths as models/synth at a fraction of the
    cost. 32x32 tokens make a request last long enough to cancel it mid-stream."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "synth"))
    import domain  # noqa: E402
    gen = torch.Generator().manual_seed(seed)
    vocab = domain.vocabulary()
    cond_cfg = dict(vocab_size=len(vocab), dim=16, n_layer=1, n_head=2, max_tokens=24,
                    multiple_of=16, norm_eps=1e-5)
    conditioner = te.TextEncoder(cond_cfg).eval()
    target_cfg = dict(dim=32, n_layer=1, n_head=2, vocab_size=64, grid_size=32,
                      cls_token_num=24, position_mode="abs_pe", condition_mode="clip_cond",
                      cond_dim=16, multiple_of=16, norm_eps=1e-5)
    target = tr.Transformer(target_cfg).eval()
    vq_cfg = dict(codebook_size=64, codebook_embed_dim=8, z_channels=8, ch=8, ch_mult=[1, 1],
                  num_res_blocks=1, norm_groups=4, codebook_l2_norm=True, out_channels=3)
    vqm = vq.VQModel(vq_cfg, with_encoder=False).eval()
    chain_cfg = dict(target_cfg, dim=16, n_head=1)
    chain = tr.Transformer(chain_cfg).eval()
    drafter_cfg = dict(target_cfg, grid_size=16)
    drafter = tr.Transformer(drafter_cfg).eval()
    for module in (conditioner, target, vqm, chain, drafter):
        spread_init(module, gen)
    resamplers = {}
    for name, kind in (("upsampler", "up"), ("downsampler", "down")):
        cfg = dict(kind=kind, factor=2, channels=8, num_blocks=1, codebook_size=64,
                   codebook_embed_dim=8)
        module = rs.Resampler(cfg, vqm.quantize.embedding.weight.detach()).eval()
        spread_init(module, gen)
        resamplers[name] = (module, cfg, None)
    # Drawn last, so every other part stays as it was before the head existed.
    eagle_cfg = dict(dim=target_cfg["dim"], n_head=target_cfg["n_head"],
                     multiple_of=target_cfg["multiple_of"], norm_eps=target_cfg["norm_eps"])
    eagle = eh.EagleHead(eagle_cfg).eval()
    spread_init(eagle, gen)
    parts = {"conditioner": (conditioner, cond_cfg, {"vocab.json": vocab}),
             "target": (target, target_cfg, None), "vq": (vqm, vq_cfg, None),
             "chain": (chain, chain_cfg, None), "drafter": (drafter, drafter_cfg, None),
             **resamplers, "eagle": (eagle, eagle_cfg, None)}
    for name, (module, cfg, extra) in parts.items():
        write_config(os.path.join(out_dir, name), cfg, extra)
        safetensors_io.save(state_for_storage(module, torch.float16),
                            os.path.join(out_dir, name, "model.safetensors"))
    with open(os.path.join(out_dir, "family.json"), "w") as f:
        json.dump({"name": "tiny", "default_cfg_scale": 4.0,
                   "components": {k: k for k in parts}}, f, indent=2, sort_keys=True)
        f.write("\n")
    print("tiny_family: conditioner, 32x32-token target, 16x16 drafter, U_2 / D_2, chain draft,"
          " EAGLE head, VQ (64 px images)")


def make_sd_family(out_dir, seed):
    """A target and a correlated chain draft model (the target's weights plus noise) over a
    16-token vocabulary and a 4x4 grid: small enough to compute AR's exact distribution of the
    first tokens by enumeration, for the losslessness tests of speculative decoding."""
    gen = torch.Generator().manual_seed(seed)
    cfg = dict(dim=32, n_layer=1, n_head=2, vocab_size=16, grid_size=4, cls_token_num=2,
               position_mode="abs_pe", condition_mode="clip_cond", cond_dim=8, multiple_of=16,
               norm_eps=1e-5)
    target = tr.Transformer(cfg).eval()
    spread_init(target, gen)
    chain = tr.Transformer(cfg).eval()
    chain.load_state_dict(target.state_dict())
    for p in chain.parameters():
        p.data += 0.6 * p.data.std() * torch.randn(p.shape, generator=gen)
    for name, model in (("target", target), ("chain", chain)):
        write_config(os.path.join(out_dir, name), cfg)
        safetensors_io.save(model.state_dict(), os.path.join(out_dir, name, "model.safetensors"))
    cond = torch.randn(cfg["cls_token_num"], cfg["cond_dim"], generator=gen)
    safetensors_io.save({"cond": cond}, os.path.join(out_dir, "condition.safetensors"))
    # An EAGLE-style head over the target (random weights, drawn after everything above so
    # those stay as they were): the tree methods' losslessness holds for any head.
    head_cfg = dict(dim=cfg["dim"], n_head=cfg["n_head"], multiple_of=cfg["multiple_of"],
                    norm_eps=cfg["norm_eps"])
    head = eh.EagleHead(head_cfg).eval()
    spread_init(head, gen)
    write_config(os.path.join(out_dir, "eagle"), head_cfg)
    safetensors_io.save(head.state_dict(), os.path.join(out_dir, "eagle", "model.safetensors"))
    print("sd_tiny: target + correlated chain draft + EAGLE head, vocab 16, grid 4x4")


def make_mulo_family(out_dir, seed):
    """Target (8x8 grid), half-resolution drafter (4x4) and row-causal U_2 / D_2 over a shared
    32-entry codebook, random weights: the MuLo-SD tests' reductions (tau > 1 is AR, tau = 0
    is U_2 of the drafter) hold for any weights."""
    gen = torch.Generator().manual_seed(seed)
    codebook = torch.randn(32, 8, generator=gen)
    base = dict(dim=32, n_layer=1, n_head=2, vocab_size=32, cls_token_num=2,
                position_mode="abs_pe", condition_mode="clip_cond", cond_dim=8, multiple_of=16,
                norm_eps=1e-5)
    for name, grid in (("target", 8), ("drafter", 4)):
        cfg = dict(base, grid_size=grid)
        model = tr.Transformer(cfg).eval()
        spread_init(model, gen)
        write_config(os.path.join(out_dir, name), cfg)
        safetensors_io.save(model.state_dict(), os.path.join(out_dir, name, "model.safetensors"))
    for name, kind in (("upsampler", "up"), ("downsampler", "down")):
        cfg = dict(kind=kind, factor=2, channels=8, num_blocks=1, codebook_size=32,
                   codebook_embed_dim=8)
        model = rs.Resampler(cfg, codebook).eval()
        spread_init(model, gen)
        write_config(os.path.join(out_dir, name), cfg)
        safetensors_io.save(model.state_dict(), os.path.join(out_dir, name, "model.safetensors"))
    cond = torch.randn(2, 8, generator=gen)
    safetensors_io.save({"cond": cond}, os.path.join(out_dir, "condition.safetensors"))
    print("mulo_tiny: 8x8 target, 4x4 drafter, U_2 / D_2 over a 32-entry codebook")


# Hugging Face causal language models (Tar's MLLM is a Qwen2.5 one): tied and GQA with q/k/v
# biases (Qwen2), untied without biases (LLaMA).
CAUSAL_LMS = {
    "qwen2_tiny": dict(model_type="qwen2", hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                       vocab_size=384, rms_norm_eps=1e-6, rope_theta=1000000.0,
                       tie_word_embeddings=True, max_position_embeddings=128),
    "llama_tiny": dict(model_type="llama", hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
                       vocab_size=320, rms_norm_eps=1e-5, rope_theta=10000.0,
                       tie_word_embeddings=False, max_position_embeddings=128),
}


def make_causal_lm(name, cfg, out_dir, seed):
    """<out_dir>/hf: the upstream layout; <out_dir>/lm: converted; expected.safetensors: the
    reference's logits over a prompt and its greedy continuation."""
    gen = torch.Generator().manual_seed(seed)
    model = qwen2.CausalLm(cfg).eval()
    spread_init(model, gen)
    hf_dir = os.path.join(out_dir, "hf")
    write_config(hf_dir, cfg)
    state = model.state_dict()
    safetensors_io.save(state, os.path.join(hf_dir, "model.safetensors"))
    hf_causal_lm.convert(hf_dir, os.path.join(out_dir, "lm"), "f32")
    os.remove(os.path.join(out_dir, "lm", "source.json"))  # names this machine's path
    ids = torch.randint(0, cfg["vocab_size"], (1, 12), generator=gen)
    with torch.no_grad():
        logits = model(ids)
    continuation = qwen2.greedy_generate(model, ids, 16)
    safetensors_io.save({"ids": ids, "logits": logits,
                         "greedy": torch.tensor([continuation], dtype=torch.int64)},
                        os.path.join(out_dir, "expected.safetensors"))
    top2 = logits[0, -1].topk(2).values
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, greedy "
          f"{continuation[:6]}..., last margin {float(top2[0] - top2[1]):.3f}")


# FLAN-T5's encoder (T5 v1.1: gated GELU, relative position buckets), tiny, with a full
# T5ForConditionalGeneration's extra tensors (decoder, LM head) the converter must drop.
T5_TINY = dict(model_type="t5", feed_forward_proj="gated-gelu", d_model=48, d_kv=8, d_ff=80,
               num_layers=2, num_heads=4, vocab_size=200, relative_attention_num_buckets=32,
               relative_attention_max_distance=128, layer_norm_epsilon=1e-6)


def make_t5_encoder(out_dir, seed):
    """<out_dir>/hf: the upstream layout; <out_dir>/encoder: converted; expected.safetensors:
    the reference's features for a padded batch (LlamaGen pads captions to 120 tokens)."""
    gen = torch.Generator().manual_seed(seed)
    model = t5.T5Encoder(T5_TINY).eval()
    spread_init(model, gen)
    hf_dir = os.path.join(out_dir, "hf")
    write_config(hf_dir, T5_TINY)
    state = dict(model.state_dict())
    state["encoder.embed_tokens.weight"] = state["shared.weight"]
    state["decoder.final_layer_norm.weight"] = torch.ones(T5_TINY["d_model"])
    state["lm_head.weight"] = torch.zeros(T5_TINY["vocab_size"], T5_TINY["d_model"])
    safetensors_io.save(state, os.path.join(hf_dir, "model.safetensors"))
    hf_t5_encoder.convert(hf_dir, os.path.join(out_dir, "encoder"), "f32")
    os.remove(os.path.join(out_dir, "encoder", "source.json"))  # names this machine's path
    # Two captions of 9 and 150 tokens' worth (the second reaches buckets past max_distance's
    # log range), padded to 160 with id 0 and masked.
    n = 160
    ids = torch.zeros(2, n, dtype=torch.int64)
    mask = torch.zeros(2, n, dtype=torch.int64)
    for row, length in enumerate((9, 150)):
        ids[row, :length] = torch.randint(2, T5_TINY["vocab_size"], (length,), generator=gen)
        ids[row, length - 1] = 1  # </s>
        mask[row, :length] = 1
    with torch.no_grad():
        features = model(ids, mask)
    safetensors_io.save({"ids": ids, "mask": mask, "features": features},
                        os.path.join(out_dir, "expected.safetensors"))
    print(f"t5_encoder_tiny: {sum(p.numel() for p in model.parameters())} params, feature "
          f"scale {float(features.abs().max()):.3f}")


def make_janus(out_dir, seed):
    """<out_dir>/hf: a tiny Janus-Pro in the upstream layout (config.json, model.safetensors
    with the understanding path's stand-ins and the text head, tokenizer.json; no
    gen_vision_model: the parity test needs no VQ); <out_dir>/janus: converted;
    expected.safetensors: a prompt's guidance pair, the reference's image logits over it and
    five codes, and the greedy codes of upstream's CFG loop (weight 5)."""
    gen = torch.Generator().manual_seed(seed)
    cfg = janus.TINY_CONFIG
    model = janus.Janus(cfg).eval()
    spread_init(model, gen)
    hf_dir = os.path.join(out_dir, "hf")
    write_config(hf_dir, cfg)
    with open(os.path.join(hf_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(janus.tiny_tokenizer(), f, ensure_ascii=False)
        f.write("\n")
    safetensors_io.save(janus.upstream_state(model, gen), os.path.join(hf_dir, "model.safetensors"))
    hf_janus.convert_model(hf_dir, os.path.join(out_dir, "janus"), "f32")
    os.remove(os.path.join(out_dir, "janus", "source.json"))  # names this machine's path
    # BOS, 8 text ids, <begin_of_image>.
    ids = torch.cat([torch.tensor([256]), torch.randint(0, 256, (8,), generator=gen),
                     torch.tensor([262])])
    pair = janus.guidance_pair(ids, janus.TINY_PAD)
    codes = torch.randint(0, 128, (1, 5), generator=gen).expand(2, 5)
    with torch.no_grad():
        logits = model.image_logits(pair, codes)
    greedy = janus.generate(model, ids, janus.TINY_PAD, 16, 5.0)
    safetensors_io.save({"ids": ids, "pair": pair, "codes": codes.contiguous(), "logits": logits,
                         "greedy": torch.tensor(greedy, dtype=torch.int64)},
                        os.path.join(out_dir, "expected.safetensors"))
    mixed = logits[1] + 5.0 * (logits[0] - logits[1])
    top2 = mixed[-1].topk(2).values
    print(f"janus_tiny: {sum(p.numel() for p in model.parameters())} params, greedy "
          f"{greedy[:6]}..., last margin {float(top2[0] - top2[1]):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # bit-stable reference outputs
    for i, (name, spec) in enumerate(sorted(MODELS.items())):
        make_transformer(name, spec, os.path.join(args.out, name), args.seed + i)
    make_vq(os.path.join(args.out, "vq_tiny"), args.seed + 99)
    make_text_encoder(os.path.join(args.out, "text_encoder_tiny"), args.seed + 101)
    make_resamplers(os.path.join(args.out, "resampler_tiny"), args.seed + 103)
    make_eagle(os.path.join(args.out, "eagle_tiny"), os.path.join(args.out, "tar_tiny"),
               args.seed + 107)
    make_tiny_family(os.path.join(args.out, "repository", "tiny"), args.seed + 109)
    make_sd_family(os.path.join(args.out, "sd_tiny"), args.seed + 113)
    make_mulo_family(os.path.join(args.out, "mulo_tiny"), args.seed + 127)
    make_ta_tok(os.path.join(args.out, "ta_tok_tiny"), args.seed + 131)
    for i, (name, cfg) in enumerate(sorted(CAUSAL_LMS.items())):
        make_causal_lm(name, cfg, os.path.join(args.out, name), args.seed + 137 + i)
    make_t5_encoder(os.path.join(args.out, "t5_encoder_tiny"), args.seed + 149)
    make_janus(os.path.join(args.out, "janus_tiny"), args.seed + 151)


if __name__ == "__main__":
    main()
