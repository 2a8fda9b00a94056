#!/usr/bin/python3
"""bench/torch_train.py — the PyTorch twin of bench/bench_train.cpp (run with /usr/bin/python3).

The same decoder as relpos' nn::Model (kind decoder, written from nn/models.cpp,
nn/transformer.cpp, nn/attention.cpp, nn/layers.cpp, nn/positional/*.cpp):
  tokens [B, L] -> embedding -> n_layers pre-LN blocks -> LayerNorm -> head (Linear, no bias)
  block:  x = x + attn(norm1(x));  x = x + mlp(norm2(x))          (dropout 0)
  attn:   q, k, v = Linear(x) (with bias) -> [B, H, L, dh];  q, k = rope(q), rope(k)
          S = scale * (q k^T + score_terms) + bias;  causal mask -inf;  P = softmax(S)
          O = P v + value_terms(P);  out = o_proj(merge_heads(O))
  mlp:    fc2(gelu_erf(fc1(x))), d_ff = 4 d_model;  LayerNorm eps 1e-5
Position encodings (the relpos defaults):
  none   nothing; scale 1/sqrt(dh)
  t5     bias[h, i, j] = table[bucket(j - i), h], causal buckets (32 buckets, max_distance 128,
         large branch in float32), table [32, H] shared by the layers; scale 1 (T5 is unscaled)
  alibi  bias[h, i, j] = m_h (j - i) (causal form), reference slopes, fixed; scale 1/sqrt(dh)
  rope   half style over all dh channels, base 10000, angles in float64; scale 1/sqrt(dh)
  shaw   k_max 16, per-layer tables keys/values [33, dh]; idx = clip(j - i, -16, 16) + 16;
         score term gather(q keys^T, idx), value term scatter_add(P, idx) @ values
One step: forward -> cross_entropy (mean) -> backward -> clip_grad_norm_(1.0) -> AdamW
(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay --wd on weights only, none on biases,
norms and position tables, foreach=False) -> zero_grad(set_to_none=True), as relpos' trainer.
Parameter names equal relpos' (stack.layers.0.attn.q_proj.weight, ...), so --load DIR takes the
initial parameters and the batches written by `relpos_bench_train --dump DIR` (cross-check).
Prints one JSON line with the same fields as relpos_bench_train.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 65


def rss_now_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


def alibi_slopes(n):
    def power_of_two(m):
        start = 2.0 ** (-8.0 / m)
        return [start ** (i + 1) for i in range(m)]

    c = 1
    while c * 2 <= n:
        c *= 2
    if c == n:
        return power_of_two(n)
    return power_of_two(c) + alibi_slopes(2 * c)[0:2 * (n - c):2]


def t5_causal_buckets(L, num_buckets=32, max_distance=128):
    """bucket(j - i) for query i, key j: [L, L] int64 (relpos t5_bucket, causal)."""
    pos = torch.arange(L)
    rel = pos[None, :] - pos[:, None]  # kj - qi
    r = torch.clamp(-rel, min=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(r.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.clamp(large, max=num_buckets - 1)
    return torch.where(r < max_exact, r, large)


class T5Bias(nn.Module):
    def __init__(self, heads, num_buckets=32, max_distance=128):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.table = nn.Parameter(torch.randn(num_buckets, heads) * 0.02)

    def bias(self, L):  # [H, L, L], recomputed per call like relpos' toeplitz_bias()
        b = t5_causal_buckets(L, self.num_buckets, self.max_distance)
        return F.embedding(b, self.table).permute(2, 0, 1)


class Alibi(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.register_buffer("slopes", torch.tensor(alibi_slopes(heads), dtype=torch.float32))

    def bias(self, L):  # m_h (kj - qi)
        pos = torch.arange(L, dtype=torch.float32)
        return self.slopes[:, None, None] * (pos[None, :] - pos[:, None])[None]


class Rope(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        self.half = head_dim // 2
        self.inv_freq = [base ** (-2.0 * p / head_dim) for p in range(self.half)]  # float64

    def rotate(self, x):  # x [B, H, L, dh], positions 0..L-1; cos/sin recomputed per call
        L = x.shape[2]
        ang = torch.arange(L, dtype=torch.float64)[:, None] * torch.tensor(self.inv_freq, dtype=torch.float64)[None]
        cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
        a, b = x[..., :self.half], x[..., self.half:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Shaw(nn.Module):
    def __init__(self, head_dim, k_max=16):
        super().__init__()
        self.k_max = k_max
        self.keys = nn.Parameter(torch.randn(2 * k_max + 1, head_dim) * 0.02)
        self.values = nn.Parameter(torch.randn(2 * k_max + 1, head_dim) * 0.02)

    def index(self, L):  # [L, L]
        pos = torch.arange(L)
        return torch.clamp(pos[None, :] - pos[:, None], -self.k_max, self.k_max) + self.k_max

    def score_terms(self, q, idx):  # q [B, H, L, dh] -> [B, H, L, L]
        rel = q @ self.keys.t()
        return torch.gather(rel, -1, idx.expand(q.shape[0], q.shape[1], -1, -1))

    def value_terms(self, p, idx):  # p [B, H, L, L] -> [B, H, L, dh]
        shape = p.shape[:-1] + (2 * self.k_max + 1,)
        w = torch.zeros(shape, dtype=p.dtype).scatter_add(-1, idx.expand(p.shape), p)
        return w @ self.values


class Norm(nn.Module):  # relpos Norm("layernorm"): parameters at <name>.ln.weight / .ln.bias
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d, eps=1e-5)

    def forward(self, x):
        return self.ln(x)


class Attention(nn.Module):
    def __init__(self, d, heads, pos_type, shared_pos, own_pos):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.o_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.pos_type = pos_type
        if own_pos is not None:
            self.pos = own_pos  # per-layer tables (shaw): layers.N.attn.pos.*
        self.shared = [shared_pos]  # a list, so the shared module is not registered twice
        self.scale = 1.0 if pos_type == "t5" else 1.0 / math.sqrt(self.dh)

    def forward(self, x):
        B, L, D = x.shape
        split = lambda t: t.view(B, L, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        pt = self.pos_type
        if pt == "rope":
            q, k = self.shared[0].rotate(q), self.shared[0].rotate(k)
        s = q @ k.transpose(-1, -2)
        if pt == "shaw":
            idx = self.pos.index(L)
            s = s + self.pos.score_terms(q, idx)
        if self.scale != 1.0:
            s = s * self.scale
        if pt in ("t5", "alibi"):
            s = s + self.shared[0].bias(L)
        mask = torch.ones(L, L, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        p = torch.softmax(s, dim=-1)
        o = p @ v
        if pt == "shaw":
            o = o + self.pos.value_terms(p, idx)
        return self.o_proj(o.transpose(1, 2).reshape(B, L, D))


class MLP(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d, heads, d_ff, pos_type, shared_pos, own_pos, attn_cls=Attention):
        super().__init__()
        self.attn = attn_cls(d, heads, pos_type, shared_pos, own_pos)
        self.norm1 = Norm(d)
        self.mlp = MLP(d, d_ff)
        self.norm2 = Norm(d)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Stack(nn.Module):
    def __init__(self, d, n_layers, heads, d_ff, pos_type, attn_cls=Attention):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        nn.init.normal_(self.embed.weight, std=0.02)
        shared = None
        if pos_type == "t5":
            self.pos = shared = T5Bias(heads)  # stack.pos.table
        elif pos_type == "alibi":
            self.pos = shared = Alibi(heads)
        elif pos_type == "rope":
            shared = Rope(d // heads)
        elif pos_type not in ("none", "shaw"):
            raise SystemExit(f"unknown --pos {pos_type}")
        self.layers = nn.ModuleList(
            Block(d, heads, d_ff, pos_type, shared, Shaw(d // heads) if pos_type == "shaw" else None, attn_cls)
            for _ in range(n_layers))
        self.norm = Norm(d)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Model(nn.Module):
    """attn_cls: the attention module (bench/torch2_train.py passes its SDPA version)."""

    def __init__(self, d, n_layers, heads, d_ff, pos_type, attn_cls=Attention):
        super().__init__()
        self.stack = Stack(d, n_layers, heads, d_ff, pos_type, attn_cls)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, tokens):
        return self.head(self.stack(tokens))


def load_relpos_params(model, directory):
    names = [line.split() for line in open(os.path.join(directory, "params.txt")) if line.strip()]
    values = np.fromfile(os.path.join(directory, "params.bin"), dtype=np.float32)
    own = dict(model.named_parameters())
    if sorted(own) != sorted(n[0] for n in names):
        raise SystemExit(f"parameter names differ:\n relpos {sorted(n[0] for n in names)}\n torch {sorted(own)}")
    at = 0
    with torch.no_grad():
        for entry in names:
            name, shape = entry[0], tuple(int(s) for s in entry[1:])
            n = int(np.prod(shape)) if shape else 1
            p = own[name]
            if tuple(p.shape) != shape:
                raise SystemExit(f"{name}: relpos shape {shape}, torch {tuple(p.shape)}")
            p.copy_(torch.from_numpy(values[at:at + n].reshape(shape)))
            at += n
    assert at == values.size


def param_groups(model, wd):
    weights, no_decay, position = [], [], []
    for name, p in model.named_parameters():
        if ".pos." in name:
            position.append(p)
        elif name.endswith(".bias") or ".ln." in name:
            no_decay.append(p)
        else:
            weights.append(p)
    groups = [{"params": weights, "weight_decay": wd}]
    groups += [{"params": g, "weight_decay": 0.0} for g in (no_decay, position) if g]
    return groups


def build_parser(doc=__doc__):
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--pos", default="none", choices=["none", "t5", "alibi", "rope", "shaw"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--load", default="", help="directory written by relpos_bench_train --dump")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="bf16: forward and loss under torch.autocast(device, dtype=torch.bfloat16)")
    ap.add_argument("--profile", action="store_true",
                    help="run the timed steps under torch.profiler and print its op table to stderr")
    return ap


def make_batches(a, model):
    """Loads --load DIR's parameters into model; returns the per-step inputs and targets on
    --device (from DIR/tokens.bin, or random from --seed + 1), drawn before any clock starts."""
    total, B, L = a.warmup + a.steps, a.batch, a.seq
    if a.load:
        load_relpos_params(model, a.load)
        tok = np.fromfile(os.path.join(a.load, "tokens.bin"), dtype=np.int64)
        if tok.size != total * B * (L + 1):
            raise SystemExit(f"{a.load}/tokens.bin holds {tok.size} tokens, expected {total * B * (L + 1)}")
        tokens = torch.from_numpy(tok.reshape(total, B, L + 1))
    else:
        g = torch.Generator().manual_seed(a.seed + 1)
        tokens = torch.randint(0, VOCAB, (total, B, L + 1), generator=g)
    dev = torch.device(a.device)
    model.to(dev)
    inputs = [tokens[s, :, :L].contiguous().to(dev) for s in range(total)]
    targets = [tokens[s, :, 1:].reshape(-1).contiguous().to(dev) for s in range(total)]
    return inputs, targets


def result(a, impl, params, ms, losses, rss_start):
    """The JSON fields shared with relpos_bench_train (bench/train_table.py reads them)."""
    median = statistics.median(ms)
    return {
        "impl": impl, "pos": a.pos, "d_model": a.d_model, "n_layers": a.layers, "n_heads": a.heads,
        "seq": a.seq, "batch": a.batch, "threads": a.threads, "warmup": a.warmup, "steps": a.steps,
        "params": sum(p.numel() for p in params),
        "ms_per_step_median": round(median, 3), "ms_per_step_mean": round(statistics.fmean(ms), 3),
        "ms_per_step_min": round(min(ms), 3), "tokens_per_s": round(a.batch * a.seq / (median / 1000.0), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "rss_start_mb": round(rss_start, 1), "final_loss": round(losses[-1], 6),
        "losses": [round(x, 6) for x in losses], "torch": torch.__version__, "device": a.device,
        "precision": getattr(a, "precision", "fp32"),
    }


def run_steps(a, model, opt, params, inputs, targets):
    """The training steps: forward -> mean cross-entropy -> backward -> clip -> opt.step ->
    zero_grad. Returns (ms of the timed steps, the loss of every step); the first --warmup steps
    are run but not timed. --profile: the timed steps under torch.profiler, its table to stderr."""
    total = a.warmup + a.steps
    ms, losses = [], []
    prof = None
    for s in range(total):
        if a.profile and s == a.warmup:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            prof.__enter__()
        t0 = time.perf_counter()
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=getattr(a, "precision", "fp32") == "bf16"):
            logits = model(inputs[s])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets[s])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        l = loss.item()
        t1 = time.perf_counter()
        losses.append(l)
        if s >= a.warmup:
            ms.append((t1 - t0) * 1000.0)

    if prof is not None:
        prof.__exit__(None, None, None)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), file=sys.stderr)
    return ms, losses


def main():
    a = build_parser().parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rss_start = rss_now_mb()
    model = Model(a.d_model, a.layers, a.heads, 4 * a.d_model, a.pos)
    model.train()
    inputs, targets = make_batches(a, model)

    params = list(model.parameters())
    opt = torch.optim.AdamW(param_groups(model, a.wd), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    ms, losses = run_steps(a, model, opt, params, inputs, targets)
    out = result(a, "torch", params, ms, losses, rss_start)
    print(json.dumps(out, separators=(",", ":")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
