"""relpos_torch: load relpos checkpoints into PyTorch.

    import relpos_torch
    run = relpos_torch.load("runs/decoder_t5")          # run dir (latest checkpoint) or a checkpoint dir
    logits = run.model(tokens)                          # torch.nn.Module, relpos's tensor names
    print(relpos_torch.evaluate(run))                   # = `relpos eval runs/decoder_t5`

Pure Python on torch + numpy; safetensors are read by relpos_torch.safetensors_io. Every
position encoding, norm placement (pre/post), norm type (layernorm/rmsnorm) and bias scale is
supported; the architecture follows docs/model.md.
"""
import json
import math
import os

import numpy as np
import torch
import yaml

from . import safetensors_io
from .data import Generator, StructuredData, SyntheticData, TextData, TokenData, TokenLabelData
from .model import ModelConfig, RelposModel, loss_fn
from .positional import ENCODINGS

__all__ = ["load", "evaluate", "Run", "RelposModel", "ModelConfig", "Generator", "loss_fn", "ENCODINGS",
           "build_model", "safetensors_io"]
__version__ = "0.1.0"


class Run:
    def __init__(self, cfg, model, vocab, step, checkpoint):
        self.cfg, self.model, self.vocab, self.step, self.checkpoint = cfg, model, vocab, step, checkpoint


def _checkpoint_dir(path):
    if os.path.exists(os.path.join(path, "trainer_state.json")):
        return path
    ck = os.path.join(path, "checkpoints")
    steps = sorted(d for d in os.listdir(ck) if d.startswith("step_")) if os.path.isdir(ck) else []
    if not steps:
        raise FileNotFoundError(f"'{path}' holds no checkpoint (expected {path}/checkpoints/step_*/)")
    return os.path.join(ck, steps[-1])


def position_channels(config):
    """data.position_channels of a parsed config (a list of names, or one name)."""
    ch = ((config.get("data", {}) or {}).get("position_channels") or []) if "data" in config else []
    return [ch] if isinstance(ch, str) else list(ch)


def build_model(config, vocab):
    """config: the parsed YAML config (dict of strings) or its model section; vocab: V."""
    section = config.get("model", config) if "model" in config or "kind" in config else config
    section = dict(section)
    channels = position_channels(config)
    section["position_channels"] = channels  # the columns of the positions a batch carries
    return RelposModel(ModelConfig(section, vocab), channels)


def load(path):
    """Open a relpos run directory or checkpoint directory: the exact torch model, in eval mode."""
    ck = _checkpoint_dir(path)
    with open(os.path.join(ck, "trainer_state.json")) as f:
        state = json.load(f)
    cfg = yaml.load(state["config_yaml"], Loader=yaml.BaseLoader) or {}
    tensors, _ = safetensors_io.read(os.path.join(ck, "model.safetensors"))
    model = build_model(cfg, int(tensors["head.weight"].shape[0]))
    sd = {k: torch.from_numpy(v) for k, v in tensors.items()}
    model.load_state_dict(sd, strict=True)
    model.eval()
    return Run(cfg, model, state.get("vocab", []), int(state.get("step", 0)), ck)


def dataset(run, root="."):
    d = run.cfg.get("data", {}) or {}
    task = d.get("task", "text")
    B = int(d.get("batch_size", 16))
    if task == "text":
        return TextData(os.path.join(root, d.get("path", "data/tinyshakespeare.txt")), run.vocab,
                        float(d.get("val_fraction", 0.1)), B)
    if task == "token_labels":
        vp = d.get("val_path") or ""
        return TokenLabelData(os.path.join(root, d["path"]), os.path.join(root, vp) if vp else "",
                              float(d.get("val_fraction", 0.1)), B, position_channels(run.cfg))
    if task == "tokens":
        vp = d.get("val_path") or ""
        return TokenData(os.path.join(root, d["path"]), os.path.join(root, vp) if vp else "",
                         float(d.get("val_fraction", 0.1)), B, list(d.get("position_channels", []) or []))
    if task in ("patch_grid", "graph"):
        return StructuredData(task, int(d.get("vocab_size", 16)), B, int(d.get("grid_h", 4)), int(d.get("grid_w", 4)),
                              float(d.get("edge_prob", 0.2)))
    kind = (run.cfg.get("model", {}) or {}).get("kind", "decoder")
    return SyntheticData(task, kind, int(d.get("vocab_size", 16)), B)


def seq_len_of(run):
    d = run.cfg.get("data", {}) or {}
    if d.get("task") == "patch_grid":
        return int(d.get("grid_h", 4)) * int(d.get("grid_w", 4))
    return int(d.get("seq_len", 128))


@torch.no_grad()
def evaluate(run, seq_len=None, root="."):
    """`relpos eval`: mean cross-entropy over train.eval_batches validation batches (and accuracy)."""
    data = dataset(run, root)
    L = seq_len or seq_len_of(run)
    n = int((run.cfg.get("train", {}) or {}).get("eval_batches", 20))
    loss_sum, tokens, correct = 0.0, 0, 0
    for i in range(n):
        b = data.val_batch(i, L)
        if "dec_input" in b:
            logits = run.model.forward_seq2seq(b["input"], b["dec_input"], b.get("padding"))
        else:
            logits = run.model(b["input"], b.get("padding"), b.get("position_index"), b.get("positions"))
        flat, tg = logits.reshape(-1, logits.shape[-1]).double(), b["target"].reshape(-1)
        keep = tg != -100
        loss_sum += float(torch.nn.functional.cross_entropy(flat[keep], tg[keep], reduction="sum"))
        tokens += int(keep.sum())
        correct += int((logits.reshape(-1, logits.shape[-1])[keep].argmax(-1) == tg[keep]).sum())
    loss = loss_sum / tokens
    return {"seq_len": L, "loss": loss, "perplexity": math.exp(loss), "accuracy": correct / tokens, "tokens": tokens}
