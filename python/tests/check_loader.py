#!/usr/bin/python3
"""ctest torch_loader: for every position encoding, train a tiny relpos model for a few steps,
run `relpos eval --json` on it, rebuild it in PyTorch with relpos_torch.load and compare the
validation loss (|diff| <= 1e-5). The cases also cover post-LN, RMSNorm, per-layer / shared
encodings, the bias scale (learnable, fixed, per head; FIRE included), qk_norm and the logit
softcap.

  python3 python/tests/check_loader.py --relpos build/relpos [--keep DIR] [--only NAME]

Exit 0 all match, 1 a mismatch or failure, 77 when torch or yaml is not installed (ctest: skipped).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
try:
    import torch  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (install python3-torch and python3-yaml to run the PyTorch loader test)")
    sys.exit(77)
import relpos_torch  # noqa: E402

TOL = 1e-5
TEXT = {"task": "text", "seq_len": 24, "batch_size": 4}
PYAST = {"task": "tokens", "path": "data/python_ast_train.rptok", "val_path": "data/python_ast_val.rptok",
         "position_channels": ["parent"], "seq_len": 24, "batch_size": 4}
# name, position section, model overrides, data section
CASES = [
    ("none", {"type": "none"}, {}, TEXT),
    ("sinusoidal", {"type": "sinusoidal"}, {"norm": "post"}, TEXT),
    ("learned", {"type": "learned"}, {"norm_type": "rmsnorm"}, TEXT),
    ("t5", {"type": "t5", "num_buckets": 8, "max_distance": 16},
     {"bias_scale": {"enabled": True, "per_head": True, "init": 0.5}}, TEXT),
    ("t5_per_layer_scaled", {"type": "t5", "shared": False, "scale": True}, {"norm": "post"}, TEXT),
    ("alibi", {"type": "alibi"}, {"n_heads": 3, "d_model": 24}, TEXT),
    ("alibi_learnable", {"type": "alibi", "learnable": True},
     {"bias_scale": {"enabled": True, "learnable": False, "init": 0.7}}, TEXT),
    ("rope", {"type": "rope"}, {}, TEXT),
    ("rope_interleaved_partial_yarn", {"type": "rope", "style": "interleaved", "fraction": 0.5, "scaling": "yarn",
                                       "factor": 2.0, "original_max_len": 16}, {"norm_type": "rmsnorm"}, TEXT),
    ("shaw", {"type": "shaw", "k_max": 4}, {}, TEXT),
    ("transformer_xl", {"type": "transformer_xl"}, {}, TEXT),
    ("transformer_xl_untied_clamped", {"type": "transformer_xl", "shared": False, "clamp_len": 5}, {"norm": "post"}, TEXT),
    ("kerple_log", {"type": "kerple_log"}, {"bias_scale": {"enabled": True}}, TEXT),
    ("kerple_power", {"type": "kerple_power"}, {}, TEXT),
    ("fire", {"type": "fire", "width": 8, "init_L": 16}, {}, TEXT),
    ("fire_bias_scale_per_head", {"type": "fire", "width": 8, "init_L": 16},
     {"bias_scale": {"enabled": True, "per_head": True, "init": 0.6}}, TEXT),
    # the stability knobs: qk_norm (both kinds, before RoPE), the logit softcap (after the bias)
    ("rope_qk_layernorm", {"type": "rope"}, {"qk_norm": "layernorm"}, TEXT),
    ("t5_qk_rmsnorm_softcap", {"type": "t5", "num_buckets": 8, "max_distance": 16},
     {"qk_norm": "rmsnorm", "attn_softcap": 2.0, "bias_scale": {"enabled": True}}, TEXT),
    ("alibi_softcap_encoder_decoder", {"type": "alibi"}, {"kind": "encoder_decoder", "attn_softcap": 1.5},
     {"task": "reverse", "seq_len": 6, "vocab_size": 8, "batch_size": 4}),
    ("sandwich", {"type": "sandwich"}, {}, TEXT),
    ("dynamic_bias", {"type": "dynamic_bias", "log_distance": True}, {}, TEXT),
    ("xpos", {"type": "xpos", "scale_base": 64}, {}, TEXT),
    ("xpos_half", {"type": "xpos", "style": "half"}, {"norm": "post", "norm_type": "rmsnorm"}, TEXT),
    ("cope", {"type": "cope", "npos_max": 8}, {}, TEXT),
    ("deberta", {"type": "deberta", "position_buckets": 8, "max_relative_positions": 16}, {}, TEXT),
    ("music_transformer", {"type": "music_transformer", "max_relative_position": 10}, {}, TEXT),
    ("music_transformer_shared", {"type": "music_transformer", "heads_share": True}, {"norm": "post"}, TEXT),
    ("deberta_own_proj_c2p", {"type": "deberta", "share_att_key": False, "pos_att_type": "c2p", "position_buckets": 0,
                              "max_relative_positions": 12, "shared": False}, {}, TEXT),
    ("relative_2d", {"type": "relative_2d", "grid_h": 3, "grid_w": 4}, {"kind": "encoder"},
     {"task": "patch_grid", "grid_h": 3, "grid_w": 4, "vocab_size": 6, "batch_size": 4}),
    ("graph_spd", {"type": "graph_spd", "max_dist": 4}, {"kind": "encoder", "bias_scale": {"enabled": True}},
     {"task": "graph", "seq_len": 10, "edge_prob": 0.2, "vocab_size": 6, "batch_size": 4}),
    # real images: the 8x8 digits as token_labels, the grid from the row/col position channels
    ("cpe", {"type": "cpe", "kernel": 3}, {"kind": "encoder"},
     {"task": "token_labels", "path": "data/digits_train.rptok", "val_path": "data/digits_val.rptok",
      "position_channels": ["row", "col"], "seq_len": 64, "batch_size": 4}),
    ("relative_2d_digits", {"type": "relative_2d", "grid_h": 8, "grid_w": 8}, {"kind": "encoder"},
     {"task": "token_labels", "path": "data/digits_train.rptok", "val_path": "data/digits_val.rptok",
      "position_channels": ["row", "col"], "seq_len": 64, "batch_size": 4}),
    ("learned_grid_digits", {"type": "learned", "grid_h": 8, "grid_w": 8}, {"kind": "encoder", "max_len": 144},
     {"task": "token_labels", "path": "data/digits_train.rptok", "val_path": "data/digits_val.rptok",
      "position_channels": ["row", "col"], "seq_len": 64, "batch_size": 4}),
    ("ast", {"type": "ast", "max_steps": 3, "max_path": 5}, {}, PYAST),
    ("ast_both", {"type": "ast", "seq_buckets": 8, "seq_max_distance": 16},
     {"bias_scale": {"enabled": True, "per_head": True}}, PYAST),
    # the synthetic tasks and the other model kinds
    ("t5_encoder_decoder_reverse", {"type": "t5", "num_buckets": 8, "max_distance": 16}, {"kind": "encoder_decoder"},
     {"task": "reverse", "seq_len": 6, "vocab_size": 8, "batch_size": 4}),
    ("rope_encoder_decoder_post_copy", {"type": "rope"}, {"kind": "encoder_decoder", "norm": "post"},
     {"task": "copy", "seq_len": 5, "vocab_size": 8, "batch_size": 4}),
    ("alibi_encoder_sort", {"type": "alibi"}, {"kind": "encoder"},
     {"task": "sort", "seq_len": 7, "vocab_size": 8, "batch_size": 4}),
    ("kerple_log_decoder_addition", {"type": "kerple_log"}, {},
     {"task": "addition", "seq_len": 3, "vocab_size": 11, "batch_size": 4}),
    ("shaw_decoder_recall", {"type": "shaw", "k_max": 3}, {},
     {"task": "recall", "seq_len": 6, "vocab_size": 8, "batch_size": 4}),
]


def config(name, pos, model, data, out):
    # position_std 0.5: position tables large enough that a wrong index or sign moves the loss
    m = {"kind": "decoder", "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 48, "max_len": 64, "position": pos,
         "init": {"position_std": 0.5}}
    m.update(model)
    d = {"path": "data/tinyshakespeare.txt"}
    d.update(data)
    return {"model": m, "data": d,
            "optim": {"name": "adamw", "lr": 1e-2, "warmup": 0, "weight_decay": 0.01},
            "train": {"steps": 20, "eval_every": 20, "eval_batches": 2, "log_every": 20, "seed": 7, "threads": 1},
            "output": {"dir": out}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relpos", required=True)
    ap.add_argument("--keep", help="keep the runs in this directory")
    ap.add_argument("--only")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.chdir(ROOT)
    work = a.keep or tempfile.mkdtemp(prefix="relpos_loader_")
    os.makedirs(work, exist_ok=True)
    seen, failed, worst = set(), [], 0.0
    for name, pos, model, data in CASES:
        if a.only and a.only != name:
            continue
        out = os.path.join(work, name)
        cfg_path = os.path.join(work, name + ".yaml")
        with open(cfg_path, "w") as f:
            json.dump(config(name, pos, model, data, out), f)  # JSON is YAML
        r = subprocess.run([a.relpos, "train", cfg_path], capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(name)
            print(f"FAIL {name}: relpos train exited {r.returncode}\n{r.stderr}")
            continue
        r = subprocess.run([a.relpos, "eval", out, "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(name)
            print(f"FAIL {name}: relpos eval exited {r.returncode}\n{r.stderr}")
            continue
        ref = json.loads(r.stdout)[0]
        try:
            run = relpos_torch.load(out)
            got = relpos_torch.evaluate(run)
        except Exception as e:  # noqa: BLE001
            failed.append(name)
            print(f"FAIL {name}: relpos_torch: {type(e).__name__}: {e}")
            continue
        diff = abs(got["loss"] - ref["loss"])
        worst = max(worst, diff)
        ok = diff <= TOL and got["tokens"] == ref["tokens"]
        seen.add(pos["type"])
        print(f"{'ok  ' if ok else 'FAIL'} {name:<32} relpos {ref['loss']:.7f}  torch {got['loss']:.7f}  "
              f"|diff| {diff:.2e}  acc {ref['accuracy']:.4f}/{got['accuracy']:.4f}  ({ref['tokens']} tokens)")
        if not ok:
            failed.append(name)
        if "row" in (data.get("position_channels") or []):  # resolution transfer: the 12x12 digits, resized tables
            r = subprocess.run([a.relpos, "eval", out, "--json", "--seq-len", "144", "--val-path",
                                "data/digits_val12.rptok"], capture_output=True, text=True)
            run.cfg["data"]["val_path"] = "data/digits_val12.rptok"
            try:
                ref, got = json.loads(r.stdout)[0], relpos_torch.evaluate(run, 144)
            except Exception as e:  # noqa: BLE001
                failed.append(name + "@12x12")
                print(f"FAIL {name} at 12x12: {type(e).__name__}: {e}\n{r.stderr}")
                continue
            diff = abs(got["loss"] - ref["loss"])
            worst = max(worst, diff)
            ok = diff <= TOL and got["tokens"] == ref["tokens"]
            print(f"{'ok  ' if ok else 'FAIL'} {name + ' @12x12':<32} relpos {ref['loss']:.7f}  torch {got['loss']:.7f}  "
                  f"|diff| {diff:.2e}")
            if not ok:
                failed.append(name + "@12x12")
    missing = set(relpos_torch.ENCODINGS) - seen
    if not a.only and missing:
        print(f"FAIL: encodings without a case: {sorted(missing)}")
        failed.append("coverage")
    print(f"{len(seen)} encodings checked, worst |loss diff| {worst:.2e} (tolerance {TOL:g}); "
          f"{'all ok' if not failed else 'FAILED: ' + ', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
