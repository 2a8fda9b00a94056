#!/usr/bin/python3
"""Doc-drift check for docs/model.md: train short runs of representative configs from
configs/, then compare python/tests/doc_reader.py (a reader written from docs/model.md alone)
with `relpos eval --json` on each (|loss diff| <= 1e-6 and the same token count). A failure
means the model and docs/model.md disagree: fix the page (or the model), not the reader's
guesses.

  python3 python/tests/check_doc_reader.py --relpos build/relpos [--keep DIR]

Runs from the repository root (the configs read data/ relative to it). Exit 0 all match,
1 a mismatch or failure, 77 when torch or yaml is not installed (ctest: skipped).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READER = os.path.join(ROOT, "python", "tests", "doc_reader.py")
try:
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch and python3-yaml to run the doc reader check)")
    sys.exit(77)

SHORT = ["--set", "train.steps=20", "--set", "optim.warmup=5", "--set", "train.eval_every=20",
         "--set", "train.checkpoint_every=20"]
# run name, config in configs/, extra overrides
CASES = [
    ("decoder_t5", "decoder_t5", []),  # shared T5 table, learnable per-head bias scale, s = 1
    ("decoder_deberta", "decoder_deberta", []),  # score terms, its own score scale
    ("decoder_rope", "decoder_rope", []),
    ("decoder_rope_stability", "decoder_rope",  # qk_norm, softcap, post-LN, RMSNorm
     ["--set", "model.qk_norm=rmsnorm", "--set", "model.attn_softcap=5", "--set", "model.norm=post",
      "--set", "model.norm_type=rmsnorm"]),
    ("encoder_decoder_reverse", "encoder_decoder_reverse", []),  # cross-attention, synthetic task
    ("graph_spd", "graph_spd", []),  # index bias from the batch's shortest paths
    ("vision_patch_2d", "vision_patch_2d", []),  # Swin 2D bias, patch grid
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relpos", required=True, help="the relpos binary")
    ap.add_argument("--keep", help="train into this directory (kept) instead of a temporary one")
    args = ap.parse_args()
    relpos = os.path.abspath(args.relpos)
    env = dict(os.environ, RELPOS_BIN=relpos, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="relpos_doc_reader_") as tmp:
        base = os.path.abspath(args.keep) if args.keep else tmp
        os.makedirs(base, exist_ok=True)
        runs = []
        for name, config, extra in CASES:
            out = os.path.join(base, name)
            cmd = [relpos, "--threads", "1", "train", os.path.join("configs", config + ".yaml")] + SHORT + extra + \
                ["--set", f"output.dir={out}"]
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"FAIL: training {name} exited {p.returncode}: {' '.join(cmd)}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
                return 1
            runs.append(out)
        t_train = time.time() - t0
        p = subprocess.run([sys.executable, READER, "--compare"] + runs, cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=900)
        print(p.stdout, end="")
        if p.stderr:
            print(p.stderr[-4000:], end="")
        print(f"({len(runs)} runs: training {t_train:.1f} s, comparison {time.time() - t0 - t_train:.1f} s)")
        if p.returncode != 0:
            print("FAIL: doc_reader.py (written from docs/model.md) disagrees with `relpos eval`: "
                  "docs/model.md no longer describes the model")
            return 1
    print("OK: docs/model.md reproduces `relpos eval` for every run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
