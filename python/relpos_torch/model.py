"""relpos models (decoder / encoder / encoder_decoder) as torch modules whose state_dict
names and shapes equal relpos's model.safetensors (docs/model.md)."""
import math

import torch
from torch import nn
from torch.nn import functional as F

from .positional import ENCODINGS, Ctx, Geometry, Params

# ----------------------------------------------------------------------------- config

MODEL_DEFAULTS = {
    "kind": "decoder", "d_model": 128, "n_layers": 2, "n_heads": 4, "d_ff": None, "dropout": 0.0,
    "norm": "pre", "norm_type": "layernorm", "max_len": 512,
}


class ModelConfig:
    """model: section of a relpos config (strings as YAML scalars, defaults as docs/config.md)."""

    def __init__(self, section, vocab):
        s = dict(section or {})
        self.kind = s.get("kind", "decoder")
        self.d_model = int(s.get("d_model", 128))
        self.n_layers = int(s.get("n_layers", 2))
        self.n_heads = int(s.get("n_heads", 4))
        self.d_ff = int(s.get("d_ff", 4 * self.d_model))
        self.dropout = float(s.get("dropout", 0.0))
        self.norm = s.get("norm", "pre")
        self.norm_type = s.get("norm_type", "layernorm")
        self.max_len = int(s.get("max_len", 512))
        self.qk_norm = s.get("qk_norm", "none")  # none | layernorm | rmsnorm (self-attention only)
        self.attn_softcap = float(s.get("attn_softcap", 0.0))  # 0 = off (self-attention only)
        if self.qk_norm not in ("none", "layernorm", "rmsnorm"):
            raise ValueError(f"model.qk_norm: expected none, layernorm or rmsnorm, got '{self.qk_norm}'")
        if self.attn_softcap < 0 or not math.isfinite(self.attn_softcap):
            raise ValueError(f"model.attn_softcap: expected a finite value >= 0, got {self.attn_softcap}")
        pos = dict(s.get("position", {}) or {})
        self.position = pos.pop("type", "none")
        shared = pos.pop("shared", None)
        self.position_shared = None if shared is None else str(shared) in ("true", "True", "1", "yes")
        self.position_params = Params(pos)
        # model.position.distance: "index" or a channel of position_channels (data.position_channels)
        self.position_distance = self.position_params.str("distance", "index")
        ch = s.get("position_channels", [])
        self.position_channels = [c for c in ch.split(",") if c] if isinstance(ch, str) else list(ch or [])
        bs = dict(s.get("bias_scale", {}) or {})

        def b(k, d):
            return str(bs[k]) in ("true", "True", "1", "yes") if k in bs else d

        self.bias_enabled = b("enabled", False)
        self.bias_learnable = b("learnable", True)
        self.bias_init = float(bs.get("init", 1.0))
        self.bias_per_head = b("per_head", False)
        self.vocab = vocab
        self.dtype = torch.float32


# ----------------------------------------------------------------------------- layers


class _LN(nn.Module):
    def __init__(self, d, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(d, dtype=dtype))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)


class _RMS(nn.Module):
    def __init__(self, d, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, dtype=dtype))

    def forward(self, x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight


class Norm(nn.Module):
    """stored as <name>.ln.{weight,bias} (layernorm) or <name>.rms.weight (rmsnorm)."""

    def __init__(self, kind, d, dtype):
        super().__init__()
        if kind == "layernorm":
            self.ln = _LN(d, dtype)
        else:
            self.rms = _RMS(d, dtype)

    def forward(self, x):
        return self.ln(x) if hasattr(self, "ln") else self.rms(x)


class MLP(nn.Module):
    def __init__(self, d, f, dropout, dtype):
        super().__init__()
        self.fc1 = nn.Linear(d, f, dtype=dtype)
        self.fc2 = nn.Linear(f, d, dtype=dtype)
        self.p = dropout

    def forward(self, x):
        return self.fc2(F.dropout(F.gelu(self.fc1(x)), self.p, self.training))


class Attention(nn.Module):
    """self_attn=False is cross-attention: no bias scale, no qk_norm, no softcap (docs/model.md)."""

    def __init__(self, cfg, pos, own_pos, self_attn=True):
        super().__init__()
        D, H = cfg.d_model, cfg.n_heads
        self.H, self.dh, self.D, self.p = H, D // H, D, cfg.dropout
        self.channels = tuple(getattr(cfg, "position_channels", ()))
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self, n, nn.Linear(D, D, dtype=cfg.dtype))
        if own_pos:
            self.pos = pos
        else:
            self._shared = [pos]  # owned (registered) by the stack
        if self_attn and cfg.qk_norm != "none":
            self.q_norm = Norm(cfg.qk_norm, self.dh, cfg.dtype)
            self.k_norm = Norm(cfg.qk_norm, self.dh, cfg.dtype)
        self.softcap = cfg.attn_softcap if self_attn else 0.0
        # distances kj - qi from a position channel (channel_distance_terms in relpos); the torch
        # twin implements the T5 form (relpos: every distance-indexed encoding)
        self.distance_col = None
        if self_attn and cfg.position_distance != "index":
            if cfg.position != "t5":
                raise NotImplementedError("relpos_torch: model.position.distance from a channel is implemented for t5")
            self.distance_col = cfg.position_channels.index(cfg.position_distance)
        self.alpha = None
        if self_attn and cfg.bias_enabled:
            a = torch.full((H if cfg.bias_per_head else 1, 1), cfg.bias_init, dtype=cfg.dtype)
            if cfg.bias_learnable:
                self.bias_scale = nn.Parameter(a)
            else:
                self.register_buffer("bias_scale", a, persistent=False)
            self.alpha = True

    def encoding(self):
        return self.pos if "pos" in self._modules else self._shared[0]

    def _split(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.H, self.dh).transpose(1, 2)

    def forward(self, xq, xkv, causal, key_padding=None, q_offset=0, k_offset=0, position_index=None,
                positions=None):
        pos = self.encoding()
        B, Lq = xq.shape[0], xq.shape[1]
        q, k = self._split(self.q_proj(xq)), self._split(self.k_proj(xkv))  # [B, H, L, dh]
        if "q_norm" in self._modules:
            q, k = self.q_norm(q), self.k_norm(k)
        q = pos.rotate(q, q_offset)
        k = pos.rotate_key(k, k_offset)
        v = self._split(self.v_proj(xkv))
        Lk = k.shape[2]
        g = Geometry(Lq, Lk, q_offset, k_offset, causal, position_index, self.q_proj, self.k_proj, positions,
                     self.channels)
        if self.distance_col is not None:
            if positions is None:
                raise ValueError("model.position.distance reads a position channel: positions [B, L, P] are required")
            t = positions[:, :, self.distance_col]
            g.distance = t[:, k_offset:k_offset + Lk][:, None, :] - t[:, q_offset:q_offset + Lq][:, :, None]
        s = q @ k.transpose(-1, -2)
        t = pos.score_terms(q, k, g)
        if t is not None:
            s = s + t
        scale = pos.score_scale(self.dh)
        if scale != 1.0:
            s = s * scale
        bias = pos.bias(g)
        if bias is not None:
            if self.alpha is not None:
                bias = bias * self.bias_scale.reshape(-1, 1, 1)
            s = s + bias
        if self.softcap > 0:
            s = self.softcap * torch.tanh(s / self.softcap)
        mask = None
        if causal:
            mask = (g.rel() > 0)[None, None]
        if key_padding is not None:
            kp = (key_padding != 0).reshape(B, 1, 1, Lk)
            mask = kp if mask is None else (mask | kp)
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        p = F.dropout(torch.softmax(s, -1), self.p, self.training)
        o = p @ v
        vt = pos.value_terms(p, g)
        if vt is not None:
            o = o + vt
        return self.o_proj(o.transpose(1, 2).reshape(B, Lq, self.D))


class Block(nn.Module):
    def __init__(self, cfg, pos, own_pos, cross):
        super().__init__()
        self.pre, self.p = cfg.norm == "pre", cfg.dropout
        self.attn = Attention(cfg, pos, own_pos)
        self.norm1 = Norm(cfg.norm_type, cfg.d_model, cfg.dtype)
        if cross:
            none = ENCODINGS["none"](None)
            self.cross_attn = Attention(cfg, none, False, self_attn=False)
            self.norm_cross = Norm(cfg.norm_type, cfg.d_model, cfg.dtype)
        self.mlp = MLP(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.dtype)
        self.norm2 = Norm(cfg.norm_type, cfg.d_model, cfg.dtype)

    def forward(self, x, causal, padding, offset, memory=None, memory_padding=None, position_index=None,
                positions=None):
        drop = lambda t: F.dropout(t, self.p, self.training)  # noqa: E731
        sa = lambda h: self.attn(h, h, causal, padding, offset, offset, position_index, positions)  # noqa: E731
        h = x + drop(sa(self.norm1(x))) if self.pre else self.norm1(x + drop(sa(x)))
        if hasattr(self, "cross_attn"):
            if self.pre:
                h = h + drop(self.cross_attn(self.norm_cross(h), memory, False, memory_padding, offset, 0))
            else:
                h = self.norm_cross(h + drop(self.cross_attn(h, memory, False, memory_padding, offset, 0)))
        return h + drop(self.mlp(self.norm2(h))) if self.pre else self.norm2(h + drop(self.mlp(h)))


class Stack(nn.Module):
    def __init__(self, cfg, causal, cross, channels=()):
        super().__init__()
        self.causal = causal
        self.embed = nn.Module()
        self.embed.weight = nn.Parameter(torch.zeros(cfg.vocab, cfg.d_model, dtype=cfg.dtype))
        cls = ENCODINGS[cfg.position]
        share = cfg.position_shared if cfg.position_shared is not None else not cls.per_layer

        def ctx(shared):
            return Ctx(cfg.d_model, cfg.n_heads, cfg.max_len, cfg.position_params, cfg.dtype, shared, channels)

        pos = cls(ctx(share))
        if causal and cls is not None and cfg.position in ("relative_2d", "graph_spd", "cpe"):
            raise ValueError(f"position encoding '{cfg.position}' is encoder-only")
        shared = cls.absolute or share
        if shared:
            self.pos = pos
        else:
            self._pos = [pos]
        layers = []
        for _ in range(cfg.n_layers):
            p = pos.make_layer() if shared else cls(ctx(False))
            own = p is not None
            layers.append(Block(cfg, p if own else pos, own, cross))
        self.layers = nn.ModuleList(layers)
        if cfg.norm == "pre":
            self.norm = Norm(cfg.norm_type, cfg.d_model, cfg.dtype)

    def forward(self, tokens, padding=None, offset=0, memory=None, memory_padding=None, position_index=None,
                positions=None):
        pos = self.pos if "pos" in self._modules else self._pos[0]
        x = pos.embed_input(self.embed.weight[tokens], positions, padding, offset)
        for i, blk in enumerate(self.layers):
            x = blk(x, self.causal, padding, offset, memory, memory_padding, position_index, positions)
            x = pos.after_block(x, i, positions, padding)
        return self.norm(x) if "norm" in self._modules else x


class RelposModel(nn.Module):
    """A relpos model; `load_state_dict` takes relpos's tensor names unchanged."""

    def __init__(self, cfg: ModelConfig, channels=()):
        super().__init__()
        self.cfg = cfg
        if cfg.kind == "encoder_decoder":
            self.encoder = Stack(cfg, False, False)
            self.decoder = Stack(cfg, True, True)
        elif cfg.kind == "encoder":
            self.stack = Stack(cfg, False, False, channels)
        else:
            self.stack = Stack(cfg, True, False, channels)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False, dtype=cfg.dtype)

    def forward(self, tokens, padding=None, position_index=None, positions=None):
        """decoder / encoder: tokens int64 [B, L] -> logits [B, L, V]; positions int64 [B, L, P] (the
        data.position_channels the model was built with, `channels`; the 'ast' encoding reads its parent column, a
        channel distance its `model.position.distance` column)."""
        return self.head(self.stack(tokens, padding, 0, position_index=position_index, positions=positions))

    def forward_seq2seq(self, source, target_in, source_padding=None):
        mem = self.encoder(source, source_padding)
        return self.head(self.decoder(target_in, None, 0, mem, source_padding))


def loss_fn(logits, target):
    """Mean next-token / per-token cross-entropy with ignore_index -100 (relpos's training loss)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)


def sqrt_scale(dh):
    return 1.0 / math.sqrt(dh)
