"""Summarise thp_ab.txt (see README.txt): per (threads, size, PE) the median ms/step with
RELPOS_THP=0 and with huge pages (the default), the median of the pairwise ratios on/off, how
many pairs got faster, the peak RSS (median) and whether the final losses are equal.
usage: python3 thp_ab.py [thp_ab.txt]   (measured with 900365d, see README.txt)"""
import collections
import os
import statistics
import sys

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "thp_ab.txt")
runs = collections.defaultdict(dict)  # (t, size, pe) -> rep -> thp -> (ms, rss, loss)
for line in open(path):
    rep, t, size, pe, thp, ms, rss, loss = line.split()
    runs[(int(t), size, pe)].setdefault(int(rep), {})[int(thp)] = (float(ms), float(rss), loss)
print("| threads | size | PE | pairs | off ms (median) | on ms (median) | on/off, pairwise median | pairs faster on | "
      "peak RSS off / on MB | same final loss |")
print("|---:|---|---|---:|---:|---:|---:|---:|---|---|")
for (t, size, pe), reps in sorted(runs.items(), key=lambda kv: (kv[0][0], ["tiny", "small"].index(kv[0][1]), kv[0][2])):
    pairs = [r for r in reps.values() if 0 in r and 1 in r]
    off = [p[0][0] for p in pairs]
    on = [p[1][0] for p in pairs]
    ratio = [p[1][0] / p[0][0] for p in pairs]
    faster = sum(1 for x in ratio if x < 1)
    rss = f"{statistics.median(p[0][1] for p in pairs):.1f} / {statistics.median(p[1][1] for p in pairs):.1f}"
    same = all(p[0][2] == p[1][2] for p in pairs)
    print(f"| {t} | {size} | {pe} | {len(pairs)} | {statistics.median(off):.1f} | {statistics.median(on):.1f} | "
          f"{statistics.median(ratio):.3f} | {faster} of {len(pairs)} | {rss} | {'yes' if same else 'no'} |")
