"""Tar AR-DTok (csuhan/Tar tok/ar_dtok): ar_dtok_lp_{256,512,1024}px.pth -> a target component.

The upstream file: torch.save({"model": {"name": <registry key>, "args": <ModelArgs kwargs>,
"sd": <state dict>}}). Sizes come from the registry name; the grid from max_seq_len; the
condition width from clip_proj. No RoPE: a learned abs_pe [1, max_seq_len + cls - 1, dim].
"""
import component
import kinds
import upstream

# llama-abs registry: name -> (n_layer, n_head, dim).
REGISTRY = {
    "llama-abs-S": (12, 6, 384),
    "llama-abs-B": (12, 12, 768),
    "llama-abs-L": (24, 16, 1024),
    "llama-abs-LP": (30, 20, 1280),
    "llama-abs-XL": (36, 20, 1280),
    "llama-abs-XXL": (48, 24, 1536),
}


def convert(path, out_dir, dtype="auto", trust_pickle=False, flag="tar-ar --ckpt"):
    """`flag`: the option that named the file, for refusals."""
    ckpt = upstream.load_pickle(path, trust_pickle)
    kinds.check_checkpoint(path, ckpt, ("tar-ar",),
                           f"the Tar AR-DTok checkpoint (ar_dtok_*.pth) {flag} takes")
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        upstream.fail(path, "model", "expected ckpt['model'] = {name, args, sd} (Tar's layout)")
    entry = ckpt["model"]
    for key in ("name", "args", "sd"):
        if key not in entry:
            upstream.fail(path, f"model.{key}", "missing (Tar's layout is {name, args, sd})")
    name = entry["name"]
    if name not in REGISTRY:
        upstream.fail(path, "model.name", f"unknown registry name {name!r} (known: "
                                          f"{', '.join(sorted(REGISTRY))})")
    n_layer, n_head, dim = REGISTRY[name]
    args = upstream.as_dict(entry["args"])
    model_type = args.get("model_type", "clip_cond")
    if model_type != "clip_cond":
        upstream.fail(path, "model.args.model_type",
                      f"{model_type!r}: only clip_cond AR-DTok models are supported")
    sd = upstream.StateDict(path, upstream.as_dict(entry["sd"]), component.CACHE_BUFFERS)
    vocab = args.get("vocab_size", 16384)
    n_kv_head = args.get("n_kv_head") or n_head
    for key, value in (("dim", dim), ("n_layer", n_layer), ("n_head", n_head)):
        if key in args and args[key] != value:
            upstream.fail(path, f"model.args.{key}", f"{args[key]} disagrees with {name}'s {value}")
    if "max_seq_len" not in args:
        upstream.fail(path, "model.args.max_seq_len", "missing (the image token count)")
    tokens = int(args["max_seq_len"])
    grid = upstream.grid_of(path, "model.args.max_seq_len", tokens)
    abs_pe = sd.shape("abs_pe")
    if len(abs_pe) != 3 or abs_pe[0] != 1 or abs_pe[2] != dim:
        upstream.fail(path, "abs_pe", f"shape {abs_pe}, expected [1, positions, {dim}]")
    cls = abs_pe[1] - tokens + 1
    if "cls_token_num" in args and args["cls_token_num"] != cls:
        upstream.fail(path, "abs_pe", f"{abs_pe[1]} positions imply {cls} condition tokens, the "
                                      f"args give cls_token_num {args['cls_token_num']}")
    if cls < 1:
        upstream.fail(path, "abs_pe", f"{abs_pe[1]} positions leave no condition position "
                                      f"before {tokens} image tokens")
    cond_dim = sd.shape("clip_proj.weight")[-1]
    multiple_of = args.get("multiple_of", 256)
    multiplier = args.get("ffn_dim_multiplier")
    hidden = component.ffn_hidden(dim, multiple_of, multiplier)
    sd.get("clip_proj.weight", [dim, cond_dim])
    sd.get("clip_proj.bias", [dim])
    sd.get("abs_pe", [1, tokens + cls - 1, dim])
    component.read_trunk(sd, n_layer, dim, n_head, n_kv_head, hidden, vocab)
    tensors = sd.finish()
    config = dict(dim=dim, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head,
                  vocab_size=vocab, grid_size=grid, cls_token_num=cls,
                  position_mode="abs_pe", condition_mode="clip_cond", cond_dim=cond_dim,
                  multiple_of=multiple_of, ffn_hidden_dim=hidden,
                  norm_eps=float(args.get("norm_eps", 1e-5)))
    print(f"{path}: Tar AR-DTok {name}, {grid}x{grid} tokens, {cls} condition tokens of width "
          f"{cond_dim}", flush=True)
    component.write(out_dir, config, tensors, dtype,
                    dict(upstream="csuhan/Tar AR-DTok", file=path, registry_name=name))
    return config
