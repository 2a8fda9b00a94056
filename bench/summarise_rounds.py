"""Median over rounds of each (size, PE, impl) median ms/step; ratio = faster PyTorch / relpos.
usage: python3 bench/summarise_rounds.py fp32|bf16 DIR   (reads DIR/train_<prec>*.jsonl: the
JSON lines bench/run_train_bench.sh writes, one file per round, e.g. bench/results/2026-12-03-*/)"""
import glob
import json
import os
import statistics
import sys

if len(sys.argv) != 3 or sys.argv[1] not in ("fp32", "bf16"):
    sys.exit(__doc__)
prec = sys.argv[1]
here = sys.argv[2]
runs = {}
for f in sorted(glob.glob(os.path.join(here, f"train_{prec}*.jsonl"))):
    for line in open(f):
        d = json.loads(line)
        runs.setdefault((d["size"], d["pos"], d["impl"]), []).append(d["ms_per_step_median"])
cells = sorted({(s, p) for s, p, _ in runs}, key=lambda c: (["tiny", "small", "long"].index(c[0]), c[1]))
print(f"| size | PE | rounds | relpos ms (each round) | torch2 eager ms | torch2 compiled ms | relpos median | faster PyTorch median | ratio |")
print("|---|---|---:|---|---|---|---:|---:|---:|")
for s, p in cells:
    r = runs.get((s, p, "relpos"), [])
    e = runs.get((s, p, "torch2"), [])
    c = runs.get((s, p, "torch2c"), [])
    if not r or not (e or c):
        continue
    rm = statistics.median(r)
    pm = min(statistics.median(e) if e else 1e9, statistics.median(c) if c else 1e9)
    fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
    print(f"| {s} | {p} | {len(r)} | {fmt(r)} | {fmt(e)} | {fmt(c)} | {rm:.1f} | {pm:.1f} | {pm / rm:.2f} |")
