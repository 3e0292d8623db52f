"""LlamaGen GPT (FoundationVision/LlamaGen autoregressive/models/gpt.py): c2i_*.pt / t2i_*.pt
-> a target component.

The upstream files hold {"model" | "module" | "state_dict": <state dict>, ...} and, for
training checkpoints, the argparse "args"; they do not name the model size reliably, so the
sample scripts' flags choose it (--gpt-model, --image-size, --downsample-size, --gpt-type,
--cls-token-num, --t5-feature-dim, --codebook-size), falling back on the checkpoint's own
args where it has them. c2i or t2i is read off the keys when neither --gpt-type nor the saved
args say it (cls_embedding.embedding_table: c2i; cls_embedding.cap_proj: t2i); a type given that
the keys contradict is refused, naming --gpt-type.
"""
import component
import kinds
import upstream

# GPT_models: name -> (n_layer, n_head, dim).
REGISTRY = {
    "GPT-B": (12, 12, 768),
    "GPT-L": (24, 16, 1024),
    "GPT-XL": (36, 20, 1280),
    "GPT-XXL": (48, 24, 1536),
    "GPT-XXXL": (48, 40, 2560),
    "GPT-1B": (22, 32, 2048),
    "GPT-3B": (24, 32, 3200),
    "GPT-7B": (32, 32, 4096),
}


def option(cli, saved, key, default):
    """The flag when given, else the checkpoint's saved training arg, else the default."""
    if cli.get(key) is not None:
        return cli[key]
    if saved.get(key) is not None:
        return saved[key]
    return default


def convert(path, out_dir, gpt_model=None, gpt_type=None, image_size=None, downsample_size=None,
            cls_token_num=None, num_classes=None, t5_feature_dim=None, codebook_size=None,
            dtype="auto", trust_pickle=False, flag="llamagen-gpt --ckpt"):
    """`flag`: the option that named the file, for refusals."""
    ckpt = upstream.load_pickle(path, trust_pickle)
    found, key, evidence = kinds.check_checkpoint(
        path, ckpt, ("llamagen-c2i", "llamagen-t2i"),
        f"the LlamaGen GPT (c2i_*.pt / t2i_*.pt) {flag} takes")
    sd_raw = upstream.state_dict_of(path, ckpt, ("model", "module", "state_dict"))
    saved = upstream.as_dict(ckpt.get("args")) if isinstance(ckpt, dict) else {}
    cli = dict(gpt_model=gpt_model, gpt_type=gpt_type, image_size=image_size,
               downsample_size=downsample_size, cls_token_num=cls_token_num,
               num_classes=num_classes, t5_feature_dim=t5_feature_dim,
               codebook_size=codebook_size)
    name = option(cli, saved, "gpt_model", None)
    if name is None:
        upstream.fail(path, "args.gpt_model", "the checkpoint does not say its size: pass "
                                              "--gpt-model (one of " + ", ".join(REGISTRY) + ")")
    if name not in REGISTRY:
        upstream.fail(path, "gpt_model", f"unknown registry name {name!r} (known: "
                                         f"{', '.join(REGISTRY)})")
    n_layer, n_head, dim = REGISTRY[name]
    keys_say = {"llamagen-c2i": "c2i", "llamagen-t2i": "t2i"}.get(found)
    kind = option(cli, saved, "gpt_type", keys_say or "c2i")
    if kind not in ("c2i", "t2i"):
        upstream.fail(path, "gpt_type", f"{kind!r}: expected c2i or t2i")
    if keys_say and kind != keys_say:
        said = "--gpt-type" if gpt_type is not None else "its saved args.gpt_type"
        upstream.fail(path, key, f"{evidence}: this is a LlamaGen {keys_say} GPT "
                                 f"({keys_say}_*.pt), but {said} says {kind}; pass --gpt-type "
                                 f"{keys_say} (with vq_ds16_{keys_say}.pt as --vq), or give a "
                                 f"{kind}_*.pt")
    image = int(option(cli, saved, "image_size", 256 if kind == "c2i" else 512))
    down = int(option(cli, saved, "downsample_size", 16))
    if image % down:
        upstream.fail(path, "image_size", f"{image} px is not a multiple of the {down} px tokens")
    grid = image // down
    cls = int(option(cli, saved, "cls_token_num", 1 if kind == "c2i" else 120))
    sd = upstream.StateDict(path, sd_raw, component.CACHE_BUFFERS)
    vocab = int(option(cli, saved, "codebook_size", 16384))  # upstream: vocab_size=codebook_size
    n_kv_head = saved.get("n_kv_head") or n_head
    hidden = component.ffn_hidden(dim, 256, saved.get("ffn_dim_multiplier"))
    config = dict(dim=dim, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head,
                  vocab_size=vocab, grid_size=grid, cls_token_num=cls,
                  position_mode="rope_2d", multiple_of=256, ffn_hidden_dim=hidden,
                  norm_eps=1e-5, rope_base=10000.0)
    if kind == "c2i":
        if cls != 1:
            upstream.fail(path, "cls_token_num", f"{cls}: c2i models use one condition token")
        classes = int(option(cli, saved, "num_classes", 1000))
        sd.get("cls_embedding.embedding_table.weight", [classes + 1, dim])
        config.update(condition_mode="class_label", num_classes=classes)
    else:
        caption_dim = int(option(cli, saved, "t5_feature_dim", 2048))
        sd.get("cls_embedding.cap_proj.fc1.weight", [dim, caption_dim])
        sd.get("cls_embedding.cap_proj.fc2.weight", [dim, dim])
        uncond = sd.shape("cls_embedding.uncond_embedding")
        if len(uncond) != 2 or uncond[1] != caption_dim or uncond[0] < cls:
            upstream.fail(path, "cls_embedding.uncond_embedding",
                          f"shape {uncond}, expected [>= {cls}, {caption_dim}]")
        sd.get("cls_embedding.uncond_embedding", uncond)
        config.update(condition_mode="caption", cond_dim=caption_dim)
    component.read_trunk(sd, n_layer, dim, n_head, n_kv_head, hidden, vocab)
    tensors = sd.finish()
    if kind == "t2i":
        # Upstream keeps 120 null rows whatever cls_token_num is and embeds
        # cap_proj(uncond)[:, :cls_token_num]; cap_proj acts row by row, so the first cls rows
        # are all the null condition ever uses.
        key = "cls_embedding.uncond_embedding"
        tensors[key] = tensors[key][:cls].clone()
    print(f"{path}: LlamaGen {name} {kind}, {grid}x{grid} tokens ({image} px), {cls} condition "
          f"token(s)", flush=True)
    component.write(out_dir, config, tensors, dtype,
                    dict(upstream=f"FoundationVision/LlamaGen {kind}", file=path,
                         registry_name=name, image_size=image))
    return config
