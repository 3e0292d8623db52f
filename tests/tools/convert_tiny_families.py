#!/usr/bin/env python3
"""Writes tiny upstream-layout files and converts them with the converter's command line into
a model repository holding a Tar family and LlamaGen t2i and c2i families:

  /usr/bin/python3 tests/tools/convert_tiny_families.py OUT_DIR
writes OUT_DIR/upstream/* and OUT_DIR/repository/{tar,llamagen-t2i,llamagen-c2i}/.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_upstream  # noqa: E402
import convert  # noqa: E402  (tools/convert/convert.py, on the path through tiny_upstream)


def main():
    out = sys.argv[1]
    tiny_upstream.register_tiny_sizes()
    files = tiny_upstream.write_files(os.path.join(out, "upstream"))
    repo = os.path.join(out, "repository")
    rc = convert.main(["tar-family", "--out", os.path.join(repo, "tar"),
                       "--target", files["tar_512"], "--drafter", files["tar_256"],
                       "--ta-tok", files["ta_tok"], "--vq", files["vq"], "--vq-model", "VQ-tiny",
                       "--ta-tok-heads", str(tiny_upstream.TA_TOK["n_head"])])
    if rc:
        return rc
    rc = convert.main(["llamagen-family", "--out", os.path.join(repo, "llamagen-t2i"),
                       "--gpt", files["t2i"], "--vq", files["vq"]] + tiny_upstream.t2i_flags())
    if rc:
        return rc
    return convert.main(["llamagen-family", "--out", os.path.join(repo, "llamagen-c2i"),
                         "--gpt", files["c2i"], "--vq", files["vq"]] + tiny_upstream.c2i_flags())


if __name__ == "__main__":
    sys.exit(main())
