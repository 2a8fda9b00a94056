"""The relpos position encodings as torch modules (see docs/model.md and the header comment
of each nn/positional/*.cpp). Every module implements the subset of hooks its C++ twin does:

    embed(x, offset)                       absolute encodings, x [B, L, D]
    embed_input(x, positions, padding, offset)   the stack's call of embed (grid-aware learned)
    after_block(x, block, positions, padding)    stack hook after each block (cpe), x [B, L, D]
    rotate(x, offset), rotate_key(x, off)  rotary encodings, x [B, H, L, dh]
    score_terms(q, k, g)                   [B or 1, H, Lq, Lk], added before the score scale
    bias(g)                                [H, Lq, Lk] or [B, H, Lq, Lk], added after it (times alpha)
    value_terms(p, g)                      [B, H, Lq, dh], added to P @ V
    score_scale(head_dim)

`g` is a Geometry: Lq, Lk, q_offset, k_offset, causal, position_index, the layer's
q_proj / k_proj (DeBERTa) and the batch's token positions [B, L, P] (data.position_channels). Constant tables (sinusoids, RoPE angles) are computed in float64 and
rounded to the model dtype, as relpos does. Parameter names equal relpos's stored names.
"""
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch
from torch import nn

# ----------------------------------------------------------------------------- parameters


class Params:
    """The string parameters of model.position (everything but type and shared)."""

    def __init__(self, kv):
        self.kv = {k: str(v) for k, v in kv.items()}

    def has(self, k):
        return k in self.kv

    def int(self, k, d):
        return int(self.kv[k]) if k in self.kv else d

    def float(self, k, d):
        return float(self.kv[k]) if k in self.kv else d

    def bool(self, k, d):
        if k not in self.kv:
            return d
        s = self.kv[k]
        if s in ("true", "1", "yes"):
            return True
        if s in ("false", "0", "no"):
            return False
        raise ValueError(f"position parameter '{k}': '{s}' is not a boolean")

    def str(self, k, d):
        return self.kv.get(k, d)


@dataclass
class Geometry:
    Lq: int
    Lk: int
    q_offset: int = 0
    k_offset: int = 0
    causal: bool = False
    position_index: Optional[torch.Tensor] = None
    q_proj: Optional[Callable] = None
    k_proj: Optional[Callable] = None
    # int64 [B, L, P]: the token channels of data.position_channels (column p = channel p)
    positions: Optional[torch.Tensor] = None
    channels: tuple = ()
    distance: Optional[torch.Tensor] = None  # [B, Lq, Lk] kj - qi from a position channel (time)

    def qpos(self):
        return torch.arange(self.q_offset, self.q_offset + self.Lq, dtype=torch.int64)

    def kpos(self):
        return torch.arange(self.k_offset, self.k_offset + self.Lk, dtype=torch.int64)

    def rel(self):
        """int64 [Lq, Lk]: kj - qi (key minus query)."""
        return self.kpos()[None, :] - self.qpos()[:, None]

    def dist(self):
        """The distance a distance-indexed encoding reads: the channel's [B, Lq, Lk], else rel()."""
        return self.rel() if self.distance is None else self.distance


def softplus(u):
    # relpos: u where u > 30, else log(exp(u) + 1)
    return torch.where(u > 30, u, torch.log(torch.exp(torch.clamp(u, max=30.0)) + 1.0))


class Encoding(nn.Module):
    absolute = False
    causal_only = False
    per_layer = False  # default of model.position.shared: one instance per layer

    def score_scale(self, head_dim):
        return 1.0 / math.sqrt(head_dim)

    def embed(self, x, offset):
        return x

    def embed_input(self, x, positions, padding, offset):
        return self.embed(x, offset)

    def after_block(self, x, block, positions, padding):
        return x

    def rotate(self, x, offset):
        return x

    def rotate_key(self, x, offset):
        return self.rotate(x, offset)

    def score_terms(self, q, k, g):
        return None

    def bias(self, g):
        return None

    def value_terms(self, p, g):
        return None

    def make_layer(self):
        return None


class Ctx:
    """What an encoding is built from: sizes, params, dtype, shared_across_layers."""

    def __init__(self, d_model, n_heads, max_len, params, dtype, shared, channels=()):
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.max_len, self.p, self.dtype, self.shared = max_len, params, dtype, shared
        self.channels = list(channels)  # data.position_channels: the columns of `positions`


def grid_columns(channels):
    """(row, col) columns of the `row` / `col` channels, or None."""
    return (channels.index("row"), channels.index("col")) if "row" in channels and "col" in channels else None


def batch_grid(positions, cols, padding=None):
    """(H, W) of a batch whose examples are each a whole row-major grid (nn/positional/grid.h)."""
    r, c = positions[..., cols[0]], positions[..., cols[1]]
    real = torch.ones_like(r, dtype=torch.bool) if padding is None else padding == 0
    h, w = int(r[real].max()) + 1, int(c[real].max()) + 1
    n = real.sum(1)
    if not bool((n == h * w).all()):
        raise ValueError(f"batch grid: token counts {n.tolist()} are not one {h}x{w} grid")
    t = torch.arange(h * w)
    if not (bool((r[:, :h * w] == t // w).all()) and bool((c[:, :h * w] == t % w).all())):
        raise ValueError("batch grid: tokens are not in row-major order")
    return h, w


def resize_grid(rows, hw_in, hw_out):
    """rows [h_in w_in, C] -> [h_out w_out, C]: F.interpolate(bicubic, align_corners=False) per column."""
    if tuple(hw_in) == tuple(hw_out):
        return rows
    img = rows.T.reshape(1, rows.shape[1], hw_in[0], hw_in[1])
    out = torch.nn.functional.interpolate(img, size=tuple(hw_out), mode="bicubic", align_corners=False)
    return out.reshape(rows.shape[1], -1).T


def _param(shape, dtype):
    return nn.Parameter(torch.zeros(*shape, dtype=dtype))


# ----------------------------------------------------------------------------- encodings


class NoPE(Encoding):
    def __init__(self, c):
        super().__init__()


class Sinusoidal(Encoding):
    absolute = True

    def __init__(self, c):
        super().__init__()
        self.d, self.base = c.d_model, c.p.float("base", 10000.0)

    def embed(self, x, offset):
        L, d = x.shape[1], self.d
        pos = torch.arange(offset, offset + L, dtype=torch.float64)[:, None]
        i = torch.arange(0, (d + 1) // 2, dtype=torch.float64)
        ang = pos * torch.pow(torch.tensor(self.base, dtype=torch.float64), -2.0 * i / d)
        pe = torch.zeros(L, d, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(ang)
        pe[:, 1::2] = torch.cos(ang)[:, : d // 2]
        return x + pe.to(x.dtype)


class Learned(Encoding):
    absolute = True

    def __init__(self, c):
        super().__init__()
        self.table = _param((c.p.int("max_len", c.max_len), c.d_model), c.dtype)
        self.grid = (c.p.int("grid_h", 0), c.p.int("grid_w", 0))
        self.cols = grid_columns(c.channels)

    def embed_input(self, x, positions, padding, offset):
        if self.grid[0] == 0 or self.cols is None or positions is None:
            return self.embed(x, offset)
        h, w = batch_grid(positions, self.cols, padding)
        if (h, w) == self.grid:
            return self.embed(x, offset)
        n = h * w
        pe = resize_grid(self.table[: self.grid[0] * self.grid[1]], self.grid, (h, w))
        return torch.cat([x[:, :n] + pe[None], x[:, n:]], 1)

    def embed(self, x, offset):
        L = x.shape[1]
        if offset + L > self.table.shape[0]:
            raise ValueError(f"learned: positions {offset}..{offset + L - 1} exceed max_len {self.table.shape[0]}")
        return x + self.table[offset:offset + L]


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """rel = key - query position (int); float32 log branch as relpos and HF."""
    ret, n = 0, num_buckets
    if bidirectional:
        n //= 2
        if rel > 0:
            ret += n
        r = abs(rel)
    else:
        r = -rel if rel < 0 else 0
    max_exact = n // 2
    if r < max_exact:
        return ret + r
    f32 = np.float32
    v = (np.log(f32(r) / f32(max_exact)) / f32(math.log(max_distance / max_exact))) * f32(n - max_exact)
    return ret + min(max_exact + int(v), n - 1)


class T5(Encoding):
    def __init__(self, c):
        super().__init__()
        self.nb, self.md = c.p.int("num_buckets", 32), c.p.int("max_distance", 128)
        self.scale = c.p.bool("scale", False)
        self.table = _param((self.nb, c.n_heads), c.dtype)

    def score_scale(self, head_dim):
        return 1.0 / math.sqrt(head_dim) if self.scale else 1.0

    def bias(self, g):
        rel = g.dist()  # [Lq, Lk], or [B, Lq, Lk] from a channel
        flat = [t5_bucket(int(r), not g.causal, self.nb, self.md) for r in rel.reshape(-1).tolist()]
        idx = torch.tensor(flat, dtype=torch.int64).reshape(rel.shape)
        b = self.table[idx]  # [..., H]
        return b.permute(2, 0, 1) if rel.dim() == 2 else b.permute(0, 3, 1, 2)


def alibi_slopes(n):
    def pow2(m):
        start = 2.0 ** (-8.0 / m)
        return [start ** (i + 1) for i in range(m)]

    c = 1
    while c * 2 <= n:
        c *= 2
    if c == n:
        return pow2(n)
    extra = alibi_slopes(2 * c)
    return pow2(c) + [extra[2 * i] for i in range(n - c)]


class Alibi(Encoding):
    def __init__(self, c):
        super().__init__()
        s = torch.tensor(alibi_slopes(c.n_heads), dtype=torch.float64).to(c.dtype)
        if c.p.bool("learnable", False):
            self.slopes = nn.Parameter(s)
        else:
            self.register_buffer("slopes", s, persistent=False)

    def bias(self, g):
        d = g.rel().to(torch.float64)
        if not g.causal:
            d = -d.abs()
        return self.slopes[:, None, None] * d.to(self.slopes.dtype)[None]


def rope_inv_freq(rot_dim, base, scaling, factor, original_max_len, beta_fast, beta_slow):
    half = rot_dim // 2
    b = base * factor ** (rot_dim / (rot_dim - 2)) if scaling == "ntk" else base
    inv = [b ** (-2.0 * p / rot_dim) for p in range(half)]
    mscale = 1.0
    if scaling == "linear":
        inv = [w / factor for w in inv]
    if scaling == "yarn":
        def corr(beta):
            return rot_dim * math.log(original_max_len / (beta * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(corr(beta_fast)), 0.0)
        high = min(math.ceil(corr(beta_slow)), float(rot_dim - 1))
        if low == high:
            high += 0.001
        out = []
        for p, w in enumerate(inv):
            ramp = min(max((p - low) / (high - low), 0.0), 1.0)
            out.append((w / factor) * ramp + w * (1 - ramp))
        inv = out
        mscale = 0.1 * math.log(factor) + 1.0
    return inv, mscale


def _rotate_pairs(x, cos, sin, r, style):
    """Rotate the first r channels of x [B, H, L, dh] by angle tables cos/sin [L, r/2]."""
    half = r // 2
    B, H, L, dh = x.shape
    if style == "half":
        a, b = x[..., :half], x[..., half:r]
    else:
        xr = x[..., :r].reshape(B, H, L, half, 2)
        a, b = xr[..., 0], xr[..., 1]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    rot = torch.cat([ra, rb], -1) if style == "half" else torch.stack([ra, rb], -1).reshape(B, H, L, r)
    return rot if r == dh else torch.cat([rot, x[..., r:]], -1)


class Rope(Encoding):
    def __init__(self, c):
        super().__init__()
        p = c.p
        frac = p.float("fraction", 1.0)
        self.r = int(c.head_dim * frac) // 2 * 2
        self.style = p.str("style", "half")
        self.inv, self.mscale = rope_inv_freq(
            self.r, p.float("base", 10000.0), p.str("scaling", "none"), p.float("factor", 1.0),
            p.int("original_max_len", c.max_len if c.max_len > 0 else 2048), p.float("beta_fast", 32.0),
            p.float("beta_slow", 1.0))

    def rotate(self, x, offset):
        L = x.shape[2]
        pos = torch.arange(offset, offset + L, dtype=torch.float64)[:, None]
        ang = pos * torch.tensor(self.inv, dtype=torch.float64)[None]
        cos, sin = (torch.cos(ang) * self.mscale).to(x.dtype), (torch.sin(ang) * self.mscale).to(x.dtype)
        return _rotate_pairs(x, cos, sin, self.r, self.style)


class Shaw(Encoding):
    per_layer = True

    def __init__(self, c):
        super().__init__()
        self.k = c.p.int("k_max", 16)
        self.keys = _param((2 * self.k + 1, c.head_dim), c.dtype)
        self.values = _param((2 * self.k + 1, c.head_dim), c.dtype)

    def index(self, g):
        return torch.clamp(g.rel(), -self.k, self.k) + self.k

    def score_terms(self, q, k, g):
        rel = q @ self.keys.t()  # [B, H, Lq, 2k+1]
        idx = self.index(g).expand(q.shape[0], q.shape[1], g.Lq, g.Lk)
        return torch.gather(rel, -1, idx)

    def value_terms(self, p, g):
        idx = self.index(g).expand(p.shape[0], p.shape[1], g.Lq, g.Lk)
        w = torch.zeros(*p.shape[:-1], 2 * self.k + 1, dtype=p.dtype).scatter_add(-1, idx, p)
        return w @ self.values


class TransformerXL(Encoding):
    causal_only = True

    def __init__(self, c, part=None, uv=None):
        super().__init__()
        self.D, self.H, self.dh = c.d_model, c.n_heads, c.head_dim
        self.clamp_len = c.p.int("clamp_len", -1)
        self.c = c
        self.part = part or ("global" if c.shared else "full")
        if self.part == "layer":
            self._uv = [uv]  # the stack's shared part (registered there, not here)
        else:
            self.u = _param((self.H, self.dh), c.dtype)
            self.v = _param((self.H, self.dh), c.dtype)
            self._uv = None
        if self.part != "global":
            self.w_r = _param((self.D, self.H * self.dh), c.dtype)

    def make_layer(self):
        return TransformerXL(self.c, "layer", self) if self.part == "global" else None

    def _u_v(self):
        src = self._uv[0] if self._uv is not None else self
        return src.u, src.v

    def _clamp(self, d):
        d = torch.clamp(d, min=0)
        return torch.clamp(d, max=self.clamp_len) if self.clamp_len >= 0 else d

    def score_terms(self, q, k, g):
        u, v = self._u_v()
        H, dh, D = self.H, self.dh, self.D
        d = self._clamp(-g.rel())  # qi - kj
        lo, hi = int(d.min()), int(d.max())
        n = hi - lo + 1
        pos = torch.arange(lo, hi + 1, dtype=torch.float64)[:, None]
        w = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
        R = torch.cat([torch.sin(pos * w), torch.cos(pos * w)], -1).to(q.dtype)  # [n, D]
        r = (R @ self.w_r).reshape(n, H, dh).permute(1, 2, 0)  # [H, dh, n]
        bd_raw = (q + v.reshape(1, H, 1, dh)) @ r  # [B, H, Lq, n]
        bd = torch.gather(bd_raw, -1, (d - lo).expand(q.shape[0], q.shape[1], g.Lq, g.Lk))
        uk = (k @ u.reshape(H, dh, 1)).transpose(-1, -2)  # [B, H, 1, Lk]
        return bd + uk


class KerpleLog(Encoding):
    def __init__(self, c):
        super().__init__()
        self.r1_raw = _param((c.n_heads, 1), c.dtype)
        self.r2_raw = _param((c.n_heads, 1), c.dtype)

    def bias(self, g):
        d = g.rel().abs().to(self.r1_raw.dtype)[None]
        return -(softplus(self.r1_raw)[..., None] * torch.log(softplus(self.r2_raw)[..., None] * d + 1.0))


class KerplePower(Encoding):
    def __init__(self, c):
        super().__init__()
        self.r1_raw = _param((c.n_heads, 1), c.dtype)
        self.r2_raw = _param((c.n_heads, 1), c.dtype)

    def bias(self, g):
        a = g.rel().abs().to(torch.float64)
        keep = (a >= 1).to(self.r1_raw.dtype)[None]
        logd = torch.where(a >= 1, torch.log(torch.clamp(a, min=1.0)), torch.zeros_like(a)).to(self.r1_raw.dtype)[None]
        r2 = torch.sigmoid(self.r2_raw)[..., None] * 2.0
        return -(softplus(self.r1_raw)[..., None] * (torch.exp(r2 * logd) * keep))


class _Affine(nn.Module):
    def __init__(self, i, o, dtype):
        super().__init__()
        self.weight = _param((o, i), dtype)
        self.bias = _param((o,), dtype)


class PositionMlp(nn.ModuleList):
    """widths {in, w.., out}; stored "<i>.weight" [out, in], "<i>.bias" [out]."""

    def __init__(self, widths, act, dtype):
        super().__init__([_Affine(widths[i], widths[i + 1], dtype) for i in range(len(widths) - 1)])
        self.act = act

    def forward(self, x):
        for i, m in enumerate(self):
            x = x @ m.weight.t() + m.bias
            if i + 1 < len(self):
                x = torch.relu(x) if self.act == "relu" else torch.nn.functional.silu(x)
        return x


class Fire(Encoding):
    per_layer = True

    def __init__(self, c):
        super().__init__()
        p = c.p
        self.H, self.dh = c.n_heads, c.head_dim
        self.init_L, self.eps = p.float("init_L", 512.0), p.float("eps", 1e-6)
        self.mlp = PositionMlp([1, p.int("width", 32), c.n_heads], "relu", c.dtype)
        self.c = _param((1, 1), c.dtype)
        self.L_multiplier = _param((1, 1), c.dtype)

    def bias(self, g):  # an additive bias (scaled by alpha when bias_scale is on)
        dt = self.c.dtype
        rel = (-g.rel()).to(dt)  # qi - kj
        qv = g.qpos().to(dt)[:, None]
        num = torch.log(torch.abs(self.c * rel) + 1.0)
        thr = torch.abs(self.L_multiplier * self.init_L)
        norm = torch.where(qv > thr, qv, thr)
        den = torch.log(torch.abs(self.c * norm) + 1.0) + self.eps
        x = (num / den).reshape(g.Lq * g.Lk, 1)
        return self.mlp(x).t().reshape(self.H, g.Lq, g.Lk)


class Sandwich(Encoding):
    def __init__(self, c):
        super().__init__()
        self.H, self.dim, self.dtype = c.n_heads, c.p.int("dim", c.head_dim), c.dtype

    def bias(self, g):
        d = g.rel().to(torch.float64)
        s = torch.zeros_like(d)
        for p in range(1, self.dim // 2 + 1):
            s = s + torch.cos(d * 10000.0 ** (-2.0 * p / self.dim))
        s = s - self.dim / 2.0
        ratio = torch.tensor([(h + 1) * 8.0 / self.H for h in range(self.H)], dtype=torch.float64)
        return (s[None] / ratio[:, None, None]).to(self.dtype)


class DynamicBias(Encoding):
    def __init__(self, c):
        super().__init__()
        p = c.p
        depth, width = p.int("depth", 2), p.int("width", max(c.d_model // 4, 1))
        self.log_distance = p.bool("log_distance", False)
        self.mlp = PositionMlp([1] + [width] * depth + [c.n_heads], "silu", c.dtype)

    def bias(self, g):
        x = (-g.rel()).to(torch.float64)  # qi - kj
        if self.log_distance:
            x = torch.sign(x) * torch.log(x.abs() + 1.0)
        out = self.mlp(x.reshape(-1, 1).to(self.mlp[0].weight.dtype))  # [Lq*Lk, H]
        return out.t().reshape(-1, g.Lq, g.Lk)


class XPos(Encoding):
    causal_only = True

    def __init__(self, c):
        super().__init__()
        p = c.p
        base, self.sb, gamma = p.float("base", 10000.0), p.float("scale_base", 512.0), p.float("gamma", 0.4)
        self.style, self.dh = p.str("style", "interleaved"), c.head_dim
        f = [2.0 * i / c.head_dim for i in range(c.head_dim // 2)]
        self.inv = [base ** (-x) for x in f]
        self.zeta = [(x + gamma) / (1.0 + gamma) for x in f]

    def _xpos(self, x, offset, sign):
        L = x.shape[2]
        pos = torch.arange(offset, offset + L, dtype=torch.float64)[:, None]
        ang = pos * torch.tensor(self.inv, dtype=torch.float64)[None]
        scale = torch.pow(torch.tensor(self.zeta, dtype=torch.float64)[None], sign * pos / self.sb)
        cos, sin = (torch.cos(ang) * scale).to(x.dtype), (torch.sin(ang) * scale).to(x.dtype)
        return _rotate_pairs(x, cos, sin, self.dh, self.style)

    def rotate(self, x, offset):
        return self._xpos(x, offset, 1.0)

    def rotate_key(self, x, offset):
        return self._xpos(x, offset, -1.0)


class CoPE(Encoding):
    causal_only = True
    per_layer = True

    def __init__(self, c):
        super().__init__()
        self.npos, self.dh = c.p.int("npos_max", 16), c.head_dim
        self.table = _param((self.npos, c.head_dim), c.dtype)

    def score_terms(self, q, k, g):
        s = self.score_scale(self.dh)
        dt = q.dtype
        visible = (g.rel() <= 0).to(dt)
        gates = torch.sigmoid((q @ k.transpose(-1, -2)) * s) * visible
        t = torch.arange(g.Lk)
        upper = (t[:, None] >= t[None, :]).to(dt)  # U[t, j] = [t >= j]
        p = torch.clamp(gates @ upper, 0.0, float(self.npos - 1))
        lo, hi = torch.floor(p).detach(), torch.ceil(p).detach()
        w = p - lo
        z = q @ self.table.t()
        z_lo, z_hi = torch.gather(z, -1, lo.long()), torch.gather(z, -1, hi.long())
        return (z_lo + w * (z_hi - z_lo)) * (1.0 / s)


class Relative2D(Encoding):
    def __init__(self, c):
        super().__init__()
        self.gh, self.gw = c.p.int("grid_h", 0), c.p.int("grid_w", 0)
        self.table = _param(((2 * self.gh - 1) * (2 * self.gw - 1), c.n_heads), c.dtype)
        self.cols = grid_columns(c.channels)

    def bias(self, g):
        if g.causal:
            raise ValueError("relative_2d is encoder-only")
        if self.cols is not None and g.positions is not None and g.position_index is None:
            h, w = batch_grid(g.positions, self.cols)
            if (h, w) != (self.gh, self.gw):  # another grid: the table resized (bicubic), that grid's index
                table = resize_grid(self.table, (2 * self.gh - 1, 2 * self.gw - 1), (2 * h - 1, 2 * w - 1))
                p, r = g.qpos()[:, None], g.kpos()[None, :]
                idx = (p // w - r // w + h - 1) * (2 * w - 1) + (p % w - r % w + w - 1)
                return table[idx].permute(2, 0, 1)
        if g.position_index is not None:
            idx = g.position_index
        else:
            p, r = g.qpos()[:, None], g.kpos()[None, :]
            dh, dw = p // self.gw - r // self.gw, p % self.gw - r % self.gw
            idx = (dh + self.gh - 1) * (2 * self.gw - 1) + (dw + self.gw - 1)
        b = self.table[idx]
        return b.permute(2, 0, 1) if idx.dim() == 2 else b.permute(0, 3, 1, 2)


class GraphSPD(Encoding):
    def __init__(self, c):
        super().__init__()
        self.md = c.p.int("max_dist", 20)
        self.table = _param((self.md + 2, c.n_heads), c.dtype)

    def bias(self, g):
        if g.position_index is None:
            raise ValueError("graph_spd needs shortest-path distances (position_index)")
        t = g.position_index
        idx = torch.where(t == -1, torch.full_like(t, self.md + 1), torch.clamp(t, max=self.md))
        b = self.table[idx]
        return b.permute(2, 0, 1) if idx.dim() == 2 else b.permute(0, 3, 1, 2)


def ast_steps(parent):
    """(up, down) [L, L] of one window from its parent channel (tokens back, 0 = root), by
    walking each token's ancestor list from the virtual root above the window."""
    L = len(parent)
    paths = []
    for t in range(L):
        path, x = [t], t
        while parent[x] > 0 and x - parent[x] >= 0:
            x -= parent[x]
            path.append(x)
        paths.append([-1] + path[::-1])
    up = [[0] * L for _ in range(L)]
    down = [[0] * L for _ in range(L)]
    for i in range(L):
        for j in range(L):
            a, b, c = paths[i], paths[j], 0
            while c < min(len(a), len(b)) and a[c] == b[c]:
                c += 1
            up[i][j], down[i][j] = len(a) - c, len(b) - c
    return up, down


class Ast(Encoding):
    """Tree bias updown[min(up, K), min(down, K)] + path[min(up + down, S)] (+ a T5-bucketed
    sequential bias when seq_buckets > 0), from the 'parent' channel of g.positions."""

    def __init__(self, c):
        super().__init__()
        self.K, self.S = c.p.int("max_steps", 8), c.p.int("max_path", 16)
        self.nb, self.md = c.p.int("seq_buckets", 0), c.p.int("seq_max_distance", 128)
        self.updown = _param(((self.K + 1) ** 2, c.n_heads), c.dtype)
        self.path = _param((self.S + 1, c.n_heads), c.dtype)
        if self.nb > 0:
            self.seq = _param((self.nb, c.n_heads), c.dtype)

    def bias(self, g):
        if g.positions is None:
            raise ValueError("ast needs the parent channel (positions)")
        col = list(g.channels).index("parent") if g.channels else 0
        par = g.positions[:, :, col].tolist()
        B = len(par)
        out = []
        for b in range(B):
            up, down = ast_steps(par[b])
            rows = []
            for i in range(g.Lq):
                row = []
                for j in range(g.Lk):
                    u, d = up[g.q_offset + i][g.k_offset + j], down[g.q_offset + i][g.k_offset + j]
                    row.append(self.updown[min(u, self.K) * (self.K + 1) + min(d, self.K)] + self.path[min(u + d, self.S)])
                rows.append(torch.stack(row))
            out.append(torch.stack(rows))  # [Lq, Lk, H]
        bias = torch.stack(out).permute(0, 3, 1, 2)  # [B, H, Lq, Lk]
        if self.nb > 0:
            rel = g.rel()
            idx = torch.tensor([[t5_bucket(int(r), not g.causal, self.nb, self.md) for r in row] for row in rel.tolist()],
                               dtype=torch.int64)
            bias = bias + self.seq[idx].permute(2, 0, 1)[None]
        return bias


def deberta_log_bucket(rel, bucket_size, max_position):
    if bucket_size <= 0 or max_position <= 0:
        return rel
    mid = bucket_size // 2
    abs_pos = mid - 1 if (-mid < rel < mid) else abs(rel)
    if abs_pos <= mid:
        return rel
    f32 = np.float32
    denom = np.log(f32((max_position - 1) / mid))
    log_pos = np.ceil(np.log(f32(abs_pos) / f32(mid)) / denom * f32(mid - 1)) + f32(mid)
    return (-1 if rel < 0 else 1) * int(log_pos)


class Deberta(Encoding):
    def __init__(self, c):
        super().__init__()
        p = c.p
        self.buckets, self.max_rel = p.int("position_buckets", 256), p.int("max_relative_positions", 512)
        self.span = self.buckets if self.buckets > 0 else self.max_rel
        att = p.str("pos_att_type", "c2p|p2c")
        self.c2p, self.p2c = "c2p" in att, "p2c" in att
        self.share = p.bool("share_att_key", True)
        self.ln = p.str("norm_rel_ebd", "layer_norm") == "layer_norm"
        self.eps = p.float("layer_norm_eps", 1e-7)
        self.H, self.dh, D = c.n_heads, c.head_dim, c.d_model
        self.rel_embeddings = _param((2 * self.span, D), c.dtype)
        if self.ln:
            self.norm_weight = _param((D,), c.dtype)
            self.norm_bias = _param((D,), c.dtype)
        if not self.share:
            if self.c2p:
                self.pos_key_proj = nn.Linear(D, D, dtype=c.dtype)
            if self.p2c:
                self.pos_query_proj = nn.Linear(D, D, dtype=c.dtype)

    def score_scale(self, head_dim):
        return 1.0 / math.sqrt(head_dim * (1 + int(self.c2p) + int(self.p2c)))

    def index(self, g):
        rel = (-g.rel()).tolist()  # qi - kj
        idx = [[min(max(deberta_log_bucket(r, self.buckets, self.max_rel) + self.span, 0), 2 * self.span - 1)
                for r in row] for row in rel]
        return torch.tensor(idx, dtype=torch.int64)

    def score_terms(self, q, k, g):
        idx = self.index(g)
        lo, hi = int(idx.min()), int(idx.max())
        n = hi - lo + 1
        local = idx - lo
        P = self.rel_embeddings[lo:hi + 1]
        if self.ln:
            P = torch.nn.functional.layer_norm(P, (P.shape[-1],), self.norm_weight, self.norm_bias, self.eps)
        B = q.shape[0]

        def heads(x):
            return x.reshape(n, self.H, self.dh).transpose(0, 1)

        out = None
        if self.c2p:
            kr = heads(g.k_proj(P) if self.share else self.pos_key_proj(P))
            out = torch.gather(q @ kr.transpose(-1, -2), -1, local.expand(B, self.H, g.Lq, g.Lk))
        if self.p2c:
            qr = heads(g.q_proj(P) if self.share else self.pos_query_proj(P))
            t = torch.gather(k @ qr.transpose(-1, -2), -1, local.t().expand(B, self.H, g.Lk, g.Lq)).transpose(-1, -2)
            out = t if out is None else out + t
        return out


class MusicTransformer(Encoding):
    """Huang et al. 2018 relative keys: score term q_i . E[h, M - 1 + (kj - qi)], zero for
    |kj - qi| >= M (t2t pads its table with zeros). Written as a gather, not the skew."""
    per_layer = True

    def __init__(self, c):
        super().__init__()
        self.m = c.p.int("max_relative_position", c.max_len)
        heads = 1 if c.p.bool("heads_share", False) else c.n_heads
        self.table = _param((heads, 2 * self.m - 1, c.head_dim), c.dtype)

    def score_terms(self, q, k, g):
        d = g.rel()  # [Lq, Lk]
        inside = (d > -self.m) & (d < self.m)
        rows = torch.where(inside, d + self.m - 1, torch.zeros_like(d))
        e = self.table[:, rows]  # [heads, Lq, Lk, dh]
        out = torch.einsum("bhid,hijd->bhij", q, e.expand(q.shape[1], -1, -1, -1))
        return out * inside.to(out.dtype)


class CPE(Encoding):
    """Conditional positional encoding (PEG, Chu et al. 2021): x + DWConv_k(x on its grid) after block 0."""
    absolute = True

    def __init__(self, c):
        super().__init__()
        self.k = c.p.int("kernel", 3)
        self.conv_weight = _param((c.d_model, self.k, self.k), c.dtype)
        self.conv_bias = _param((c.d_model,), c.dtype)
        self.cols = grid_columns(c.channels)

    def after_block(self, x, block, positions, padding):
        if block != 0:
            return x
        if self.cols is None or positions is None:
            raise ValueError("cpe reads the token grid from the position channels row and col")
        h, w = batch_grid(positions, self.cols, padding)
        B, n, D = x.shape[0], h * w, x.shape[2]
        grid = x[:, :n].reshape(B, h, w, D).permute(0, 3, 1, 2)
        pe = torch.nn.functional.conv2d(grid, self.conv_weight.unsqueeze(1), self.conv_bias, padding=self.k // 2, groups=D)
        return torch.cat([x[:, :n] + pe.permute(0, 2, 3, 1).reshape(B, n, D), x[:, n:]], 1)


ENCODINGS = {
    "none": NoPE, "sinusoidal": Sinusoidal, "learned": Learned, "t5": T5, "alibi": Alibi, "rope": Rope,
    "shaw": Shaw, "transformer_xl": TransformerXL, "kerple_log": KerpleLog, "kerple_power": KerplePower,
    "fire": Fire, "sandwich": Sandwich, "dynamic_bias": DynamicBias, "xpos": XPos, "cope": CoPE,
    "relative_2d": Relative2D, "graph_spd": GraphSPD, "deberta": Deberta, "music_transformer": MusicTransformer,
    "cpe": CPE,
    "ast": Ast,
}
