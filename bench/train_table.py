#!/usr/bin/python3
"""bench/train_table.py RESULTS.jsonl — the Markdown tables of bench/run_train_bench.sh.

Input: the JSON lines of relpos_bench_train and torch_train.py (with a "size" field added).
Table 1: median ms/step of the timed steps (mean in parentheses), ratio relpos/torch, tokens/s
(from the median), peak RSS. Table 2: the fastest timed step of each (min ms/step) and its
ratio — less sensitive to other processes on a shared machine than the median.
"""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["size"], r["pos"]), {})[r["impl"]] = r
t = rows[0]["threads"]
print(f"threads {t}; ms/step = median of the timed steps (mean in parentheses); ratio = relpos/torch (lower is better)")
print()
print("| size | PE | relpos ms/step | torch ms/step | ratio relpos/torch | relpos tok/s | torch tok/s "
      "| relpos peak RSS MB | torch peak RSS MB |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for (size, pos), d in by.items():
    if "relpos" not in d or "torch" not in d:
        continue
    a, b = d["relpos"], d["torch"]
    print(f"| {size} | {pos} | {a['ms_per_step_median']:.1f} ({a['ms_per_step_mean']:.1f}) | "
          f"{b['ms_per_step_median']:.1f} ({b['ms_per_step_mean']:.1f}) | "
          f"{a['ms_per_step_median'] / b['ms_per_step_median']:.2f} | {a['tokens_per_s']:.0f} | {b['tokens_per_s']:.0f} | "
          f"{a['peak_rss_mb']:.0f} | {b['peak_rss_mb']:.0f} |")
print()
print("fastest timed step (min ms/step), less sensitive to other load:")
print()
print("| size | PE | relpos min ms | torch min ms | ratio |")
print("|---|---|---:|---:|---:|")
for (size, pos), d in by.items():
    if "relpos" not in d or "torch" not in d:
        continue
    a, b = d["relpos"], d["torch"]
    print(f"| {size} | {pos} | {a['ms_per_step_min']:.1f} | {b['ms_per_step_min']:.1f} | "
          f"{a['ms_per_step_min'] / b['ms_per_step_min']:.2f} |")
tr = [r for r in rows if r["impl"] == "torch"]
rp = [r for r in rows if r["impl"] == "relpos"]
if tr and rp:
    print()
    print(f"torch {tr[0].get('torch', '?')}; torch's peak RSS includes ~{tr[0]['rss_start_mb']:.0f} MB for the "
          f"interpreter + libtorch before the model is built (relpos: ~{rp[0]['rss_start_mb']:.0f} MB).")
