#!/usr/bin/python3
"""Writes a family's GSD embedding-distance bound, carried over to its own embeddings, into
family.json.

GSD keeps a token y in the draft x's group only when the squared L2 distance of their AR input
embeddings is below 0.5, a bound set in Lumina-mGPT's embedding space. Distances scale with a
model's embeddings (the bundled target's nearest pairs lie at about 230), so the literal 0.5
admits nothing here and GSD becomes SJD. Lumina-mGPT's embedding statistics cannot be read
offline, so the bound is carried over by the share of token pairs it is meant to call "close":
the share of the codebook the family's LANTERN default pools (1000 of LlamaGen's 16384 entries,
6.10%), i.e. the bound is the 6.10% quantile of the target's pairwise squared embedding
distances. The probability gap (0.15, a probability) and the group size keep the paper's
values. The literal bound stays reachable per request (GsdParams.max_embedding_distance 0.5).

    /usr/bin/python3 tools/synth/scale_gsd_defaults.py --models models/synth
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import safetensors_io  # noqa: E402

sys.path.insert(0, HERE)
import family_json  # noqa: E402

SHARE = 1000 / 16384  # LANTERN's neighbourhood share of the codebook


def bound(embeddings, share=SHARE):
    """The `share` quantile of the squared distances between distinct rows of `embeddings`."""
    e = np.asarray(embeddings, dtype=np.float64)
    norms = (e * e).sum(1)
    d2 = norms[:, None] + norms[None, :] - 2.0 * e @ e.T
    pairs = d2[np.triu_indices(len(e), k=1)]
    return float(np.quantile(np.maximum(pairs, 0.0), share))


def defaults(embeddings):
    value = bound(embeddings)
    return {"gsd": {
        "max_embedding_distance": round(value, 2),
        "embedding_scaling": {
            "tool": "tools/synth/scale_gsd_defaults.py",
            "rule": (f"the bound admits the share of token pairs that LANTERN's default pools "
                     f"({100 * SHARE:.2f}% of the codebook): the {100 * SHARE:.2f}% quantile of "
                     f"the target's pairwise squared embedding distances; the paper's 0.5 is "
                     f"measured in Lumina-mGPT's embeddings"),
            "paper_max_embedding_distance": 0.5}}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="models/synth", help="family directory")
    args = parser.parse_args()
    family = family_json.load(args.models)
    weights = os.path.join(args.models, family["components"]["target"], "model.safetensors")
    embeddings = safetensors_io.load(weights)["tok_embeddings.weight"].float().numpy()
    written = defaults(embeddings)
    family_json.update_method_defaults(args.models, written)
    gsd = written["gsd"]
    print(f"scale_gsd_defaults: max_embedding_distance {gsd['max_embedding_distance']} "
          f"({gsd['embedding_scaling']['rule']})")


if __name__ == "__main__":
    main()
