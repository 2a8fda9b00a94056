#!/usr/bin/python3
"""bench/roofline.py (issue 20's roofline line) on a fixture directory whose answers were worked out
by hand: the small model's FLOPs per step (3 x (4 layers x 2 x 2048 rows x (4 x 256^2 + 2 x 256 x
1024) + 4 x 2 x 2 x 8 x 256^2 x 256 + 2 x 2048 x 256 x 65) = 45.30 G), the median over rounds of
each round's median, the faster peer, the strict peak (any shape, either library, float32 only) and
the large-N peak (square, N >= 1024), rows of other encodings ignored; a directory without GEMM rows
is one named error, no traceback. Exit 0 when all hold, 1 otherwise."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--roofline", required=True)
args = ap.parse_args()
failures = []
small = {"size": "small", "d_model": 256, "n_layers": 4, "n_heads": 8, "seq": 256, "batch": 8}
rounds = [{"relpos": 151.0, "torch2": 200.0, "torch2c": 190.0},
          {"relpos": 160.0, "torch2": 210.0, "torch2c": 185.0},
          {"relpos": 140.0, "torch2": 190.0, "torch2c": 195.0}]
with tempfile.TemporaryDirectory() as d:
    for r, ms in enumerate(rounds, 1):
        with open(os.path.join(d, f"train_fp32_round{r}.jsonl"), "w") as f:
            for impl, v in ms.items():
                f.write(json.dumps(dict(small, impl=impl, pos="none", ms_per_step_median=v)) + "\n")
                f.write(json.dumps(dict(small, impl=impl, pos="t5", ms_per_step_median=1.0)) + "\n")
    with open(os.path.join(d, "ops.jsonl"), "w") as f:
        f.write(json.dumps({"impl": "relpos", "meta": True, "threads": 2}) + "\n")
        for op, size, gf in (("matmul", "1024x1024x1024", 300.0), ("matmul", "2048x128x128", 450.0),
                             ("matmul_bf16", "2048x128x128", 2000.0), ("matmul", "512x512x512", 310.0)):
            f.write(json.dumps({"impl": "relpos", "op": op, "size": size, "gflops": gf}) + "\n")
    with open(os.path.join(d, "ops_torch.jsonl"), "w") as f:
        for op, size, gf in (("matmul", "1024x1024x1024", 320.0), ("matmul", "2048x256x768", 400.0),
                             ("attention", "[1,4,2048,32] causal fwd+bwd", 900.0)):
            f.write(json.dumps({"impl": "torch", "op": op, "size": size, "gflops": gf}) + "\n")
    p = subprocess.run([sys.executable, args.roofline, d], capture_output=True, text=True, timeout=60)
    out = p.stdout
    for want in ("peak (strict): 450.0 GFLOP/s, relpos 2048x128x128",
                 "peak (large N): 320.0 GFLOP/s, torch 1024x1024x1024",
                 # 45.30 G / 151.0 ms = 300 GFLOP/s: 67% of 450, 94% of 320; the faster peer's
                 # median 190.0 ms (torch2c: 190, 185, 195): 238 GFLOP/s, 53% and 75%
                 "| small | 45.30 | 151.0 | 300 | 67% | 94% | 190.0 | 238 | 53% | 75% |"):
        if want not in out:
            failures.append(f"missing {want!r} in:\n{out}{p.stderr}")
    if p.returncode != 0:
        failures.append(f"exit {p.returncode}: {p.stderr}")
with tempfile.TemporaryDirectory() as d:
    p = subprocess.run([sys.executable, args.roofline, d], capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "ops.jsonl" not in p.stderr or "Traceback" in p.stderr:
        failures.append(f"an empty directory: exit {p.returncode}, stderr {p.stderr!r}")
for f in failures:
    print("FAIL", f)
print("ok" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
