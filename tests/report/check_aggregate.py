#!/usr/bin/python3
"""The seed aggregation of scripts/report.py on fixtures whose answers were worked out by hand:
mean and 95% Student-t half-width t(0.975, k-1) * s / sqrt(k), non-finite seeds left out and
counted, the tiers of a ranking (only where intervals separate). Exit 0 when all hold, 1 otherwise,
77 (skipped) without matplotlib, which report.py imports."""
import argparse
import importlib.util
import math
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--report", required=True)
args = ap.parse_args()
try:
    import matplotlib  # noqa: F401
except ImportError:
    print("skipped: python3-matplotlib is not installed")
    sys.exit(77)
spec = importlib.util.spec_from_file_location("report", args.report)
rep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rep)

failures = []


def check(what, got, want, tol=1e-9):
    ok = (got is None and want is None) or (got is not None and want is not None and abs(got - want) <= tol)
    if not ok:
        failures.append(f"{what}: got {got}, expected {want}")


# [5.1, 4.9, 5.0, 5.2]: mean 5.05; deviations +-0.05, +-0.15 -> s^2 = 0.05 / 3, s = 0.1290994;
# t(0.975, 3) = 3.182 -> half = 3.182 * 0.1290994 / 2 = 0.2053972.
sm = rep.summarize([5.1, 4.9, 5.0, 5.2])
check("mean of 4", sm["mean"], 5.05)
check("half of 4", sm["half"], 3.182 * math.sqrt(0.05 / 3) / 2)
check("half of 4 (decimal)", sm["half"], 0.2053972, tol=1e-7)
check("lo of 4", sm["lo"], 5.05 - 0.2053972, tol=1e-7)
# [1, 2, 3]: s = 1, t(0.975, 2) = 4.303 -> half = 4.303 / sqrt(3) = 2.4843382
sm = rep.summarize([1, 2, 3])
check("half of 3", sm["half"], 2.4843382, tol=1e-7)
# two seeds a, b: s = |a - b| / sqrt(2), half = 12.706 * |a - b| / 2
sm = rep.summarize([2.0, 2.5])
check("mean of 2", sm["mean"], 2.25)
check("half of 2", sm["half"], 12.706 * 0.25)
# one value: a mean, no interval; nan / inf / None are seeds without a finite value
sm = rep.summarize([3.0])
check("mean of 1", sm["mean"], 3.0)
check("half of 1", sm["half"], None)
sm = rep.summarize([1.0, float("nan"), 3.0, None, float("inf")])
check("mean of finite", sm["mean"], 2.0)
check("half of finite", sm["half"], 12.706 * 1.0)  # |1 - 3| / 2 = 1
if (sm["n"], sm["finite"]) != (5, 2):
    failures.append(f"counts: got n={sm['n']} finite={sm['finite']}, expected 5 and 2")
if rep.fmt_summary(sm) != "2.0000 ± 12.7060 (2 of 5 finite)":
    failures.append(f"fmt_summary: got {rep.fmt_summary(sm)!r}")
sm = rep.summarize([float("nan")])
if sm["mean"] is not None:
    failures.append("no finite value must give no mean")
# t quantiles: table values, and never narrower than the next tabulated df above 30
check("t(1)", rep.t975(1), 12.706)
check("t(10)", rep.t975(10), 2.228)
check("t(30)", rep.t975(30), 2.042)
check("t(35)", rep.t975(35), 2.042)
check("t(1000)", rep.t975(1000), 1.980)

# Tiers, in order of the means: A 1.00 +- 0.10 leads tier 1; B 1.15 +- 0.10 overlaps A (tier 1);
# C 1.40 +- 0.10 does not overlap A: tier 2; W 2.0 +- 1.5 overlaps C: tier 2 (a wide interval does
# not pull a point ahead of its mean); D 3.0 +- 0.1 does not overlap C: tier 3. E has no interval
# (one seed) and is not ranked.
def iv(m, h):
    return {"mean": m, "half": h, "lo": m - h, "hi": m + h, "n": 3, "finite": 3}


got = [(t, lab) for t, lab, _ in rep.tiers([("C", iv(1.4, 0.1)), ("W", iv(2.0, 1.5)), ("A", iv(1.0, 0.1)),
                                            ("D", iv(3.0, 0.1)), ("B", iv(1.15, 0.1)),
                                            ("E", {"mean": 0.5, "half": None})])]
if got != [(1, "A"), (1, "B"), (2, "C"), (2, "W"), (3, "D")]:
    failures.append(f"tiers: got {got}")

for f in failures:
    print("FAIL", f)
print(f"check_aggregate: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
