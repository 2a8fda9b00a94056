#!/usr/bin/env python3
"""data/digits_*.rptok are what scripts/prepare_digits.py writes (byte for byte), and the files
hold what docs/data.md says: 1,437 + 360 images, one token per pixel, row/col per token, a
label per example, the 12x12 and 16x16 copies a bilinear (align_corners=False) resize of the
8x8 validation images to within the rounding (checked against PyTorch's F.interpolate where
torch is installed). Exit 77 (skipped) without scikit-learn."""
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(path):
    """An independent RPTOKENS reader (docs/data.md): tokens per example, channels by name."""
    b = open(path, "rb").read()
    assert b[:8] == b"RPTOKENS", path
    _, header_bytes, token_bytes, n_ch = struct.unpack_from("<IIII", b, 8)
    vocab, n_tok, n_ex, _ = struct.unpack_from("<QQQQ", b, 24)
    chans = []
    for c in range(n_ch):
        at = 80 + 64 * c
        name = b[at:at + 32].rstrip(b"\0").decode()
        scope, _, lo, hi = struct.unpack_from("<IIqq", b, at + 32)
        chans.append((name, scope, lo, hi))
    at = header_bytes
    starts = struct.unpack_from("<%dQ" % (n_ex + 1), b, at)
    at += 8 * (n_ex + 1)
    toks = struct.unpack_from("<%d%s" % (n_tok, "H" if token_bytes == 2 else "I"), b, at)
    at += token_bytes * n_tok
    at += -at % 8
    values = {}
    for name, scope, lo, hi in chans:
        n = n_tok if scope == 0 else n_ex
        values[name] = (scope, lo, hi, struct.unpack_from("<%di" % n, b, at))
        at += 4 * n
        at += -at % 8
    assert at == len(b), path
    return vocab, starts, toks, values


def main():
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("skipped: scikit-learn is not installed (Debian: python3-sklearn)")
        return 77
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/prepare_digits.py"), d + "/digits"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        for f in ("train", "val", "val12", "val16"):
            shipped = open(os.path.join(ROOT, "data", f"digits_{f}.rptok"), "rb").read()
            fresh = open(f"{d}/digits_{f}.rptok", "rb").read()
            if shipped != fresh:
                print(f"data/digits_{f}.rptok differs from a fresh scripts/prepare_digits.py run (regenerate it)")
                return 1
    files = {f: read(os.path.join(ROOT, "data", f"digits_{f}.rptok")) for f in ("train", "val", "val12", "val16")}
    assert len(files["train"][1]) - 1 == 1437 and len(files["val"][1]) - 1 == 360
    for f, n in (("train", 8), ("val", 8), ("val12", 12), ("val16", 16)):
        vocab, starts, toks, ch = files[f]
        assert vocab == 17 and max(toks) <= 16
        assert all(starts[e + 1] - starts[e] == n * n for e in range(len(starts) - 1)), f
        assert ch["row"][:3] == (0, 0, n - 1) and ch["col"][:3] == (0, 0, n - 1), f
        assert list(ch["row"][3][: n * n]) == [p // n for p in range(n * n)], f
        assert list(ch["col"][3][: n * n]) == [p % n for p in range(n * n)], f
        assert ch["label"][:3] == (1, 0, 9) and set(ch["label"][3]) == set(range(10)), f
    # The 360 validation images are shared by the three validation files (same labels).
    assert files["val"][3]["label"][3] == files["val12"][3]["label"][3] == files["val16"][3]["label"][3]
    # The split holds 1,797 distinct images in all (the sklearn copy has a few duplicates, so
    # compare against sklearn's own list rather than assuming distinct pixels).
    from sklearn.datasets import load_digits
    data = load_digits()
    every = sorted((tuple(int(v) for v in row), int(t)) for row, t in zip(data.data, data.target))
    ours = []
    for f in ("train", "val"):
        _, starts, toks, ch = files[f]
        ours += [(tuple(toks[starts[e]:starts[e + 1]]), ch["label"][3][e]) for e in range(len(starts) - 1)]
    assert sorted(ours) == every, "train + val is not the 1,797 sklearn images"
    try:
        import torch
    except ImportError:
        print("ok (PyTorch not installed: the resize is not compared with F.interpolate)")
        return 0
    _, starts, toks, _ = files["val"]
    for n in (12, 16):
        _, s2, t2, _ = files[f"val{n}"]
        x = torch.tensor(toks, dtype=torch.float64).reshape(-1, 1, 8, 8)
        y = torch.nn.functional.interpolate(x, size=(n, n), mode="bilinear", align_corners=False)
        got = torch.tensor(t2, dtype=torch.float64).reshape(-1, 1, n, n)
        worst = (got - y).abs().max().item()
        assert worst <= 0.5 + 1e-9, f"val{n}: a pixel is {worst} from F.interpolate (more than the rounding)"
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
