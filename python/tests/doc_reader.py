#!/usr/bin/python3
"""Independent re-implementation of relpos models from model.md only.

Written from docs/model.md alone, without reading the C++ source. Kept in the tree as a
doc-drift check (python/tests/check_doc_reader.py): if the model changes and
docs/model.md does not, this reader stops reproducing `relpos eval` and the check fails.

Usage:
  /usr/bin/python3 doc_reader.py RUN_DIR            # print my eval loss for a run
  /usr/bin/python3 doc_reader.py --compare runs/*   # table vs `relpos eval --json`, rc!=0 if any |diff|>1e-5
The relpos binary is $RELPOS_BIN (default ./relpos).

Everything that model.md does not state is marked GUESS below.
"""
import glob, json, math, os, struct, subprocess, sys
from collections import deque

import numpy as np
import torch
import yaml

DT = torch.float64
M64 = (1 << 64) - 1

# ---------------------------------------------------------------- safetensors
_ST_DT = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def load_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        a = np.frombuffer(b[base + s:base + e], dtype=_ST_DT[v["dtype"]]).reshape(v["shape"])
        out[k] = torch.from_numpy(a.astype(np.float64) if a.dtype.kind == "f" else a.copy())
    return out, hdr.get("__metadata__", {})


# ---------------------------------------------------------------- generator
def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Generator:
    def __init__(self, seed):
        self.base = splitmix64((seed ^ 0x5851F42D4C957F2D) & M64)
        self.n = 0  # GUESS: draws are numbered from 0

    def draw(self):
        r = splitmix64((self.base + self.n * 0xD1B54A32D192ED03) & M64)
        self.n += 1
        return r

    def uniform(self):
        return (self.draw() >> 11) * 2.0 ** -53


# ---------------------------------------------------------------- helpers
def f32(x):
    """round a float64 tensor to float32 and back (constant tables)."""
    return torch.as_tensor(x, dtype=torch.float64).to(torch.float32).to(DT)


def softplus(u):
    return torch.where(u > 30, u, torch.log1p(torch.exp(torch.clamp(u, max=30))))


def layernorm(x, w, b, eps=1e-5):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * w + b


def linear(x, W, prefix, bias=True):
    y = x @ W[prefix + ".weight"].T
    if bias and (prefix + ".bias") in W:
        y = y + W[prefix + ".bias"]
    return y


def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    rel = np.asarray(rel, dtype=np.int64)
    out = np.zeros_like(rel)
    if bidirectional:
        n = num_buckets // 2
        out += np.where(rel > 0, n, 0)
        r = np.abs(rel)
    else:
        n = num_buckets
        r = np.maximum(-rel, 0)
    half = n // 2
    with np.errstate(divide="ignore"):
        lg = (np.log(r.astype(np.float32) / np.float32(half)) /
              np.log(np.float32(max_distance) / np.float32(half)) * np.float32(n - half)).astype(np.float32)
    lg = np.where(r < half, 0, lg)
    large = half + lg.astype(np.int64)
    large = np.minimum(large, n - 1)
    out += np.where(r < half, r, large)
    return out


def alibi_slopes(H):
    def pow2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]
    if H & (H - 1) == 0:
        s = pow2(H)
    else:
        c = 1 << (H.bit_length() - 1)
        s = pow2(c) + pow2(2 * c)[0::2][:H - c]
    return f32(torch.tensor(s, dtype=torch.float64))


def deberta_bucket(rel, buckets, max_rel):
    rel = np.asarray(rel, dtype=np.int64)
    if buckets <= 0:
        return rel
    mid = buckets // 2
    a = np.abs(rel).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.ceil(np.log(a / np.float32(mid)) / np.log(np.float32(max_rel - 1) / np.float32(mid))
                     * np.float32(mid - 1)).astype(np.float32)
    lg = np.where(np.abs(rel) <= mid, 0, lg).astype(np.int64)
    return np.where(np.abs(rel) <= mid, rel, np.sign(rel) * (mid + lg))


# ---------------------------------------------------------------- position encodings
class Pos:
    """one position-encoding instance; `pre` = tensor-name prefix (ends with '.')."""

    def __init__(self, kind, cfg, W, pre, H, D, dh, causal, max_len, stack_pre=None):
        self.kind, self.cfg, self.W, self.pre = kind, cfg, W, pre
        self.H, self.D, self.dh, self.causal, self.max_len = H, D, dh, causal, max_len
        self.stack_pre = stack_pre

    def p(self, name):
        return self.W[self.pre + name]

    # --- absolute
    def embed(self, x, offset=0):
        L = x.shape[1]
        if self.kind == "sinusoidal":
            base = float(self.cfg.get("base", 10000))
            pos = torch.arange(offset, offset + L, dtype=torch.float64)[:, None]
            i = torch.arange(0, self.D // 2, dtype=torch.float64)
            ang = pos * base ** (-2 * i / self.D)
            pe = torch.zeros(L, self.D, dtype=torch.float64)
            pe[:, 0::2] = torch.sin(ang)
            pe[:, 1::2] = torch.cos(ang)
            return x + f32(pe)
        if self.kind == "learned":
            return x + self.p("table")[offset:offset + L]
        return x

    def scale(self):
        if self.kind == "t5":
            return 1.0 / math.sqrt(self.dh) if self.cfg.get("scale", False) else 1.0
        if self.kind == "deberta":
            att = self.cfg.get("pos_att_type", "c2p|p2c")  # GUESS key name/default
            nterms = len([t for t in str(att).split("|") if t])
            return 1.0 / math.sqrt(self.dh * (1 + nterms))
        return 1.0 / math.sqrt(self.dh)

    # --- rotations
    def _rope_tables(self, pos, r, base):
        inv = f32(base ** (-2 * torch.arange(r // 2, dtype=torch.float64) / r))
        ang = pos.to(torch.float64)[:, None] * (base ** (-2 * torch.arange(r // 2, dtype=torch.float64) / r))[None]
        return f32(torch.cos(ang)), f32(torch.sin(ang))

    def _rotate(self, x, offset, key):
        if self.kind not in ("rope", "xpos"):
            return x
        L = x.shape[2]
        pos = torch.arange(offset, offset + L)
        base = float(self.cfg.get("base", 10000))
        if self.kind == "rope":
            frac = float(self.cfg.get("fraction", 1.0))
            r = int(math.floor(frac * self.dh / 2)) * 2
            style = self.cfg.get("style", "half")
        else:
            r = self.dh
            style = self.cfg.get("style", "interleaved")
        cos, sin = self._rope_tables(pos, r, base)
        if style == "half":
            ia = torch.arange(r // 2); ib = ia + r // 2
        else:
            ia = torch.arange(r // 2) * 2; ib = ia + 1
        a, b = x[..., ia], x[..., ib]
        na = a * cos - b * sin
        nb = a * sin + b * cos
        if self.kind == "xpos":
            gamma = float(self.cfg.get("gamma", 0.4))  # GUESS default
            sb = float(self.cfg.get("scale_base", 512))  # GUESS default
            p = torch.arange(r // 2, dtype=torch.float64)
            zeta = (2 * p / self.dh + gamma) / (1 + gamma)
            ex = pos.to(torch.float64)[:, None] / sb
            sc = zeta[None] ** (-ex if key else ex)
            sc = f32(sc)
            na = na * sc; nb = nb * sc
        out = x.clone()
        out[..., ia] = na
        out[..., ib] = nb
        return out

    def rotate(self, q, off):
        return self._rotate(q, off, False)

    def rotate_key(self, k, off):
        return self._rotate(k, off, True)

    # --- score terms (inside s), returns [B,H,Lq,Lk] or None; qi/kj absolute positions
    def score_terms(self, q, k, qi, kj, s, layer, mask):
        kind = self.kind
        rel = kj[None, :] - qi[:, None]
        if kind == "shaw":
            kmax = int(self.cfg.get("k_max", (self.p("keys").shape[0] - 1) // 2))
            c = torch.clamp(rel, -kmax, kmax) + kmax
            keys = self.p("keys")[c]  # [Lq,Lk,dh]
            return torch.einsum("bhid,ijd->bhij", q, keys)
        if kind == "transformer_xl":
            u = self.W[self.stack_pre + "pos.u"] if (self.stack_pre + "pos.u") in self.W else self.p("u")
            v = self.W[self.stack_pre + "pos.v"] if (self.stack_pre + "pos.v") in self.W else self.p("v")
            wr = self.p("w_r")  # [D, H dh]
            delta = torch.clamp(qi[:, None] - kj[None, :], min=0)
            cl = int(self.cfg.get("clamp_len", -1))  # GUESS default
            if cl >= 0:
                delta = torch.clamp(delta, max=cl)
            maxd = int(delta.max()) + 1
            w = 10000.0 ** (-2 * torch.arange(self.D // 2, dtype=torch.float64) / self.D)
            dd = torch.arange(maxd, dtype=torch.float64)[:, None] * w[None]
            R = f32(torch.cat([torch.sin(dd), torch.cos(dd)], -1))  # [maxd, D]
            r = (R @ wr).view(maxd, self.H, self.dh).permute(1, 0, 2)  # [H, maxd, dh]
            t1 = torch.einsum("hd,bhjd->bhj", u, k)[:, :, None, :]
            rr = r[:, delta]  # [H, Lq, Lk, dh]
            t2 = torch.einsum("bhid,hijd->bhij", q + v[None, :, None, :], rr)
            return t1 + t2
        if kind == "fire":
            c = self.p("c").reshape(())
            Lm = self.p("L_multiplier").reshape(())
            init_L = float(self.cfg.get("init_L", FIRE_INIT_L if FIRE_INIT_L else self.max_len))
            eps = float(self.cfg.get("eps", FIRE_EPS))
            Lthr = torch.abs(Lm * init_L)
            qf = qi.to(DT)
            psi = lambda z: torch.log(torch.abs(c * z) + 1)
            num = psi((qi[:, None] - kj[None, :]).to(DT))
            den = psi(torch.maximum(qf, Lthr.expand_as(qf))) + eps
            x = (num / den[:, None])[..., None]
            h = torch.relu(linear(x, self.W, self.pre + "mlp.0"))
            o = linear(h, self.W, self.pre + "mlp.1")  # [Lq,Lk,H]
            return (o.permute(2, 0, 1) / s)[None]
        if kind == "cope":
            table = self.p("table")  # [npos, dh]
            npos = table.shape[0]
            logits = s * (q @ k.transpose(-1, -2))
            g = torch.sigmoid(logits)
            g = g.masked_fill(mask, 0.0)
            # p_ij = sum_{t=j..i} g_it (reverse cumsum along keys)
            pcum = torch.flip(torch.cumsum(torch.flip(g, [-1]), -1), [-1])
            pcum = torch.clamp(pcum, max=npos - 1)
            z = q @ table.T  # [B,H,Lq,npos]
            lo = torch.floor(pcum).long(); hi = torch.ceil(pcum).long()
            wgt = pcum - torch.floor(pcum)
            zlo = torch.gather(z, -1, lo); zhi = torch.gather(z, -1, hi)
            return (zlo + wgt * (zhi - zlo)) / s
        if kind == "deberta":
            buckets = int(self.cfg.get("position_buckets", 256))
            maxrel = int(self.cfg.get("max_relative_positions", 512))
            span = buckets if buckets > 0 else maxrel
            sp = self.stack_pre + "pos." if (self.stack_pre + "pos.rel_embeddings") in self.W else self.pre
            Wp = self.W
            P = Wp[sp + "rel_embeddings"][:2 * span]
            if (sp + "norm_weight") in Wp:
                P = layernorm(P, Wp[sp + "norm_weight"], Wp[sp + "norm_bias"], 1e-7)
            lp = layer
            if (sp + "pos_key_proj.weight") in Wp:
                Kr = linear(P, Wp, sp + "pos_key_proj"); Qr = linear(P, Wp, sp + "pos_query_proj")
            else:
                Kr = linear(P, Wp, lp + "k_proj"); Qr = linear(P, Wp, lp + "q_proj")
            Kr = Kr.view(2 * span, self.H, self.dh).permute(1, 0, 2)
            Qr = Qr.view(2 * span, self.H, self.dh).permute(1, 0, 2)
            relq = (qi[:, None] - kj[None, :]).numpy()
            c = torch.from_numpy(np.clip(deberta_bucket(relq, buckets, maxrel) + span, 0, 2 * span - 1))
            c2p = torch.gather(torch.einsum("bhid,hrd->bhir", q, Kr), -1,
                               c[None, None].expand(q.shape[0], self.H, -1, -1))
            p2c_full = torch.einsum("bhjd,hrd->bhjr", k, Qr)  # [B,H,Lk,2span]
            ct = c.T  # [Lk, Lq]
            p2c = torch.gather(p2c_full, -1, ct[None, None].expand(q.shape[0], self.H, -1, -1)).transpose(-1, -2)
            return c2p + p2c
        return None

    # --- additive biases [H,Lq,Lk] or [B,H,Lq,Lk]
    def bias(self, qi, kj, batch):
        kind = self.kind
        rel = kj[None, :] - qi[:, None]
        d = rel.abs().to(DT)
        H = self.H
        if kind == "t5":
            nb = int(self.cfg.get("num_buckets", self.p("table").shape[0]))
            md = int(self.cfg.get("max_distance", 128))  # GUESS default
            b = torch.from_numpy(t5_bucket(rel.numpy(), not self.causal, nb, md))
            return self.p("table")[b].permute(2, 0, 1)
        if kind == "alibi":
            if (self.pre + "slopes") in self.W:
                m = self.p("slopes").reshape(H)
            else:
                m = alibi_slopes(H)
            if self.causal:
                return m[:, None, None] * rel.to(DT)[None]
            return -m[:, None, None] * d[None]
        if kind == "kerple_log":
            r1 = softplus(self.p("r1_raw")).reshape(H, 1, 1)
            r2 = softplus(self.p("r2_raw")).reshape(H, 1, 1)
            return -r1 * torch.log(1 + r2 * d[None])
        if kind == "kerple_power":
            r1 = softplus(self.p("r1_raw")).reshape(H, 1, 1)
            r2 = torch.sigmoid(self.p("r2_raw")).reshape(H, 1, 1)
            out = -r1 * torch.pow(d[None], 2 * r2)
            return torch.where(d[None] == 0, torch.zeros_like(out), out)
        if kind == "sandwich":
            dp = int(self.cfg.get("dim", self.dh))
            pp = torch.arange(1, dp // 2 + 1, dtype=torch.float64)
            ang = rel.to(torch.float64)[..., None] * (10000.0 ** (-2 * pp / dp))
            s = torch.cos(ang).sum(-1) - dp / 2
            h = torch.arange(H, dtype=torch.float64)
            return f32(s[None] / ((h + 1) * 8 / H)[:, None, None])
        if kind == "dynamic_bias":
            x = (qi[:, None] - kj[None, :]).to(DT)
            if self.cfg.get("log_distance", DYN_LOG):
                x = torch.sign(x) * torch.log(x.abs() + 1)
            h = x[..., None]
            i = 0
            while (self.pre + f"mlp.{i+1}.weight") in self.W:
                h = torch.nn.functional.silu(linear(h, self.W, self.pre + f"mlp.{i}"))
                i += 1
            h = linear(h, self.W, self.pre + f"mlp.{i}")
            return h.permute(2, 0, 1)
        if kind == "relative_2d":
            gh = int(self.cfg["grid_h"]); gw = int(self.cfg["grid_w"])
            dhp = torch.div(qi[:, None], gw, rounding_mode="floor") - torch.div(kj[None, :], gw, rounding_mode="floor")
            dwp = qi[:, None] % gw - kj[None, :] % gw
            idx = (dhp + gh - 1) * (2 * gw - 1) + dwp + gw - 1
            return self.p("table")[idx].permute(2, 0, 1)
        if kind == "graph_spd":
            md = int(self.cfg.get("max_dist", self.p("table").shape[0] - 2))
            spd = batch["position_index"]  # [B,L,L]
            row = torch.where(spd < 0, torch.full_like(spd, md + 1), torch.clamp(spd, max=md))
            return self.p("table")[row].permute(0, 3, 1, 2)
        return None

    def value_terms(self, P, qi, kj):
        if self.kind != "shaw":
            return None
        vals = self.p("values")
        kmax = (vals.shape[0] - 1) // 2
        rel = kj[None, :] - qi[:, None]
        c = torch.clamp(rel, -kmax, kmax) + kmax
        return torch.einsum("bhij,ijd->bhid", P, vals[c])


FIRE_INIT_L = 512.0  # GUESS (FIRE paper default); None -> model.max_len
FIRE_EPS = 1e-6      # GUESS (FIRE paper default)
DYN_LOG = False
QK_NORM_BEFORE_ROT = True  # found by experiment: per-head norm over dh, before RoPE
SOFTCAP_BEFORE_BIAS = False  # found by experiment: cap*tanh(S/cap) after the bias, before the mask      # GUESS: dynamic_bias.log_distance default


# ---------------------------------------------------------------- model
class Model:
    def __init__(self, cfg, W):
        self.cfg, self.W = cfg, W
        m = cfg["model"]
        self.kind = m.get("kind", "decoder")
        self.D = int(m["d_model"]); self.H = int(m["n_heads"]); self.dh = self.D // self.H
        self.nl = int(m["n_layers"])
        self.norm_kind = m.get("norm", "pre")  # pre/post
        self.normtype = m.get("norm_type", None)
        pos = dict(m.get("position", {}) or {})
        self.pkind = pos.get("type", "none")
        self.pcfg = pos
        default_shared = self.pkind not in ("shaw", "fire", "cope")
        self.shared = bool(pos.get("shared", default_shared))
        self.max_len = int(pos.get("max_len", m.get("max_len", 256)))
        bs = m.get("bias_scale", {}) or {}
        self.bs_enabled = bool(bs.get("enabled", False))
        self.bs_init = float(bs.get("init", 1.0))

    def norm(self, x, pre):
        if pre + ".ln.weight" in self.W:
            return layernorm(x, self.W[pre + ".ln.weight"], self.W[pre + ".ln.bias"])
        if pre + ".rms.weight" in self.W:
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.W[pre + ".rms.weight"]
        raise KeyError(pre)

    def make_pos(self, sp, layer, causal):
        absolute = self.pkind in ("sinusoidal", "learned")
        if absolute:
            return Pos("none", {}, self.W, sp + "pos.", self.H, self.D, self.dh, causal, self.max_len, sp)
        if self.shared and self.pkind != "transformer_xl":
            pre = sp + "pos."
        else:
            pre = sp + f"layers.{layer}.attn.pos."
        return Pos(self.pkind, self.pcfg, self.W, pre, self.H, self.D, self.dh, causal, self.max_len, sp)

    def attention(self, lp, xq, xkv, pos, causal, key_pad, batch, use_pos=True, use_bs=True):
        B, Lq, D = xq.shape
        Lk = xkv.shape[1]
        H, dh = self.H, self.dh
        q = linear(xq, self.W, lp + "q_proj").view(B, Lq, H, dh).transpose(1, 2)
        k = linear(xkv, self.W, lp + "k_proj").view(B, Lk, H, dh).transpose(1, 2)
        v = linear(xkv, self.W, lp + "v_proj").view(B, Lk, H, dh).transpose(1, 2)
        qi = torch.arange(Lq); kj = torch.arange(Lk)
        mask = torch.zeros(Lq, Lk, dtype=torch.bool)
        if causal:
            mask = kj[None, :] > qi[:, None]
        mask = mask[None, None].expand(B, 1, Lq, Lk)
        if key_pad is not None:
            mask = mask | key_pad[:, None, None, :].bool()
        # UNDOCUMENTED in model.md: model.qk_norm -> <attn>.q_norm.* / k_norm.* over dh (GUESS: before rotation)
        if QK_NORM_BEFORE_ROT and (lp + "q_norm.ln.weight" in self.W or lp + "q_norm.rms.weight" in self.W):
            q = self.norm(q, lp + "q_norm"); k = self.norm(k, lp + "k_norm")
        if use_pos:
            q = pos.rotate(q, 0); k = pos.rotate_key(k, 0)
        if not QK_NORM_BEFORE_ROT and (lp + "q_norm.ln.weight" in self.W or lp + "q_norm.rms.weight" in self.W):
            q = self.norm(q, lp + "q_norm"); k = self.norm(k, lp + "k_norm")
        if use_pos:
            s = pos.scale()
            term = pos.score_terms(q, k, qi, kj, s, lp, mask)
        else:
            s = 1.0 / math.sqrt(dh); term = None
        S = q @ k.transpose(-1, -2)
        if term is not None:
            S = S + term
        S = s * S
        cap = float(self.cfg["model"].get("attn_softcap", 0) or 0)  # UNDOCUMENTED in model.md
        if cap > 0 and SOFTCAP_BEFORE_BIAS:
            S = cap * torch.tanh(S / cap)
        if use_pos:
            b = pos.bias(qi, kj, batch)
            if b is not None:
                if b.dim() == 3:
                    b = b[None]
                alpha = 1.0
                if use_bs and self.bs_enabled:
                    alpha = self.W.get(lp + "bias_scale", None)
                    alpha = alpha.reshape(1, -1, 1, 1) if alpha is not None else self.bs_init
                S = S + alpha * b
        if cap > 0 and not SOFTCAP_BEFORE_BIAS:
            S = cap * torch.tanh(S / cap)
        S = S.masked_fill(mask, float("-inf"))
        P = torch.softmax(S, -1)
        O = P @ v
        if use_pos:
            vt = pos.value_terms(P, qi, kj)
            if vt is not None:
                O = O + vt
        O = O.transpose(1, 2).reshape(B, Lq, D)
        return linear(O, self.W, lp + "o_proj")

    def mlp(self, x, lp):
        return linear(gelu(linear(x, self.W, lp + "fc1")), self.W, lp + "fc2")

    def stack(self, sp, tokens, causal, key_pad=None, memory=None, mem_pad=None, batch=None):
        W = self.W
        x = W[sp + "embed.weight"][tokens]
        if self.pkind in ("sinusoidal", "learned"):
            ap = Pos(self.pkind, self.pcfg, W, sp + "pos.", self.H, self.D, self.dh, causal, self.max_len, sp)
            x = ap.embed(x, 0)
        pre = self.norm_kind == "pre"
        for i in range(self.nl):
            lp = f"{sp}layers.{i}."
            pos = self.make_pos(sp, i, causal)
            if pre:
                x = x + self.attention(lp + "attn.", self.norm(x, lp + "norm1"), self.norm(x, lp + "norm1"),
                                       pos, causal, key_pad, batch)
                if memory is not None:
                    h = self.norm(x, lp + "norm_cross")
                    x = x + self.attention(lp + "cross_attn.", h, memory, None, False, mem_pad, batch,
                                           use_pos=False)
                x = x + self.mlp(self.norm(x, lp + "norm2"), lp + "mlp.")
            else:
                x = self.norm(x + self.attention(lp + "attn.", x, x, pos, causal, key_pad, batch), lp + "norm1")
                if memory is not None:
                    x = self.norm(x + self.attention(lp + "cross_attn.", x, memory, None, False, mem_pad, batch,
                                                     use_pos=False), lp + "norm_cross")
                x = self.norm(x + self.mlp(x, lp + "mlp."), lp + "norm2")
        if pre:
            x = self.norm(x, sp + "norm")
        return x

    def logits(self, batch):
        if self.kind == "decoder":
            h = self.stack("stack.", batch["input"], True, batch=batch)
        elif self.kind == "encoder":
            h = self.stack("stack.", batch["input"], False, key_pad=batch.get("pad"), batch=batch)
        else:
            mem = self.stack("encoder.", batch["src"], False, key_pad=batch.get("src_pad"), batch=batch)
            h = self.stack("decoder.", batch["input"], True, memory=mem, mem_pad=batch.get("src_pad"), batch=batch)
        return h @ self.W["head.weight"].T


# ---------------------------------------------------------------- eval data
def text_batches(cfg, run_dir, vocab, seq_len=None):
    d = cfg["data"]
    path = d["path"]
    cands = [path, os.path.join(run_dir, path), os.path.join(os.path.dirname(os.path.abspath(__file__)), path)]
    path = next(p for p in cands if os.path.exists(p))
    with open(path, "r", encoding="utf-8", newline="") as f:
        text = f.read()
    if vocab is None:
        vocab = sorted(set(text))
    idx = {c: i for i, c in enumerate(vocab)}
    ids = np.array([idx[c] for c in text], dtype=np.int64)
    n = len(ids)
    vf = float(d.get("val_fraction", 0.1))  # GUESS default 0.1
    n_train = int(n * (1 - vf))
    L = int(seq_len or d["seq_len"]); B = int(d["batch_size"])
    for i in range(int(cfg["train"].get("eval_batches", 10))):
        g = Generator(0x5EED0000 + i)
        X = []; Y = []
        for b in range(B):
            s = n_train + g.draw() % (n - n_train - L - 1)
            X.append(ids[s:s + L]); Y.append(ids[s + 1:s + L + 1])
        yield {"input": torch.tensor(np.array(X)), "target": torch.tensor(np.array(Y))}


def bfs_all(adj, L):
    dist = np.full((L, L), -1, dtype=np.int64)
    for s in range(L):
        dist[s, s] = 0
        dq = deque([s])
        while dq:
            u = dq.popleft()
            for w in adj[u]:
                if dist[s, w] < 0:
                    dist[s, w] = dist[s, u] + 1
                    dq.append(w)
    return dist


def structured_batches(cfg):
    d = cfg["data"]; task = d["task"]
    B = int(d["batch_size"])
    nb = int(cfg["train"].get("eval_batches", 10))
    Vs = int(d.get("vocab_size", 0))
    for i in range(nb):
        g = Generator(0x57A7000 + i)
        X = []; Y = []; PI = []
        for b in range(B):
            if task == "patch_grid":
                gh, gw = int(d["grid_h"]), int(d["grid_w"])
                x = [4 + g.draw() % Vs for _ in range(gh * gw)]
                y = [x[((r + 1) % gh) * gw + c] for r in range(gh) for c in range(gw)]
            else:  # graph
                L = int(d["seq_len"]); ep = float(d["edge_prob"])
                adj = [[] for _ in range(L)]
                for u in range(L):
                    for v in range(u + 1, L):
                        if g.uniform() < ep:
                            adj[u].append(v); adj[v].append(u)
                dist = bfs_all(adj, L)
                x = [4] + [5] * (L - 1)
                y = [4 + Vs - 1 if dist[j, 0] < 0 else 4 + min(int(dist[j, 0]), Vs - 2) for j in range(L)]
                PI.append(dist)
            X.append(x); Y.append(y)
        bt = {"input": torch.tensor(X), "target": torch.tensor(Y),
              "pad": torch.zeros(len(X), len(X[0]), dtype=torch.bool)}
        if PI:
            bt["position_index"] = torch.tensor(np.array(PI))
        yield bt


def seq_task_batches(cfg, kind, seq_len=None):
    d = cfg["data"]; task = d["task"]
    B = int(d["batch_size"]); n = int(seq_len or d["seq_len"])  # GUESS: eval length n = data.seq_len
    Vs = int(d["vocab_size"])
    nb = int(cfg["train"].get("eval_batches", 10))
    for i in range(nb):
        g = Generator(0xE7A10000 + i)
        rows = []
        for b in range(B):
            x = [4 + g.draw() % Vs for _ in range(n)]
            if task == "copy":
                y = list(x)
            elif task == "reverse":
                y = x[::-1]
            elif task == "sort":
                y = sorted(x)
            else:
                raise NotImplementedError(task + " (layout only in trainers/data/tasks.cpp header)")
            rows.append((x, y))
        if kind == "decoder":
            inp = []; tgt = []
            for x, y in rows:
                seq = [1] + x + [2] + y + [3]
                t = [-100] * (len(seq) - 1)
                for p in range(n + 1, 2 * n + 2):
                    t[p] = seq[p + 1]
                inp.append(seq[:-1]); tgt.append(t)
            yield {"input": torch.tensor(inp), "target": torch.tensor(tgt)}
        elif kind == "encoder":
            yield {"input": torch.tensor([x for x, _ in rows]), "target": torch.tensor([y for _, y in rows]),
                   "pad": torch.zeros(B, n, dtype=torch.bool)}
        else:
            yield {"src": torch.tensor([x for x, _ in rows]), "src_pad": torch.zeros(B, n, dtype=torch.bool),
                   "input": torch.tensor([[1] + y for _, y in rows]),
                   "target": torch.tensor([y + [3] for _, y in rows])}


# ---------------------------------------------------------------- run loading / eval
def latest_ckpt(run_dir):
    if os.path.exists(os.path.join(run_dir, "model.safetensors")):
        return run_dir
    cks = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step_*")))
    return cks[-1]


def evaluate(run_dir, seq_len=None):
    ck = latest_ckpt(run_dir)
    W, meta = load_safetensors(os.path.join(ck, "model.safetensors"))
    st = json.load(open(os.path.join(ck, "trainer_state.json")))
    cfg_path = os.path.join(run_dir, "config.yaml")
    cfg = yaml.safe_load(open(cfg_path)) if os.path.exists(cfg_path) else yaml.safe_load(st["config_yaml"])
    model = Model(cfg, W)
    task = cfg["data"].get("task", "text")
    if task == "text":
        batches = text_batches(cfg, run_dir, st.get("vocab"), seq_len)
    elif task in ("patch_grid", "graph"):
        batches = structured_batches(cfg)
    else:
        batches = seq_task_batches(cfg, model.kind, seq_len)
    tot = 0.0; ntok = 0; bl = []
    with torch.no_grad():
        for bt in batches:
            lg = model.logits(bt)
            t = bt["target"]
            ce = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), t.reshape(-1),
                                                   ignore_index=-100, reduction="sum")
            k = int((t != -100).sum())
            tot += float(ce); ntok += k; bl.append(float(ce) / k)
    return tot / ntok, sum(bl) / len(bl), ntok


def relpos_eval(run_dir, seq_len=None):
    binp = os.environ.get("RELPOS_BIN", "./relpos")
    out = subprocess.run([binp, "--threads", "1", "eval", run_dir, "--json"] + (["--seq-len", str(seq_len)] if seq_len else []), capture_output=True, text=True,
                         check=True).stdout
    js = json.loads(out)
    return js[0]["loss"], js[0]["tokens"]


def main(argv):
    if argv and argv[0] == "--compare":
        runs = [r for r in argv[1:] if os.path.isdir(r)]
        bad = 0
        print(f"{'run':32s} {'relpos eval':>14s} {'reader.py':>14s} {'|diff|':>10s} ok")
        for r in runs:
            try:
                ref, rtok = relpos_eval(r)
                mine, _, ntok = evaluate(r)
                diff = abs(ref - mine)
                ok = diff <= 1e-6 and rtok == ntok
                print(f"{os.path.basename(r.rstrip('/')):32s} {ref:14.8f} {mine:14.8f} {diff:10.2e} {'yes' if ok else 'NO'}"
                      + ("" if rtok == ntok else f" (tokens {ntok} vs {rtok})"))
            except Exception as e:  # noqa
                ok = False
                print(f"{os.path.basename(r.rstrip('/')):32s} ERROR {type(e).__name__}: {e}")
            bad += not ok
        sys.exit(1 if bad else 0)
    for r in argv:
        mine, per_batch, ntok = evaluate(r)
        print(r, mine, per_batch, ntok)


if __name__ == "__main__":
    main(sys.argv[1:])
