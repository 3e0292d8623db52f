#!/usr/bin/env python3
"""Converts upstream checkpoints (pickled torch.save files) into mulo components and families.

Run with Debian's interpreter (python3-torch). One command per upstream family:

  # Tar: AR-DTok 512 px target, AR-DTok 256 px as MuLo-SD's drafter, TA-Tok, VQ-16, and its
  # MLLM (the Hugging Face directory csuhan/Tar-1.5B) for text prompts
  /usr/bin/python3 tools/convert/convert.py tar-family --out models/tar \\
      --target ar_dtok_lp_512px.pth --drafter ar_dtok_lp_256px.pth \\
      --ta-tok ta_tok.pth --vq vq_ds16_t2i.pt [--mllm Tar-1.5B/] [--resamplers DIR]
  # LlamaGen text-to-image (or --gpt-type c2i with a c2i_*.pt and vq_ds16_c2i.pt)
  /usr/bin/python3 tools/convert/convert.py llamagen-family --out models/llamagen-t2i \\
      --gpt t2i_XL_stage2_512.pt --gpt-model GPT-XL --gpt-type t2i --image-size 512 \\
      --vq vq_ds16_t2i.pt [--t5 flan-t5-xl/]
  # Janus-Pro: the Hugging Face directory (huggingface-cli download deepseek-ai/Janus-Pro-1B)
  /usr/bin/python3 tools/convert/convert.py janus-family --dir Janus-Pro-1B/ --out models/janus-pro

Single components: tar-ar, ta-tok, llamagen-gpt, vq (each --ckpt FILE --out DIR), hf-causal-lm,
hf-t5-encoder (each --dir DIR --out DIR).
--dtype auto (default) stores models of >= 100 M parameters as bfloat16 and smaller ones as
float32; f32 / bf16 / f16 force one. Files that pickle more than tensors and plain containers
are refused unless --trust-pickle is given; upstream checkpoints (tensors, dicts, argparse
Namespaces, numpy scalars) load without it.

Every refusal names the file and the key (a file handed to the wrong option: what it is, what
the option takes and where it goes instead); the exit status is 2. The output appears whole or
not at all: it is written into a temporary sibling directory and moved into place at the end,
so a failed conversion leaves no partial folder and an existing family as it was.

Converting a family again into its directory (to add --resamplers or --mllm, or with new
files) keeps the components family.json names that this run does not make (mllm, drafter,
upsampler / downsampler, eagle, t5), after checking that they still fit, and says so; a kept
component whose directory is gone is dropped from family.json, and said.

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
import staging  # noqa: E402
import tar_ar  # noqa: E402
import upstream  # noqa: E402
import vq16  # noqa: E402


def add_common(p, dtype="auto"):
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=["auto", "f32", "bf16", "f16"], default=dtype)
    p.add_argument("--trust-pickle", action="store_true")


def add_ta_tok_heads(p):
    p.add_argument("--ta-tok-heads", type=int,
                   help="attention heads of TA-Tok's decoder, which the file does not record; "
                        "without it, 12 (Siglip2VisionConfig's default, as Tar builds it) for "
                        "the released 1152-wide decoder, and a refusal for any other width")


def add_gpt_flags(p):
    p.add_argument("--gpt-model", choices=sorted(llamagen_gpt.REGISTRY))
    p.add_argument("--gpt-type", choices=["c2i", "t2i"],
                   help="default: the checkpoint's saved args, else its keys")
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
    p.add_argument("--name", help="default: the name the family already has, else the "
                                  "family's (tar, llamagen-t2i, llamagen-c2i)")
    add_common(p)


def gpt_kwargs(a, flag="llamagen-gpt --ckpt"):
    return dict(gpt_model=a.gpt_model, gpt_type=a.gpt_type, image_size=a.image_size,
                downsample_size=a.downsample_size, cls_token_num=a.cls_token_num,
                num_classes=a.num_classes, t5_feature_dim=a.t5_feature_dim,
                codebook_size=a.codebook_size, dtype=a.dtype,
                trust_pickle=a.trust_pickle, flag=flag)


CHECKPOINT = "the upstream checkpoint file"
HF_DIR = "a Hugging Face model directory"


def check_inputs(files, dirs):
    """Every input named on the command line exists, before anything is converted (a full-size
    conversion takes minutes): files and dirs are (flag, path) pairs, path None when not given."""
    for flag, path in files:
        if path is not None:
            upstream.require_file(path, flag, CHECKPOINT)
    for flag, path in dirs:
        if path is not None:
            upstream.require_dir(path, flag, HF_DIR if flag != "--resamplers" else
                                 "the directory train_resamplers.py --out wrote (upsampler/, "
                                 "downsampler/)")


def check_mllm(ta, target, flag):
    """A keep_components check and the --mllm check: the MLLM writes the TA-Tok ids the
    family's de-quantiser reads, the target's condition count of them after a prompt."""
    rows = target["cls_token_num"]
    grid = 1
    while grid * grid < rows:
        grid += 1

    def check(config, where):
        count = config.get("image_token_count")
        if count != ta["codebook_size"]:
            raise upstream.ConversionError(
                f"{where}: image_token_count {count}, but the family's TA-Tok codebook has "
                f"{ta['codebook_size']} codes (the MLLM and ta_tok must come from the same Tar "
                f"release; {flag} names the MLLM)")
        if grid * grid >= config.get("max_positions", 0):
            raise upstream.ConversionError(
                f"{where}: max_positions {config.get('max_positions')} leaves no room for a "
                f"prompt before the target's {grid * grid} TA-Tok ids")
    return check


def tar_family(a):
    check_inputs([("--target", a.target), ("--drafter", a.drafter), ("--ta-tok", a.ta_tok),
                  ("--vq", a.vq)], [("--mllm", a.mllm), ("--resamplers", a.resamplers)])
    if a.mllm:  # config.json and tokenizer.json before any weight is read
        hf_causal_lm.inspect(a.mllm, "--mllm")
    existing = family.existing_family(a.out)
    with staging.staged(a.out) as out:
        target = tar_ar.convert(a.target, os.path.join(out, "target"), a.dtype, a.trust_pickle,
                                flag="--target")
        components = ["target"]
        if a.drafter:
            drafter = tar_ar.convert(a.drafter, os.path.join(out, "drafter"), a.dtype,
                                     a.trust_pickle, flag="--drafter")
            family.check_drafter(target, drafter, a.drafter)
            components.append("drafter")
        ta = ta_tok_dequantizer.convert(a.ta_tok, os.path.join(out, "ta_tok"),
                                        n_head=a.ta_tok_heads, trust_pickle=a.trust_pickle,
                                        flag="--ta-tok")
        if ta["hidden"] != target["cond_dim"]:
            raise upstream.ConversionError(
                f"{a.ta_tok}: TA-Tok features are {ta['hidden']} wide, the AR-DTok clip_proj "
                f"takes {target['cond_dim']}")
        components.append("ta_tok")
        vq_cfg = vq16.convert(a.vq, os.path.join(out, "vq"), a.vq_model,
                              trust_pickle=a.trust_pickle, flag="--vq")
        components.append("vq")
        if vq_cfg["codebook_size"] != target["vocab_size"]:
            raise upstream.ConversionError(
                f"{a.vq}: codebook of {vq_cfg['codebook_size']} entries, the AR-DTok "
                f"vocabulary has {target['vocab_size']}")
        if a.resamplers:
            components += family.copy_resamplers(a.resamplers, out, vq_cfg)
        fits_mllm = check_mllm(ta, target, "--mllm")
        if a.mllm:
            mllm = hf_causal_lm.convert(a.mllm, os.path.join(out, "mllm"), a.dtype, "--mllm",
                                        require_tokenizer=True,
                                        image_token_count=ta["codebook_size"])
            fits_mllm(mllm, os.path.join(a.mllm, "config.json"))
            components.append("mllm")
        kept = family.keep_components(a.out, existing, components, {
            "drafter": lambda cfg, where: family.check_drafter(target, cfg, where),
            "mllm": fits_mllm,
            "upsampler": family.check_resampler(vq_cfg),
            "downsampler": family.check_resampler(vq_cfg),
            "eagle": family.check_eagle(target)}, "tar-family")
        # Tar's defaults: CFG 4.0 always on, uint8 by truncation.
        family.write_family_json(out, a.name or (existing or {}).get("name") or "tar", 4.0,
                                 components, "truncate",
                                 {"tool": "tools/convert/convert.py tar-family"},
                                 base=existing, kept=kept, shown_dir=a.out)


def llamagen_family(a):
    check_inputs([("--gpt", a.gpt), ("--vq", a.vq)],
                 [("--t5", a.t5), ("--resamplers", a.resamplers)])
    if a.t5 and not os.path.isfile(os.path.join(a.t5, "spiece.model")):
        raise upstream.ConversionError(
            f"{os.path.join(a.t5, 'spiece.model')}: missing: FLAN-T5's tokenizer, which the "
            f"server needs to serve a text prompt; download it with the weights "
            f"(huggingface-cli download google/flan-t5-xl fetches it)")
    existing = family.existing_family(a.out)
    with staging.staged(a.out) as out:
        target = llamagen_gpt.convert(a.gpt, os.path.join(out, "target"),
                                      **gpt_kwargs(a, "--gpt"))
        vq_cfg = vq16.convert(a.vq, os.path.join(out, "vq"), a.vq_model,
                              trust_pickle=a.trust_pickle, flag="--vq")
        if vq_cfg["codebook_size"] != target["vocab_size"]:
            raise upstream.ConversionError(
                f"{a.vq}: codebook of {vq_cfg['codebook_size']} entries, the GPT vocabulary "
                f"has {target['vocab_size']}")
        components = ["target", "vq"]
        if a.resamplers:
            components += family.copy_resamplers(a.resamplers, out, vq_cfg)
        t2i = target["condition_mode"] == "caption"

        def fits_t5(config, where):
            if not t2i:
                raise upstream.ConversionError(
                    f"{where}: a T5 text encoder, but {a.gpt} is a c2i GPT (it reads a class "
                    f"label); only a t2i GPT reads FLAN-T5's caption features")
            if config.get("d_model") != target["cond_dim"]:
                raise upstream.ConversionError(
                    f"{where}: d_model {config.get('d_model')}, the GPT reads captions "
                    f"{target['cond_dim']} wide")
        if a.t5:
            # The text encoder that turns a prompt into the caption features the GPT reads.
            if not t2i:
                raise upstream.ConversionError(
                    f"--t5: {a.gpt} is a c2i GPT (it reads a class label); only a t2i GPT reads "
                    f"FLAN-T5's caption features: leave --t5 out")
            t5 = hf_t5_encoder.convert(a.t5, os.path.join(out, "t5"), a.dtype, flag="--t5")
            fits_t5(t5, os.path.join(a.t5, "config.json"))
            components.append("t5")
        kept = family.keep_components(a.out, existing, components, {
            "t5": fits_t5,
            "upsampler": family.check_resampler(vq_cfg),
            "downsampler": family.check_resampler(vq_cfg),
            "eagle": family.check_eagle(target)}, "llamagen-family")
        # LlamaGen's sample scripts: CFG 7.5 for t2i, 4.0 for c2i; save_image rounds.
        name = a.name or (existing or {}).get("name") or (
            "llamagen-t2i" if t2i else "llamagen-c2i")
        family.write_family_json(out, name, 7.5 if t2i else 4.0, components, "round",
                                 {"tool": "tools/convert/convert.py llamagen-family"},
                                 base=existing, kept=kept, shown_dir=a.out)


def janus_family(a):
    existing = family.existing_family(a.out)
    with staging.staged(a.out) as out:
        hf_janus.convert_family(a.dir, out, a.dtype, a.trust_pickle, a.vq_model, a.image_size,
                                a.name, existing=existing, shown_dir=a.out)


def single(convert_one, a):
    """A one-component command: written into a staging directory, then moved into --out."""
    with staging.staged(a.out) as out:
        convert_one(out)


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
    p.add_argument("--mllm", help="Tar's MLLM: its Hugging Face directory (csuhan/Tar-1.5B: "
                                  "config.json, safetensors, tokenizer.json), for text prompts")
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
            single(lambda out: tar_ar.convert(a.ckpt, out, a.dtype, a.trust_pickle), a)
        elif a.command == "ta-tok":
            single(lambda out: ta_tok_dequantizer.convert(
                a.ckpt, out, n_head=a.ta_tok_heads, dtype=a.dtype, trust_pickle=a.trust_pickle),
                a)
        elif a.command == "llamagen-gpt":
            single(lambda out: llamagen_gpt.convert(a.ckpt, out, **gpt_kwargs(a)), a)
        elif a.command == "vq":
            single(lambda out: vq16.convert(a.ckpt, out, a.vq_model, a.dtype, a.trust_pickle), a)
        elif a.command == "hf-causal-lm":
            hf_causal_lm.inspect(a.dir)
            single(lambda out: hf_causal_lm.convert(a.dir, out, a.dtype,
                                                    require_tokenizer=True), a)
        elif a.command == "hf-t5-encoder":
            single(lambda out: hf_t5_encoder.convert(a.dir, out, a.dtype), a)
        elif a.command == "tar-family":
            tar_family(a)
        elif a.command == "janus-family":
            janus_family(a)
        else:
            llamagen_family(a)
    except upstream.ConversionError as e:
        print(f"convert: error: {e}", file=sys.stderr)
        print(f"convert: {a.out} left as it was" if os.path.lexists(a.out) else
              f"convert: nothing written ({a.out} not created)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
