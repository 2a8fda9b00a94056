#!/usr/bin/python3
"""PyTorch side of the op benchmark: the cases of bench/bench_ops.cpp, timed the same way.

Method (identical in bench_ops.cpp): warmup calls for at least 250 ms (and at least 3
calls); one timed call gives `inner`, the number of calls per sample needed for a sample of
>= 2 ms (at most 1000); then 15 samples, each the mean time of `inner` back-to-back calls;
the median sample is reported. (The long warmup keeps a case from timing the previous
case's idle BLAS/OpenMP threads; see bench_ops.cpp and bench/RESULTS.md.)

Usage: /usr/bin/python3 bench/torch_ops.py [--threads N] [--filter SUBSTRING]
  N defaults to OMP_NUM_THREADS, else 1; --filter keeps cases whose "op size" contains it.
Output: JSON lines, a "meta" line then one per case (same keys as relpos_bench_ops).
"""
import argparse
import json
import math
import os
import sys
import time

import torch

WARMUP = 3
SAMPLES = 15
MIN_SAMPLE_MS = 2.0
MAX_INNER = 1000
WARMUP_MS = 250.0


def now_ms():
    return time.perf_counter_ns() / 1e6


def time_op(fn):
    t0 = now_ms()
    i = 0
    while i < WARMUP or now_ms() - t0 < WARMUP_MS:
        fn()
        i += 1
    t0 = now_ms()
    fn()
    one = max(now_ms() - t0, 1e-6)
    inner = min(max(math.ceil(MIN_SAMPLE_MS / one), 1), MAX_INNER)
    samples = []
    for _ in range(SAMPLES):
        t0 = now_ms()
        for _ in range(inner):
            fn()
        samples.append((now_ms() - t0) / inner)
    samples.sort()
    return samples[len(samples) // 2], inner


def cases():
    gen = torch.Generator().manual_seed(1234)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    out = []
    for n in (128, 256, 512, 1024):
        a, b = randn(n, n), randn(n, n)
        out.append(("matmul", f"{n}x{n}x{n}", 2.0 * n ** 3, 4.0 * 3 * n * n,
                    lambda a=a, b=b: torch.matmul(a, b)))
    a, b = randn(16, 128, 64), randn(16, 64, 128)
    out.append(("matmul", "16x[128x64x128]", 2.0 * 16 * 128 * 128 * 64,
                4.0 * 16 * (128 * 64 + 64 * 128 + 128 * 128), lambda a=a, b=b: torch.matmul(a, b)))
    n = 512
    at, b = randn(n, n).transpose(0, 1), randn(n, n)
    out.append(("matmul", "512x512x512 a.T", 2.0 * n ** 3, 4.0 * 3 * n * n,
                lambda a=at, b=b: torch.matmul(a, b)))
    a, bt = randn(n, n), randn(n, n).transpose(0, 1)
    out.append(("matmul", "512x512x512 b.T", 2.0 * n ** 3, 4.0 * 3 * n * n,
                lambda a=a, b=bt: torch.matmul(a, b)))
    # bench/bench_ops.cpp's model-shaped GEMMs (small, then tiny), float32 and bfloat16 (a bf16 result).
    for m, k, n, ta in ((2048, 256, 768, False), (2048, 256, 1024, False), (2048, 1024, 256, False),
                        (256, 2048, 1024, True), (2048, 128, 128, False), (2048, 128, 512, False),
                        (2048, 512, 128, False), (512, 2048, 128, True)):
        size = f"{m}x{k}x{n}" + (" a.T" if ta else "")
        a = randn(k, m).transpose(0, 1) if ta else randn(m, k)
        b = randn(k, n)
        out.append(("matmul", size, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n),
                    lambda a=a, b=b: torch.matmul(a, b)))
        ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16)
        out.append(("matmul_bf16", size, 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n),
                    lambda a=ab, b=bb: torch.matmul(a, b)))
    # bench/bench_ops.cpp's fused causal attention, forward + backward (PyTorch 2.x's SDPA; an
    # older torch, e.g. Debian's 1.13, has none: the case is left out, with a note).
    has_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    if not has_sdpa:
        print(f"torch_ops.py: torch {torch.__version__} has no scaled_dot_product_attention; the attention "
              "cases are left out (PYTHON=bench/.venv-torch2/bin/python runs them)", file=sys.stderr)
    for b, h, l, dh in ((16, 4, 128, 32), (8, 8, 256, 32), (1, 4, 2048, 32)) if has_sdpa else ():
        q, k, v, go = (randn(b, h, l, dh) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)

        def fwd_bwd(q=q, k=k, v=v, go=go):
            with torch.enable_grad():  # main() times every case under no_grad
                o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                return torch.autograd.grad(o, (q, k, v), go)[0]

        out.append(("attention", f"[{b},{h},{l},{dh}] causal fwd+bwd", 0.5 * 14.0 * b * h * l * l * dh,
                    4.0 * 8 * b * h * l * dh, fwd_bwd))
    for shape in ((4096, 256), (64, 4, 128, 128)):
        x = randn(*shape)
        out.append(("softmax", "[" + ",".join(map(str, shape)) + "]", 0.0, 2.0 * 4.0 * x.numel(),
                    lambda x=x: torch.softmax(x, dim=-1)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int,
                    default=max(1, int(os.environ.get("OMP_NUM_THREADS", "1") or 1)))
    ap.add_argument("--filter", default="", help='run only cases whose "op size" contains this')
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    meta = {"impl": "torch", "meta": True, "threads": args.threads,
            "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
            "openblas_threads_env": os.environ.get("OPENBLAS_NUM_THREADS", ""),
            "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
            "warmup": WARMUP, "warmup_ms": WARMUP_MS, "samples": SAMPLES, "min_sample_ms": MIN_SAMPLE_MS}
    print(json.dumps(meta), flush=True)
    with torch.no_grad():
        for op, size, flops, nbytes, fn in cases():
            if args.filter not in f"{op} {size}":
                continue
            ms, inner = time_op(fn)
            print(json.dumps({"impl": "torch", "op": op, "size": size, "threads": args.threads,
                              "ms": ms, "gflops": flops / (ms * 1e6) if flops else None,
                              "gbps": nbytes / (ms * 1e6), "inner": inner}), flush=True)


if __name__ == "__main__":
    main()
