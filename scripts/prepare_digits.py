#!/usr/bin/env python3
"""Write the 8x8 handwritten digits as relpos token files (the vision domain, docs/data.md).

    scripts/prepare_digits.py [OUT_PREFIX]          default: data/digits

Reads the copy of the UCI "optical recognition of handwritten digits" test set that scikit-learn
bundles (sklearn.datasets.load_digits: 1,797 images of 8x8 pixels, intensities 0..16, labels
0..9; Debian's python3-sklearn) and writes:

    OUT_PREFIX_train.rptok     1,437 images at 8x8 (the training split)
    OUT_PREFIX_val.rptok         360 images at 8x8 (the held-out split)
    OUT_PREFIX_val12.rptok       the same 360 images upsampled to 12x12
    OUT_PREFIX_val16.rptok       the same 360 images upsampled to 16x16

One example per image, one token per pixel in row-major order, the token the pixel's intensity
(vocabulary 17: 0..16). Channels: `row` and `col` (per token: the pixel's coordinates, declared
range 0..H-1 and 0..W-1) and `label` (per example: the digit, 0..9).

Split: the image indices 0..1796 shuffled by random.Random(20211) (Python's Mersenne Twister;
random.shuffle is the same in every Python 3 since 3.2); the first 1,437 train, the other 360
validate, each split kept in index order.

Upsampling (resolution transfer): bilinear interpolation of the intensities with pixel-centre
alignment (PyTorch's F.interpolate(mode="bilinear", align_corners=False)): output pixel i of n
samples the input at x = (i + 0.5) * 8 / n - 0.5, clamped to [0, 7], per axis; the value is
rounded half up to an integer (0..16). Exact rational arithmetic, so the bytes are the same on
every machine. A test (ctest, where sklearn is installed) checks the shipped files against a
fresh run.

License: the images are the UCI data set (E. Alpaydin, C. Kaynak, 1998; see data/digits.LICENSE.md);
the token files carry that license.
"""
import os
import random
import sys
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare_tokens import write_token_file  # noqa: E402

SEED = 20211
N_VAL = 360
SIZE = 8
VOCAB = 17


def load():
    """(images, labels): images as lists of 64 ints (row-major), labels ints."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("error: scikit-learn is not installed (Debian: apt-get install python3-sklearn)")
    d = load_digits()
    images = [[int(v) for v in row] for row in d.data]
    labels = [int(t) for t in d.target]
    assert len(images) == 1797 and all(len(im) == SIZE * SIZE for im in images)
    assert all(0 <= v <= 16 for im in images for v in im) and set(labels) == set(range(10))
    return images, labels


def split(n):
    order = list(range(n))
    random.Random(SEED).shuffle(order)
    return sorted(order[: n - N_VAL]), sorted(order[n - N_VAL:])


def taps(n_out, n_in):
    """Per output index: (i0, i1, w1) with value = (1 - w1) * in[i0] + w1 * in[i1]."""
    out = []
    for i in range(n_out):
        x = (Fraction(2 * i + 1) * n_in / n_out - 1) / 2
        x = min(max(x, Fraction(0)), Fraction(n_in - 1))
        i0 = int(x)  # floor (x >= 0)
        i1 = min(i0 + 1, n_in - 1)
        out.append((i0, i1, x - i0))
    return out


def upsample(image, n):
    """Bilinear (align_corners=False) resize of a SIZE x SIZE image to n x n, rounded half up."""
    t = taps(n, SIZE)
    out = []
    for r in range(n):
        r0, r1, wr = t[r]
        for c in range(n):
            c0, c1, wc = t[c]
            v = ((1 - wr) * ((1 - wc) * image[r0 * SIZE + c0] + wc * image[r0 * SIZE + c1]) +
                 wr * ((1 - wc) * image[r1 * SIZE + c0] + wc * image[r1 * SIZE + c1]))
            out.append(min(16, max(0, int(v + Fraction(1, 2)))))  # floor(v + 1/2): round half up
    return out


def write(path, images, labels, n):
    tokens, starts, rows, cols = [], [], [], []
    for im in images:
        starts.append(len(tokens))
        tokens.extend(im)
        rows.extend(p // n for p in range(n * n))
        cols.extend(p % n for p in range(n * n))
    channels = [("row", "token", 0, n - 1, rows), ("col", "token", 0, n - 1, cols),
                ("label", "example", 0, 9, labels)]
    write_token_file(path, VOCAB, tokens, starts, channels=channels)


def main():
    prefix = sys.argv[1] if len(sys.argv) > 1 else "data/digits"
    if len(sys.argv) > 2 or prefix.startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    images, labels = load()
    train, val = split(len(images))
    val_images, val_labels = [images[i] for i in val], [labels[i] for i in val]
    try:
        write(prefix + "_train.rptok", [images[i] for i in train], [labels[i] for i in train], SIZE)
        write(prefix + "_val.rptok", val_images, val_labels, SIZE)
        for n in (12, 16):
            write(f"{prefix}_val{n}.rptok", [upsample(im, n) for im in val_images], val_labels, n)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
