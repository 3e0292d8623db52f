#!/usr/bin/python3
"""Philox4x32-10 in plain Python integers: the independent implementation that the engine's
tensor version (engine/sampling/philox.h) is tested against.

Checks itself against Random123's published known-answer vectors, then writes test vectors
for the engine's keying: key = the seed's (low, high) words, counter = (position low word,
position high word, draw, role), uniform = ((w0 >> 5) * 2^26 + (w1 >> 6)) / 2^53, the
numerator stored as an integer so no float formatting stands between the two.

  /usr/bin/python3 tools/reference/philox.py --out tests/data/philox_vectors.json
"""
import argparse
import json

MASK = 0xFFFFFFFF

# Random123 (Salmon et al., SC 2011), tests/kat_vectors, philox4x32 with 10 rounds.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox4x32(counter, key, rounds=10):
    c = list(counter)
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0 = (k0 + 0x9E3779B9) & MASK
            k1 = (k1 + 0xBB67AE85) & MASK
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & MASK, p1 & MASK,
             ((p0 >> 32) ^ c[3] ^ k1) & MASK, p0 & MASK]
    return tuple(c)


def draw(seed, role, position, draw_index):
    counter = (position & MASK, (position >> 32) & MASK, draw_index, role)
    words = philox4x32(counter, (seed & MASK, seed >> 32))
    numerator = (words[0] >> 5) * (1 << 26) + (words[1] >> 6)
    return counter, words, numerator


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    for counter, key, expected in KNOWN_ANSWERS:
        assert philox4x32(counter, key) == expected, (counter, key)
    vectors = []
    for seed in (0, 1, 42, 0x123456789ABCDEF0, (1 << 64) - 1):
        for role in range(4):
            for position in (0, 1, 2, 255, 4096, (1 << 32) + 5, (1 << 40) + 7):
                for draw_index in (0, 1, 7):
                    counter, words, numerator = draw(seed, role, position, draw_index)
                    vectors.append({"seed": str(seed), "role": role, "position": position,
                                    "draw": draw_index, "words": list(words),
                                    "uniform_numerator": numerator})
    with open(args.out, "w") as f:
        json.dump({"generator": "Philox4x32-10", "uniform_denominator": 1 << 53,
                   "vectors": vectors}, f, indent=0)
        f.write("\n")
    print(f"{len(vectors)} vectors, known answers checked -> {args.out}")


if __name__ == "__main__":
    main()
