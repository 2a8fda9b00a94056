#!/usr/bin/python3
"""bench/train_table.py RESULTS.jsonl — the Markdown tables of bench/run_train_bench.sh.

Input: the JSON lines of relpos_bench_train and of the peers (with a "size" field added):
torch_train.py (impl "torch", Debian's torch 1.13) and torch2_train.py (impl "torch2",
PyTorch 2.x eager; "torch2c", the same under torch.compile), any subset, in order of appearance.
Table 1: median ms/step of the timed steps (mean in parentheses), ratio relpos/peer for each
peer, tokens/s (from the median), peak RSS. Table 2: the fastest timed step of each (min
ms/step) and its ratios — less sensitive to other processes on a shared machine than the median.
With only "torch" present there is one peer column.
"""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by, peers = {}, []
for r in rows:
    by.setdefault((r["size"], r["pos"]), {})[r["impl"]] = r
    if r["impl"] != "relpos" and r["impl"] not in peers:
        peers.append(r["impl"])
t = rows[0]["threads"]
NA = "—"


def cell(d, p, f):
    return f(d[p]) if p in d else NA


def ratio(d, p, key):
    return f"{d['relpos'][key] / d[p][key]:.2f}" if p in d else NA


vs = "torch" if peers == ["torch"] else "peer"
prec = sorted({r.get("precision", "fp32") for r in rows})
print(f"precision {', '.join(prec)}; relpos GEMM: {rows[0].get('gemm', 'not recorded')}" if rows[0].get("impl") == "relpos"
      else f"precision {', '.join(prec)}")
print(f"threads {t}; ms/step = median of the timed steps (mean in parentheses); ratio = relpos/{vs} (lower is better)")
print()
head = ["size", "PE", "relpos ms/step"]
for p in peers:
    head += [f"{p} ms/step", f"ratio relpos/{p}"]
head += ["relpos tok/s"] + [f"{p} tok/s" for p in peers]
head += ["relpos peak RSS MB"] + [f"{p} peak RSS MB" for p in peers]
print("| " + " | ".join(head) + " |")
print("|---|---|" + "---:|" * (len(head) - 2))
ms = lambda r: f"{r['ms_per_step_median']:.1f} ({r['ms_per_step_mean']:.1f})"
for (size, pos), d in by.items():
    if "relpos" not in d or not any(p in d for p in peers):
        continue
    c = [size, pos, ms(d["relpos"])]
    for p in peers:
        c += [cell(d, p, ms), ratio(d, p, "ms_per_step_median")]
    c += [f"{d['relpos']['tokens_per_s']:.0f}"] + [cell(d, p, lambda r: f"{r['tokens_per_s']:.0f}") for p in peers]
    c += [f"{d['relpos']['peak_rss_mb']:.0f}"] + [cell(d, p, lambda r: f"{r['peak_rss_mb']:.0f}") for p in peers]
    print("| " + " | ".join(c) + " |")
print()
print("fastest timed step (min ms/step), less sensitive to other load:")
print()
if peers == ["torch"]:
    head = ["size", "PE", "relpos min ms", "torch min ms", "ratio"]
else:
    head = ["size", "PE", "relpos min ms"]
    for p in peers:
        head += [f"{p} min ms", f"ratio relpos/{p}"]
print("| " + " | ".join(head) + " |")
print("|---|---|" + "---:|" * (len(head) - 2))
for (size, pos), d in by.items():
    if "relpos" not in d or not any(p in d for p in peers):
        continue
    c = [size, pos, f"{d['relpos']['ms_per_step_min']:.1f}"]
    for p in peers:
        c += [cell(d, p, lambda r: f"{r['ms_per_step_min']:.1f}"), ratio(d, p, "ms_per_step_min")]
    print("| " + " | ".join(c) + " |")
rp = [r for r in rows if r["impl"] == "relpos"]
for p in peers:
    tr = [r for r in rows if r["impl"] == p]
    if not (tr and rp):
        continue
    print()
    extra = ""
    if "optimizer" in tr[0]:
        extra = (f"; AdamW {tr[0]['optimizer']}" + ("; torch.compile (default mode)" if tr[0].get("compile") else "; eager")
                 + f"; warmup steps (untimed{', incl. compilation' if tr[0].get('compile') else ''}) "
                 + f"{min(r['warmup_s'] for r in tr):.1f}–{max(r['warmup_s'] for r in tr):.1f} s")
    version = f"torch {tr[0].get('torch', '?')}"
    print(f"{version if p == 'torch' else p + ': ' + version}{extra}; {p}'s peak RSS includes ~{tr[0]['rss_start_mb']:.0f} MB "
          f"for the interpreter + libtorch before the model is built (relpos: ~{rp[0]['rss_start_mb']:.0f} MB).")
