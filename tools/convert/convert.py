#!/usr/bin/env python3
"""Converts upstream checkpoints (pickled torch.save files) into mulo components and families.

Run with Debian's interpreter (python3-torch). One command per upstream family:

  # Tar: AR-DTok 512 px target, AR-DTok 256 px as MuLo-SD's drafter, TA-Tok, VQ-16
  /usr/bin/python3 tools/convert/convert.py tar-family --out models/tar \\
      --target ar_dtok_lp_512px.pth --drafter ar_dtok_lp_256px.pth \\
      --ta-tok ta_tok.pth --vq vq_ds16_t2i.pt [--resamplers DIR]
  # LlamaGen text-to-image (or --gpt-type c2i with a c2i_*.pt and vq_ds16_c2i.pt)
  /usr/bin/python3 tools/convert/convert.py llamagen-family --out models/llamagen-t2i \\
      --gpt t2i_XL_stage2_512.pt --gpt-model GPT-XL --gpt-type t2i --image-size 512 \\
      --vq vq_ds16_t2i.pt [--t5 flan-t5-xl/]
  # Janus-Pro: the Hugging Face directory (huggingface-cli download deepseek-ai/Janus-Pro-1B)
  /usr/bin/python3 tools/convert/convert.py janus-family --dir Janus-Pro-1B/ --out models/janus-pro

Single components: tar-ar, ta-tok, llamagen-gpt, vq (each --ckpt FILE --out DIR).
--dtype auto (default) stores models of >= 100 M parameters as bfloat16 and smaller ones as
float32; f32 / bf16 / f16 force one. Files that pickle more than tensors and plain containers
are refused unless --trust-pickle is given; upstream checkpoints (tensors, dicts, argparse
Namespaces, numpy scalars) load without it.
Every refusal names the file and the key; the exit status is 2.

MuLo-SD's U_2 / D_2 for a converted family with a drafter are trained from a folder of your
own images by train_resamplers.py (this folder; its --help says more):
  /usr/bin/python3 tools/convert/train_resamplers.py --family models/tar --images my_images/
writes models/tar/upsampler/, models/tar/downsampler/ and models/tar/resamplers_report.json
and adds the pair to models/tar/family.json (the server then offers `mulo` for the family);
with --out DIR it writes DIR/upsampler/ and DIR/downsampler/ instead, for --resamplers DIR.
An EAGLE head for a converted family (Tar, LlamaGen, Janus-Pro) from a folder of images:
  /usr/bin/python3 tools/convert/train_eagle_head.py --family models/janus-pro --images my_images/
writes models/janus-pro/eagle/ and adds it to family.json (eagle, lantern, lantern++, peanut).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import family  # noqa: E402
import llamagen_gpt  # noqa: E402
import ta_tok_dequantizer  # noqa: E402
import hf_causal_lm  # noqa: E402
import hf_janus  # noqa: E402
import hf_t5_encoder  # noqa: E402
import tar_ar  # noqa: E402
import upstream  # noqa: E402
import vq16  # noqa: E402


def add_common(p, dtype="auto"):
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=["auto", "f32", "bf16", "f16"], default=dtype)
    p.add_argument("--trust-pickle", action="store_true")


def add_ta_tok_heads(p):
    p.add_argument("--ta-tok-heads", type=int, default=12,
                   help="attention heads of TA-Tok's decoder; the file cannot say them, and "
                        "Tar builds it with transformers' Siglip2VisionConfig default, 12")


def add_gpt_flags(p):
    p.add_argument("--gpt-model", choices=sorted(llamagen_gpt.REGISTRY))
    p.add_argument("--gpt-type", choices=["c2i", "t2i"])
    p.add_argument("--image-size", type=int)
    p.add_argument("--downsample-size", type=int)
    p.add_argument("--cls-token-num", type=int)
    p.add_argument("--num-classes", type=int)
    p.add_argument("--t5-feature-dim", type=int, help="caption feature width (2048: flan-t5-xl)")
    p.add_argument("--codebook-size", type=int, help="the VQ codebook = the vocabulary (16384)")


def add_family_flags(p):
    """The VQ file and what every family command shares."""
    p.add_argument("--vq", required=True)
    p.add_argument("--vq-model", choices=sorted(vq16.REGISTRY), default="VQ-16")
    p.add_argument("--resamplers", help="a directory with upsampler/ and downsampler/")
    p.add_argument("--name")
    add_common(p)


def gpt_kwargs(a):
    return dict(gpt_model=a.gpt_model, gpt_type=a.gpt_type, image_size=a.image_size,
                downsample_size=a.downsample_size, cls_token_num=a.cls_token_num,
                num_classes=a.num_classes, t5_feature_dim=a.t5_feature_dim,
                codebook_size=a.codebook_size, dtype=a.dtype,
                trust_pickle=a.trust_pickle)


def tar_family(a):
    os.makedirs(a.out, exist_ok=True)
    target = tar_ar.convert(a.target, os.path.join(a.out, "target"), a.dtype, a.trust_pickle)
    components = ["target"]
    if a.drafter:
        drafter = tar_ar.convert(a.drafter, os.path.join(a.out, "drafter"), a.dtype,
                                 a.trust_pickle)
        family.check_drafter(target, drafter, a.drafter)
        components.append("drafter")
    ta = ta_tok_dequantizer.convert(a.ta_tok, os.path.join(a.out, "ta_tok"),
                                    n_head=a.ta_tok_heads, trust_pickle=a.trust_pickle)
    if ta["hidden"] != target["cond_dim"]:
        raise upstream.ConversionError(
            f"{a.ta_tok}: TA-Tok features are {ta['hidden']} wide, the AR-DTok clip_proj takes "
            f"{target['cond_dim']}")
    components.append("ta_tok")
    vq_cfg = vq16.convert(a.vq, os.path.join(a.out, "vq"), a.vq_model, trust_pickle=a.trust_pickle)
    components.append("vq")
    if vq_cfg["codebook_size"] != target["vocab_size"]:
        raise upstream.ConversionError(f"{a.vq}: codebook of {vq_cfg['codebook_size']} entries, "
                                       f"the AR-DTok vocabulary has {target['vocab_size']}")
    if a.resamplers:
        components += family.copy_resamplers(a.resamplers, a.out, vq_cfg)
    # Tar's defaults: CFG 4.0 always on, uint8 by truncation.
    family.write_family_json(a.out, a.name or "tar", 4.0, components, "truncate",
                             {"tool": "tools/convert/convert.py tar-family"})


def llamagen_family(a):
    os.makedirs(a.out, exist_ok=True)
    target = llamagen_gpt.convert(a.gpt, os.path.join(a.out, "target"), **gpt_kwargs(a))
    vq_cfg = vq16.convert(a.vq, os.path.join(a.out, "vq"), a.vq_model, trust_pickle=a.trust_pickle)
    if vq_cfg["codebook_size"] != target["vocab_size"]:
        raise upstream.ConversionError(f"{a.vq}: codebook of {vq_cfg['codebook_size']} entries, "
                                       f"the GPT vocabulary has {target['vocab_size']}")
    components = ["target", "vq"]
    if a.resamplers:
        components += family.copy_resamplers(a.resamplers, a.out, vq_cfg)
    t2i = target["condition_mode"] == "caption"
    if a.t5:
        # The text encoder that turns a prompt into the caption features the GPT reads.
        if not t2i:
            raise upstream.ConversionError(f"--t5: {a.gpt} is a c2i model; only t2i reads T5")
        if not os.path.exists(os.path.join(a.t5, "spiece.model")):
            raise upstream.ConversionError(f"{a.t5}/spiece.model: missing (FLAN-T5's tokenizer, "
                                           f"needed to serve a text prompt)")
        t5 = hf_t5_encoder.convert(a.t5, os.path.join(a.out, "t5"), a.dtype)
        if t5["d_model"] != target["cond_dim"]:
            raise upstream.ConversionError(
                f"{a.t5}/config.json: d_model {t5['d_model']}, the GPT reads captions "
                f"{target['cond_dim']} wide")
        components.append("t5")
    # LlamaGen's sample scripts: CFG 7.5 for t2i, 4.0 for c2i; save_image rounds.
    family.write_family_json(a.out, a.name or ("llamagen-t2i" if t2i else "llamagen-c2i"),
                             7.5 if t2i else 4.0, components, "round",
                             {"tool": "tools/convert/convert.py llamagen-family"})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tar-ar", help="one Tar AR-DTok .pth")
    p.add_argument("--ckpt", required=True)
    add_common(p)
    p = sub.add_parser("ta-tok", help="Tar's ta_tok.pth (the de-quantiser only)")
    p.add_argument("--ckpt", required=True)
    add_ta_tok_heads(p)
    add_common(p, dtype="f32")
    p = sub.add_parser("llamagen-gpt", help="one LlamaGen c2i / t2i .pt")
    p.add_argument("--ckpt", required=True)
    add_gpt_flags(p)
    add_common(p)
    p = sub.add_parser("vq", help="one LlamaGen VQ .pt")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--vq-model", choices=sorted(vq16.REGISTRY), default="VQ-16")
    add_common(p, dtype="f32")
    p = sub.add_parser("hf-causal-lm", help="a Hugging Face Qwen2 / LLaMA model directory "
                                            "(config.json + safetensors)")
    p.add_argument("--dir", required=True)
    add_common(p)
    p = sub.add_parser("hf-t5-encoder", help="the encoder of a Hugging Face T5 v1.1 directory "
                                             "(google/flan-t5-xl)")
    p.add_argument("--dir", required=True)
    add_common(p)
    p = sub.add_parser("tar-family", help="a Tar family directory")
    p.add_argument("--target", required=True)
    p.add_argument("--drafter")
    p.add_argument("--ta-tok", required=True)
    add_ta_tok_heads(p)
    add_family_flags(p)
    p = sub.add_parser("llamagen-family", help="a LlamaGen family directory")
    p.add_argument("--gpt", required=True)
    p.add_argument("--t5", help="t2i: a Hugging Face FLAN-T5 directory (google/flan-t5-xl: "
                                "config.json, safetensors, spiece.model) for text prompts")
    add_gpt_flags(p)
    add_family_flags(p)
    p = sub.add_parser("janus-family", help="a Janus-Pro family from its Hugging Face directory "
                                            "(deepseek-ai/Janus-Pro-1B / -7B)")
    p.add_argument("--dir", required=True)
    p.add_argument("--vq-model", choices=sorted(vq16.REGISTRY), default="VQ-16")
    p.add_argument("--image-size", type=int, default=384, help="pixels (16 per code: 384 -> 24 x 24)")
    p.add_argument("--name")
    add_common(p)
    a = ap.parse_args(argv)
    try:
        if a.command == "tar-ar":
            tar_ar.convert(a.ckpt, a.out, a.dtype, a.trust_pickle)
        elif a.command == "ta-tok":
            ta_tok_dequantizer.convert(a.ckpt, a.out, n_head=a.ta_tok_heads, dtype=a.dtype,
                                       trust_pickle=a.trust_pickle)
        elif a.command == "llamagen-gpt":
            llamagen_gpt.convert(a.ckpt, a.out, **gpt_kwargs(a))
        elif a.command == "vq":
            vq16.convert(a.ckpt, a.out, a.vq_model, a.dtype, a.trust_pickle)
        elif a.command == "hf-causal-lm":
            hf_causal_lm.convert(a.dir, a.out, a.dtype)
        elif a.command == "hf-t5-encoder":
            hf_t5_encoder.convert(a.dir, a.out, a.dtype)
        elif a.command == "tar-family":
            tar_family(a)
        elif a.command == "janus-family":
            hf_janus.convert_family(a.dir, a.out, a.dtype, a.trust_pickle, a.vq_model,
                                    a.image_size, a.name)
        else:
            llamagen_family(a)
    except upstream.ConversionError as e:
        print(f"convert: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
