"""The roofline line of bench/RESULTS.md (issue 20): FLOPs per step / ms per step / a measured
float32 GEMM peak, for relpos and the faster PyTorch peer, PE none, from one
bench/measure.sh directory.
usage: python3 bench/roofline.py DIR   (reads DIR/train_fp32_round*.jsonl, DIR/ops.jsonl and
                                        DIR/ops_torch.jsonl)
FLOPs per step: 3 x the forward's (the backward does two GEMMs per forward GEMM), the forward
being each layer's q, k, v, o, fc1 and fc2 (d_ff = 4 d_model) on B x T rows, the attention's
Q K^T and P V counted in full (no causal saving), and the vocabulary head (bench_train.cpp's
vocabulary of 65): small 45.3 G, tiny 5.74 G, T = 2048 17.8 G.
Two peaks, both measured in the same run (relpos_bench_ops and torch_ops.py, 2 threads):
  - strict: the fastest float32 GEMM of either library at any measured shape (the models'
    shapes included: these run faster than a square 1024 product here, their C fitting in
    cache);
  - large N: the fastest square float32 GEMM with N >= 1024 of either library, the peak as
    issue 20 states it ("OpenBLAS sgemm best ..., torch.mm fp32 ... at N >= 1024").
ms per step: the median over the rounds of each round's median (bench/summarise_rounds.py)."""
import glob
import json
import os
import statistics
import sys

VOCAB = 65


def flops_per_step(d):
    rows, dm, layers = d["batch"] * d["seq"], d["d_model"], d["n_layers"]
    gemm = 2.0 * rows * (4 * dm * dm + 2 * dm * 4 * dm) * layers
    attention = 2.0 * 2.0 * d["batch"] * d["seq"] ** 2 * dm * layers
    head = 2.0 * rows * dm * VOCAB
    return 3.0 * (gemm + attention + head)


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                if not d.get("meta"):
                    out.append(d)
    return out


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit(__doc__)
    root = sys.argv[1]
    ops = read_jsonl(os.path.join(root, "ops.jsonl")) + read_jsonl(os.path.join(root, "ops_torch.jsonl"))
    gemms = [o for o in ops if o.get("op") == "matmul"]
    if not gemms:
        sys.exit(f"roofline: no float32 matmul rows in {root}/ops.jsonl or ops_torch.jsonl")
    strict = max(gemms, key=lambda o: o["gflops"])

    def square_n(size):
        parts = size.split("x")
        return int(parts[0]) if len(parts) == 3 and len(set(parts)) == 1 and parts[0].isdigit() else 0

    large = [o for o in gemms if square_n(o["size"]) >= 1024]
    large_best = max(large, key=lambda o: o["gflops"]) if large else None
    runs, shapes = {}, {}
    for f in sorted(glob.glob(os.path.join(root, "train_fp32_round*.jsonl"))):
        for d in read_jsonl(f):
            if d["pos"] != "none":
                continue
            runs.setdefault((d["size"], d["impl"]), []).append(d["ms_per_step_median"])
            shapes[d["size"]] = d
    peaks = [("strict", strict)] + ([("large N", large_best)] if large_best else [])
    for name, p in peaks:
        print(f"peak ({name}): {p['gflops']:.1f} GFLOP/s, {p['impl']} {p['size']}")
    print()
    head = "| size, PE none | GFLOP per step | relpos ms | relpos GFLOP/s |"
    head += "".join(f" share of {p['gflops']:.1f} ({n}) |" for n, p in peaks)
    head += " faster PyTorch ms | PyTorch GFLOP/s |" + "".join(f" share ({n}) |" for n, _ in peaks)
    print(head)
    print("|---|" + "---:|" * (head.count("|") - 2))
    for size in ("tiny", "small", "long"):
        if size not in shapes or (size, "relpos") not in runs:
            continue
        fl = flops_per_step(shapes[size])
        rm = statistics.median(runs[(size, "relpos")])
        peers = [statistics.median(v) for (s, impl), v in runs.items() if s == size and impl != "relpos"]
        row = f"| {size} | {fl * 1e-9:.2f} | {rm:.1f} | {fl / rm * 1e-6:.0f} |"
        row += "".join(f" {fl / rm * 1e-6 / p['gflops'] * 100:.0f}% |" for _, p in peaks)
        if peers:
            pm = min(peers)
            row += f" {pm:.1f} | {fl / pm * 1e-6:.0f} |" + "".join(f" {fl / pm * 1e-6 / p['gflops'] * 100:.0f}% |"
                                                                 for _, p in peaks)
        else:
            row += " - | - |" + " - |" * len(peaks)
        print(row)


if __name__ == "__main__":
    main()
