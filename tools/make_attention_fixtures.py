#!/usr/bin/python3
"""Independent PyTorch reference for one relpos attention layer; writes the parity fixtures.

Run with the system interpreter (Debian python3-torch):  /usr/bin/python3 tools/make_attention_fixtures.py
It writes tests/fixtures/attention_<name>.json, read by tests/nn/test_attention_torch_parity.cpp.

The layer (written from the published formulas, not from relpos' code):
    q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv          [B, L, D]
    split heads: [B, L, H, dh] -> [B, H, L, dh]
    S = attention logits (per variant, below); masked_fill(causal, -inf); P = softmax_j(S)
    O = P v (+ value term); merge heads [B, H, L, dh] -> [B, L, H*dh]; y = O Wo^T + bo
Variants:
  t5     S = q k^T + T[bucket(j - i), h]           no 1/sqrt(dh) (Mesh TF / HF T5), bucket from
         HF T5Attention._relative_position_bucket, bidirectional, num_buckets 8, max_distance 16
  alibi  S = q k^T / sqrt(dh) - m_h (i - j)         causal, slopes from the reference get_slopes
  rope   q, k rotated at positions 0..L-1, inv_freq = 1 / base^(2p/dh), base 10000, full rotary;
         "half": HF Llama rotate_half; "interleaved": GPT-J rotate_every_two; S = q k^T / sqrt(dh)
  shaw   t2t dot_product_attention_relative: q *= dh^-0.5; S = q (k_j + aK_ij)^T,
         O_i = sum_j P_ij (v_j + aV_ij), a_ij = w[clip(j - i, -k_max, k_max) + k_max], k_max 2,
         tables [2 k_max + 1, dh] shared by the heads
Everything is float64. The upstream gradient dL/dy is a fixed random tensor; the fixture holds the
inputs, all parameter values (relpos' dotted names), the output and dL/d(x, every parameter).
"""
import json
import math
import os

import torch

B, L, D, H = 2, 5, 8, 2
DH = D // H
TABLE_STD = 0.5
WEIGHT_STD = 0.4
BIAS_STD = 0.2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")


# ---------------------------------------------------------------- position pieces
def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket; rel = memory_position - context_position (key - query)."""
    buckets = torch.zeros_like(rel)
    n = num_buckets
    if bidirectional:
        n //= 2
        buckets += (rel > 0).to(torch.long) * n
        rel = torch.abs(rel)
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = n // 2
    is_small = rel < max_exact
    # HF computes this branch in float32 (relative_position.float()); .to(long) truncates
    large = max_exact + (
        torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact) * (n - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, n - 1))
    return buckets + torch.where(is_small, rel, large)


def alibi_slopes(n):
    """Reference get_slopes (ofirpress/attention_with_linear_biases)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + alibi_slopes(2 * c)[0::2][: n - c]


def rope_cos_sin(length, dim, base, style):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))  # [dim/2]
    pos = torch.arange(length, dtype=torch.float64)
    freqs = torch.outer(pos, inv_freq)  # [L, dim/2]
    if style == "half":
        emb = torch.cat((freqs, freqs), dim=-1)  # HF Llama
    else:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)  # GPT-J
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def rope_apply(x, cos, sin, style):
    rot = rotate_half(x) if style == "half" else rotate_every_two(x)
    return x * cos + rot * sin


def shaw_index(lq, lk, k_max):
    i = torch.arange(lq)[:, None]
    j = torch.arange(lk)[None, :]
    return torch.clamp(j - i, -k_max, k_max) + k_max  # [Lq, Lk]


# ---------------------------------------------------------------- the layer
def attention(x, p, case):
    kind = case["type"]
    causal = case["causal"]

    def lin(name, t):
        return t @ p[name + ".weight"].T + p[name + ".bias"]

    def split(t):
        return t.view(B, L, H, DH).transpose(1, 2)  # [B, H, L, dh]

    q, k, v = split(lin("q_proj", x)), split(lin("k_proj", x)), split(lin("v_proj", x))
    value_term = None
    if kind == "t5":
        nb, md = int(case["params"]["num_buckets"]), int(case["params"]["max_distance"])
        rel = torch.arange(L)[None, :] - torch.arange(L)[:, None]  # memory - context
        bucket = t5_bucket(rel, not causal, nb, md)  # [L, L]
        bias = p["pos.table"][bucket].permute(2, 0, 1)  # [H, L, L]
        s = q @ k.transpose(-1, -2) + bias  # no scaling
    elif kind == "alibi":
        m = torch.tensor(alibi_slopes(H), dtype=torch.float64)
        i = torch.arange(L, dtype=torch.float64)[:, None]
        j = torch.arange(L, dtype=torch.float64)[None, :]
        bias = -m[:, None, None] * (i - j)  # paper form; future keys are masked below
        s = q @ k.transpose(-1, -2) / math.sqrt(DH) + bias
    elif kind == "rope":
        style = case["params"].get("style", "half")
        cos, sin = rope_cos_sin(L, DH, 10000.0, style)
        q, k = rope_apply(q, cos, sin, style), rope_apply(k, cos, sin, style)
        s = q @ k.transpose(-1, -2) / math.sqrt(DH)
    elif kind == "shaw":
        km = int(case["params"]["k_max"])
        idx = shaw_index(L, L, km)
        a_k = p["pos.keys"][idx]  # [L, L, dh]
        a_v = p["pos.values"][idx]
        qs = q * DH ** -0.5
        s = qs @ k.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", qs, a_k)
    else:
        raise ValueError(kind)
    if causal:
        future = torch.arange(L)[None, :] > torch.arange(L)[:, None]
        s = s.masked_fill(future, float("-inf"))
    prob = torch.softmax(s, dim=-1)
    o = prob @ v
    if kind == "shaw":
        value_term = torch.einsum("bhij,ijd->bhid", prob, a_v)
        o = o + value_term
    o = o.transpose(1, 2).reshape(B, L, D)
    return lin("o_proj", o), prob


# ---------------------------------------------------------------- fixtures
CASES = [
    # name, relpos type, relpos position params, causal, seed
    dict(name="t5", type="t5", params={"num_buckets": "8", "max_distance": "16"}, causal=False, seed=101),
    dict(name="alibi", type="alibi", params={}, causal=True, seed=102),
    dict(name="rope", type="rope", params={}, causal=False, seed=103),
    dict(name="rope_interleaved", type="rope", params={"style": "interleaved"}, causal=False, seed=104),
    dict(name="shaw", type="shaw", params={"k_max": "2"}, causal=False, seed=105),
]


def param_shapes(case):
    shapes = {}
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        shapes[proj + ".weight"] = (D, D)
        shapes[proj + ".bias"] = (D,)
    if case["type"] == "t5":
        shapes["pos.table"] = (int(case["params"]["num_buckets"]), H)
    if case["type"] == "shaw":
        km = int(case["params"]["k_max"])
        shapes["pos.keys"] = (2 * km + 1, DH)
        shapes["pos.values"] = (2 * km + 1, DH)
    return shapes


def enc(t):
    t = t.detach().contiguous()
    return {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}


def make(case):
    g = torch.Generator().manual_seed(case["seed"])

    def randn(*shape, std=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    x = randn(B, L, D).requires_grad_(True)
    params = {}
    for name, shape in param_shapes(case).items():
        std = TABLE_STD if name.startswith("pos.") else (BIAS_STD if name.endswith(".bias") else WEIGHT_STD)
        params[name] = randn(*shape, std=std).requires_grad_(True)
    upstream = randn(B, L, D)

    y, prob = attention(x, params, case)
    y.backward(upstream)

    ent = -(prob * prob.clamp_min(1e-300).log()).sum(-1).mean().item()
    print(f"{case['name']:18s} |y|max {y.abs().max().item():.3f}  mean entropy {ent:.3f} "
          f"(uniform {math.log(L):.3f})  max P {prob.max().item():.3f}")
    return {
        "name": case["name"],
        "type": case["type"],
        "params": case["params"],
        "causal": case["causal"],
        "B": B, "L": L, "D": D, "H": H,
        "x": enc(x),
        "upstream_grad": enc(upstream),
        "output": enc(y),
        "grad_x": enc(x.grad),
        "parameters": {n: enc(t) for n, t in params.items()},
        "grads": {n: enc(t.grad) for n, t in params.items()},
    }


def self_checks():
    # T5 buckets against the reference table (num_buckets 32, max_distance 128)
    rel = torch.tensor([-200, -130, -20, -8, -1, 0, 1, 7, 8, 20, 130, 200])
    assert t5_bucket(rel, True, 32, 128).tolist() == [15, 15, 10, 8, 1, 0, 17, 23, 24, 26, 31, 31]
    assert t5_bucket(rel, False, 32, 128).tolist() == [31, 31, 17, 8, 1, 0, 0, 0, 0, 0, 0, 0]
    # ALiBi slopes: H = 8 -> 2^-1 .. 2^-8; H = 12 interleave
    assert alibi_slopes(8) == [2.0 ** -(i + 1) for i in range(8)]
    s12 = alibi_slopes(12)
    assert all(abs(a - b) < 1e-15 for a, b in zip(s12[8:], [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]))
    # RoPE: both styles give scores that depend only on m - n
    for style in ("half", "interleaved"):
        cos, sin = rope_cos_sin(20, DH, 10000.0, style)
        a, b = torch.randn(DH, dtype=torch.float64), torch.randn(DH, dtype=torch.float64)
        d1 = rope_apply(a, cos[3], sin[3], style) @ rope_apply(b, cos[0], sin[0], style)
        d2 = rope_apply(a, cos[13], sin[13], style) @ rope_apply(b, cos[10], sin[10], style)
        assert abs(d1 - d2) < 1e-12, style
    # Shaw index (t2t example is queries aligned to the last keys; self-attention here)
    assert shaw_index(3, 3, 1).tolist() == [[1, 2, 2], [0, 1, 2], [0, 0, 1]]


def main():
    torch.set_default_dtype(torch.float64)
    self_checks()
    os.makedirs(OUT_DIR, exist_ok=True)
    for case in CASES:
        fx = make(case)
        path = os.path.join(OUT_DIR, f"attention_{case['name']}.json")
        with open(path, "w") as f:
            json.dump(fx, f, indent=None, separators=(",", ":"))
            f.write("\n")
        print("wrote", os.path.relpath(path, ROOT), os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
