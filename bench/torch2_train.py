#!/usr/bin/env python3
"""bench/torch2_train.py — the PyTorch 2.x peer of bench/torch_train.py (run it with bench/.venv-torch2/bin/python).

The same model, data, step, parameter names, --load DIR cross-check and JSON fields as
bench/torch_train.py (whose modules, batches and loop it imports), written the way a PyTorch
2.x user writes it:
  attention  F.scaled_dot_product_attention:
               none, rope   is_causal=True (no [L, L] mask; the fused CPU kernel may run)
               t5, alibi    attn_mask = bias + causal -inf, a float [H, L, L] mask rebuilt every
                            step from the position module (T5's learnable table gets its gradient
                            through the mask); scale passed explicitly (1 for T5)
               shaw         materialised as in torch_train.py: SDPA can neither add the
                            q-dependent score term nor return P for the value term
  optimizer  torch.optim.AdamW(fused=True) when this torch has a fused CPU kernel, else
             foreach=True; JSON field "optimizer" says which
  --compile  torch.compile(model) (default mode); the compilation happens in the warmup steps,
             which are not timed (JSON "compile": true, impl "torch2c"; eager: impl "torch2")
JSON extra fields: "optimizer", "compile", "warmup_s" (wall time of the warmup steps, which
includes the compilation with --compile).
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train as tt  # noqa: E402  (same directory; the model, data and loop)


class SdpaAttention(tt.Attention):
    """tt.Attention's parameters and position modules; the forward via SDPA."""

    def forward(self, x):
        pt = self.pos_type
        if pt == "shaw":
            return super().forward(x)
        B, L, D = x.shape
        split = lambda t: t.view(B, L, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if pt == "rope":
            q, k = self.shared[0].rotate(q), self.shared[0].rotate(k)
        if pt in ("t5", "alibi"):
            causal = torch.full((L, L), float("-inf"), device=x.device).triu(1)
            mask = self.shared[0].bias(L).to(x.device) + causal  # [H, L, L]
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.o_proj(o.transpose(1, 2).reshape(B, L, D))


def make_adamw(groups, device, lr):
    """AdamW(fused=True) when this torch accepts it for the device, else foreach=True."""
    kw = dict(lr=lr, betas=(0.9, 0.999), eps=1e-8)
    try:
        probe = torch.nn.Parameter(torch.zeros(1, device=device))
        torch.optim.AdamW([probe], fused=True)
        fused = True
    except (RuntimeError, TypeError, ValueError):
        fused = False
    if fused:
        return torch.optim.AdamW(groups, fused=True, **kw), "fused"
    return torch.optim.AdamW(groups, foreach=True, **kw), "foreach"


def main():
    ap = tt.build_parser(__doc__)
    ap.add_argument("--compile", action="store_true", help="wrap the model with torch.compile (default mode)")
    a = ap.parse_args()
    if int(torch.__version__.split(".")[0]) < 2:
        raise SystemExit(f"torch {torch.__version__}: needs PyTorch 2.x (run bench/setup_torch2.sh)")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rss_start = tt.rss_now_mb()
    model = tt.Model(a.d_model, a.layers, a.heads, 4 * a.d_model, a.pos, attn_cls=SdpaAttention)
    model.train()
    inputs, targets = tt.make_batches(a, model)  # --load: relpos' weights, before compiling

    params = list(model.parameters())
    opt, opt_kind = make_adamw(tt.param_groups(model, a.wd), torch.device(a.device), a.lr)
    step_model = torch.compile(model) if a.compile else model

    t0 = time.perf_counter()
    ms, losses = tt.run_steps(a, step_model, opt, params, inputs, targets)
    # run_steps times the steps after the warmup; the warmup wall time is the rest.
    warmup_s = time.perf_counter() - t0 - sum(ms) / 1000.0

    out = tt.result(a, "torch2c" if a.compile else "torch2", params, ms, losses, rss_start)
    out.update({"optimizer": opt_kind, "compile": a.compile, "warmup_s": round(warmup_s, 2)})
    if not all(math.isfinite(x) for x in losses):
        print(f"torch2_train: non-finite loss {losses}", file=sys.stderr)
    print(json.dumps(out, separators=(",", ":")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
