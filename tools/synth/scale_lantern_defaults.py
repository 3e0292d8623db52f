#!/usr/bin/python3
"""Writes a family's LANTERN / LANTERN++ defaults, scaled to its codebook, into family.json.

The papers chose their neighbourhood size k for their codebooks: LANTERN k = 1000 of
LlamaGen's 16384 entries, LANTERN++ k = 10 of Lumina-mGPT's 8192. On a smaller codebook every
entry covers a larger share of latent space, so the same k reaches much further (1000 is 98% of
a 1024-entry codebook). The rule kept here: k is the same share of the codebook (the same
latent neighbourhood), rounded, at least 1; delta (a probability mass) and lambda (a ratio of
probabilities) mean the same on any codebook and keep the papers' values. Both literal values
stay reachable per request (LanternParams.k / LanternPlusPlusParams.k).

    /usr/bin/python3 tools/synth/scale_lantern_defaults.py --models models/synth
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import family_json  # noqa: E402

PAPERS = {
    "lantern": {"k": 1000, "codebook": 16384, "model": "LlamaGen", "keep": ("delta", 0.1)},
    "lantern++": {"k": 10, "codebook": 8192, "model": "Lumina-mGPT", "keep": ("lambda", 2.0)},
}


def scaled_k(paper_k, paper_codebook, codebook):
    return max(1, int(round(paper_k * codebook / paper_codebook)))


def defaults(codebook):
    out = {}
    for method, paper in PAPERS.items():
        k = scaled_k(paper["k"], paper["codebook"], codebook)
        name, value = paper["keep"]
        share = 100.0 * paper["k"] / paper["codebook"]
        out[method] = {
            "k": k,
            name: value,
            "vocabulary_scaling": {
                "tool": "tools/synth/scale_lantern_defaults.py",
                "rule": (f"k keeps the paper's share of the codebook (the same latent "
                         f"neighbourhood): {paper['k']} of {paper['model']}'s "
                         f"{paper['codebook']} entries is {share:.2f}%, {k} of {codebook}; "
                         f"{name} keeps the paper's {value:g}"),
                "paper_k": paper["k"], "paper_codebook": paper["codebook"],
                "codebook": codebook},
        }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="models/synth", help="family directory")
    args = parser.parse_args()
    family = family_json.load(args.models)
    vq_config = os.path.join(args.models, family["components"]["vq"], "config.json")
    codebook = int(json.load(open(vq_config))["codebook_size"])
    written = defaults(codebook)
    family_json.update_method_defaults(args.models, written)
    for method, d in written.items():
        print(f"scale_lantern_defaults: {method}: k {d['k']} ({d['vocabulary_scaling']['rule']})")


if __name__ == "__main__":
    main()
