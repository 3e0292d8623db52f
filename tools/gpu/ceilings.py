#!/usr/bin/env python3
"""Measures the two ceilings of the GPU a benchmark runs on: device memory bandwidth (a large
device-to-device copy, counting bytes read plus bytes written) and the bf16 / fp32 matrix rate
(8192^3 products on random data). Median of timed repeats after warm-ups, CUDA events.

  python3 tools/gpu/ceilings.py [--json out.json]
Needs PyTorch with CUDA (the GPU machine's python3); not part of the CPU build.
"""
import argparse
import json

import torch


def time_ms(fn, repeats=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    n_bytes = 2 << 30  # 2 GiB per buffer: far beyond the L2
    src = torch.randint(0, 255, (n_bytes,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_ms = time_ms(lambda: dst.copy_(src))
    bandwidth = 2 * n_bytes / (copy_ms * 1e-3)
    del src, dst
    results = {"device": props.name, "multiprocessors": props.multi_processor_count,
               "memory_bytes": props.total_memory, "copy_bytes_per_s": bandwidth}
    n = 8192
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32), ("tf32", None)):
        torch.backends.cuda.matmul.allow_tf32 = dtype is None
        a = torch.randn(n, n, device=dev, dtype=dtype or torch.float32)
        b = torch.randn(n, n, device=dev, dtype=dtype or torch.float32)
        ms = time_ms(lambda: a @ b, repeats=10)
        results[f"matmul_{name}_flop_per_s"] = 2 * n ** 3 / (ms * 1e-3)
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{props.name}: copy {bandwidth / 1e12:.2f} TB/s (read + write); matmul bf16 "
          f"{results['matmul_bf16_flop_per_s'] / 1e12:.0f} TFLOP/s, fp32 "
          f"{results['matmul_fp32_flop_per_s'] / 1e12:.0f}, tf32 "
          f"{results['matmul_tf32_flop_per_s'] / 1e12:.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
