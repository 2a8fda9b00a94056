"""Median over rounds of each (size, PE, impl) median ms/step; ratio = faster peer / relpos.
usage: python3 bench/summarise_rounds.py fp32|bf16 DIR   (reads DIR/train_<prec>*.jsonl, e.g.
                                                          bench/results/2026-12-03-*/)
       python3 bench/summarise_rounds.py ROUND.jsonl...  (ROUNDS=N bench/run_train_bench.sh)
Each file holds one round: the JSON lines bench/run_train_bench.sh writes. The peers are the
impls other than relpos (torch: Debian's torch 1.13; torch2: PyTorch 2.x eager; torch2c: the
same compiled), in order of appearance; the ratio is against the faster peer's median.
Where the relpos lines carry "probe_gflops" (run_train_bench.sh's machine-speed probe before each
cell), a last column lists it per round: the machine's float32 GEMM rate when the cell ran."""
import glob
import json
import os
import statistics
import sys

LABEL = {"torch": "torch 1.13 ms", "torch2": "torch2 eager ms", "torch2c": "torch2 compiled ms"}
args = sys.argv[1:]
if len(args) == 2 and args[0] in ("fp32", "bf16") and os.path.isdir(args[1]):
    files = sorted(glob.glob(os.path.join(args[1], f"train_{args[0]}*.jsonl")))
elif args and all(a.endswith(".jsonl") for a in args):
    files = args
else:
    sys.exit(__doc__)
runs, peers, probes = {}, [], {}
for f in files:
    for line in open(f):
        if not line.strip():
            continue
        d = json.loads(line)
        runs.setdefault((d["size"], d["pos"], d["impl"]), []).append(d["ms_per_step_median"])
        if d["impl"] == "relpos" and d.get("probe_gflops") is not None:
            probes.setdefault((d["size"], d["pos"]), []).append(d["probe_gflops"])
        if d["impl"] != "relpos" and d["impl"] not in peers:
            peers.append(d["impl"])
order = ["tiny", "small", "long"]
cells = sorted({(s, p) for s, p, _ in runs}, key=lambda c: (order.index(c[0]) if c[0] in order else 9, c[1]))
print("| size | PE | rounds | relpos ms (each round) | " + "".join(f"{LABEL.get(p, p + ' ms')} | " for p in peers) +
      "relpos median | faster peer median | ratio |" + (" GEMM probe GFLOP/s (each round) |" if probes else ""))
print("|---|---|---:|---|" + "---|" * len(peers) + "---:|---:|---:|" + ("---|" if probes else ""))
fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
for s, p in cells:
    r = runs.get((s, p, "relpos"), [])
    got = [runs.get((s, p, q), []) for q in peers]
    if not r or not any(got):
        continue
    rm = statistics.median(r)
    pm = min(statistics.median(x) for x in got if x)
    print(f"| {s} | {p} | {len(r)} | {fmt(r)} | " + "".join(f"{fmt(x)} | " for x in got) +
          f"{rm:.1f} | {pm:.1f} | {pm / rm:.2f} |" +
          (f" {', '.join(f'{g:.0f}' for g in probes.get((s, p), [])) or '—'} |" if probes else ""))
