#!/usr/bin/python3
"""Write tests/fixtures/model/<case>.safetensors: whole-model PyTorch references for
tests/nn/test_model_trajectory.cpp (llm.c's test_gpt2, per position-encoding family).

For each case a tiny relpos model is built with relpos_torch (python/relpos_torch, the
checkpoint loader), given fixed float32 weights (seeded torch.randn, not relpos's init) and a
fixed batch, and evaluated in float64 from those float32 weights:
  logits, loss (mean cross-entropy, ignore_index -100), the gradient of the loss for every
  parameter, and the losses of 5 AdamW steps (torch.optim.AdamW lr 1e-2, betas (0.9, 0.999),
  eps 1e-8, weight_decay 0.01 on every parameter, no clipping, no schedule): loss k is the loss
  before update k + 1, the first one equals `loss`.
Stored: "param.<name>" F32 (the weights relpos loads), "input"/"target"/"dec_input"/
"position_index"/"positions" I64 (positions: [B, L, P], the channels of "data.position_channels", or of "model.position_channels" for the ast case), "logits" F64, "loss" F64 [], "grad.<name>" F64, "trajectory" F64 [5];
metadata: the model config as "model.<key>" strings (position parameters as
"model.position.<key>") and "optim.*".

Run from the repository root with Debian's torch:  /usr/bin/python3 tools/make_model_fixtures.py
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import relpos_torch  # noqa: E402
from relpos_torch import safetensors_io  # noqa: E402
from relpos_torch.model import ModelConfig, RelposModel, loss_fn  # noqa: E402

OUT = "tests/fixtures/model"
LR, WD, STEPS = 1e-2, 0.01, 5
BASE = {"kind": "decoder", "d_model": "8", "n_layers": "2", "n_heads": "2", "d_ff": "16", "max_len": "32"}
V, B, L = 7, 2, 8

# case name -> (model overrides, position section); one case per encoding (family), plus the
# norm / bias-scale / sharing variants and an encoder-decoder.
CASES = {
    "none": ({}, {"type": "none"}),
    "sinusoidal": ({"norm": "post"}, {"type": "sinusoidal"}),
    "learned": ({"norm_type": "rmsnorm"}, {"type": "learned"}),
    "t5": ({"bias_scale": {"enabled": "true", "per_head": "true"}}, {"type": "t5", "num_buckets": "8", "max_distance": "16"}),
    "t5_encoder_decoder": ({"kind": "encoder_decoder"}, {"type": "t5", "num_buckets": "8", "max_distance": "16"}),
    "alibi": ({"bias_scale": {"enabled": "true"}}, {"type": "alibi", "learnable": "true"}),
    "rope": ({}, {"type": "rope", "style": "interleaved", "fraction": "0.5"}),
    "shaw": ({"norm": "post", "norm_type": "rmsnorm"}, {"type": "shaw", "k_max": "3"}),
    "transformer_xl": ({}, {"type": "transformer_xl"}),
    "kerple_log": ({}, {"type": "kerple_log"}),
    "kerple_power": ({}, {"type": "kerple_power"}),
    "fire": ({}, {"type": "fire", "width": "6", "init_L": "4"}),
    "sandwich": ({}, {"type": "sandwich"}),
    "dynamic_bias": ({}, {"type": "dynamic_bias", "log_distance": "true", "width": "6"}),
    "xpos": ({}, {"type": "xpos", "scale_base": "16"}),
    "cope": ({}, {"type": "cope", "npos_max": "5"}),
    "relative_2d": ({"kind": "encoder"}, {"type": "relative_2d", "grid_h": "2", "grid_w": "4"}),
    "graph_spd": ({"kind": "encoder", "bias_scale": {"enabled": "true", "per_head": "true"}},
                  {"type": "graph_spd", "max_dist": "3"}),
    "deberta": ({"kind": "encoder"}, {"type": "deberta", "position_buckets": "4", "max_relative_positions": "8"}),
    "music_transformer": ({}, {"type": "music_transformer", "max_relative_position": "5"}),
    # Grids from the row/col position channels (data.position_channels [row, col]): every example a
    # 2x4 grid (L = 8). cpe: the PEG convolution after block 0; the _resize cases are built for a
    # 2x2 training grid and run on 2x4, so the table is resized (F.interpolate, bicubic).
    "cpe": ({"kind": "encoder"}, {"type": "cpe", "kernel": "3"}),
    "relative_2d_resize": ({"kind": "encoder"}, {"type": "relative_2d", "grid_h": "2", "grid_w": "2"}),
    "learned_resize": ({"kind": "encoder"}, {"type": "learned", "grid_h": "2", "grid_w": "2"}),
    # the tree bias plus its T5-bucketed sequential part, from a parent channel (positions [B, L, 1])
    "ast": ({"bias_scale": {"enabled": "true", "per_head": "true"}},
            {"type": "ast", "max_steps": "2", "max_path": "3", "seq_buckets": "8", "seq_max_distance": "16"}),
    # T5 over a time channel (model.position.distance: time): onsets with repeats and gaps
    "t5_time": ({"bias_scale": {"enabled": "true", "per_head": "true"}, "position_channels": "beat,time"},
                {"type": "t5", "num_buckets": "8", "max_distance": "16", "distance": "time"}),
}
GRID = {"cpe": (2, 4), "relative_2d_resize": (2, 4), "learned_resize": (2, 4)}  # case -> (H, W), H W = L


def weights(model, gen):
    """Fixed float32 weights: N(0, 0.3) matrices, norms 1 + N(0, 0.1), vectors N(0, 0.1)."""
    out = {}
    for name, p in model.state_dict().items():
        shape = tuple(p.shape)
        if name.endswith(("ln.weight", "rms.weight", "norm_weight", "bias_scale", "L_multiplier")):
            w = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith(".c"):
            w = 0.3 + 0.05 * torch.randn(shape, generator=gen)
        elif len(shape) == 1 or name.endswith("bias"):
            w = 0.1 * torch.randn(shape, generator=gen)
        else:
            w = 0.3 * torch.randn(shape, generator=gen)
        out[name] = w.to(torch.float32)
    return out


def batch(kind, pos, gen, grid=None):
    pos_type = pos["type"]
    b = {}
    toks = lambda *s: torch.randint(0, V, s, generator=gen)  # noqa: E731
    if kind == "encoder_decoder":
        b["input"], b["dec_input"], b["target"] = toks(B, L), toks(B, L - 2), toks(B, L - 2)
    else:
        b["input"], b["target"] = toks(B, L), toks(B, L)
    b["target"][0, 1] = -100  # one ignored target
    if pos_type == "ast":  # parent channel: tokens back to the parent (0: a root; past the window: a root too)
        b["positions"] = torch.stack([torch.randint(0, t + 2, (B,), generator=gen) for t in range(L)], 1)[:, :, None]
    if "distance" in pos:  # two channels [B, L, 2]: `beat` (unused), `time` = running sum of 0..3
        steps = torch.randint(0, 4, (B, L), generator=gen)
        b["positions"] = torch.stack([torch.randint(0, 4, (B, L), generator=gen), torch.cumsum(steps, 1)], 2)
    if pos_type == "graph_spd":
        spd = torch.randint(-1, 5, (B, L, L), generator=gen)
        spd = torch.where(torch.eye(L, dtype=torch.bool), torch.zeros_like(spd), spd)
        b["position_index"] = spd
    if grid:
        t = torch.arange(L)
        b["positions"] = torch.stack([t // grid[1], t % grid[1]], -1)[None].expand(B, L, 2).contiguous()
    return b


def run(model, b):
    if "dec_input" in b:
        logits = model.forward_seq2seq(b["input"], b["dec_input"])
    else:
        logits = model(b["input"], None, b.get("position_index"), b.get("positions"))
    return logits, loss_fn(logits, b["target"])


def make(name, overrides, pos):
    section = dict(BASE)
    section.update({k: v for k, v in overrides.items()})
    section["position"] = pos
    gen = torch.Generator().manual_seed(sum(map(ord, name)) * 7919)
    channels = ["row", "col"] if name in GRID else []
    model = RelposModel(ModelConfig(section, V), channels)
    w = weights(model, gen)
    model.load_state_dict({k: v.clone() for k, v in w.items()}, strict=True)
    model = model.double()
    b = batch(section["kind"], pos, gen, GRID.get(name))
    logits, loss = run(model, b)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    names = [n for n, _ in model.named_parameters()]
    assert set(names) == set(w), (name, set(names) ^ set(w))
    assert all(g is not None for g in grads.values())
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
    traj = []
    for _ in range(STEPS):
        opt.zero_grad()
        _, lo = run(model, b)
        traj.append(float(lo))
        lo.backward()
        opt.step()
    assert abs(traj[0] - float(loss)) < 1e-12
    t = {f"param.{k}": v.numpy() for k, v in w.items()}
    t.update({f"grad.{k}": v.numpy() for k, v in grads.items()})
    t.update({k: v.numpy().astype(np.int64) for k, v in b.items()})
    t["logits"] = logits.detach().numpy()
    t["loss"] = np.array(float(loss), dtype=np.float64)
    t["trajectory"] = np.array(traj, dtype=np.float64)
    meta = {f"model.{k}": v for k, v in section.items() if k not in ("position", "bias_scale")}
    meta.update({f"model.position.{k}": v for k, v in pos.items()})
    if "positions" in b:  # the name of its one column (data.position_channels)
        meta["model.position_channels"] = "parent"
    meta.update({f"model.bias_scale.{k}": v for k, v in overrides.get("bias_scale", {}).items()})
    if channels:
        meta["data.position_channels"] = ",".join(channels)
    meta.update({"model.vocab": str(V), "optim.lr": repr(LR), "optim.weight_decay": repr(WD),
                 "optim.steps": str(STEPS), "generator": "tools/make_model_fixtures.py (relpos_torch, float64)",
                 "torch": torch.__version__})
    path = os.path.join(OUT, f"{name}.safetensors")
    safetensors_io.write(path, t, meta)
    print(f"{path}: {len(w)} parameters, loss {float(loss):.6f}, trajectory {' '.join(f'{x:.5f}' for x in traj)}")


def main():
    os.makedirs(OUT, exist_ok=True)
    only = sys.argv[1:]
    for name, (ov, pos) in CASES.items():
        if not only or name in only:
            make(name, ov, pos)
    missing = set(relpos_torch.ENCODINGS) - {p["type"] for _, p in CASES.values()}
    assert not missing, missing


if __name__ == "__main__":
    main()
