#!/usr/bin/python3
"""scripts/report.py - the figures and Markdown report behind `relpos report DIR`.

DIR is a run directory (metrics.jsonl, config.yaml) or a sweep directory (sweep.json, the
index files sweep.jsonl / sweep.shard-I-of-N.jsonl / sweep.point-I.jsonl, merged as
read_sweep_index in trainers/sweep.h does, one run directory per point). Writes into OUT
(default DIR/report):
  report.md            self-contained Markdown (relative links to the figures)
  <figure>.png         matplotlib figures, labelled axes, units, legends
  <figure>.json        the exact series drawn in <figure>.png:
                       {"title", "xlabel", "ylabel", "series": [{"label", "x": [...], "y": [...]}]}
                       (tests compare them with metrics.jsonl / sweep.jsonl)
Run figures: training and validation loss, learning rate, pre-clip gradient norm with the
clipped steps marked, max |attention logit| and attention entropy per layer, bias scale alpha,
z-loss. Sweep figures: loss vs evaluation length per point (the ALiBi paper's Figure 1 shape),
loss beyond the training length, stability grid (lr x recipe -> final loss, first divergence
step) per remaining grid value, max |attention logit| over training per recipe, and the
training-loss curves of every point.
Only the Python standard library, numpy and matplotlib (Debian python3-matplotlib).
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def num(v):
    """metrics values: numbers, or the strings nan / inf / -inf."""
    if v is None:
        return math.nan
    if isinstance(v, str):
        return float(v)
    return float(v)


def read_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a last line cut short by a crash
    return rows


def sweep_index_files(sweep_dir):
    """Every index file of a sweep directory: sweep.jsonl first, then sweep.shard-*.jsonl and
    sweep.point-*.jsonl sorted by name (trainers/sweep.h, sweep_index_files)."""
    out = []
    if os.path.isfile(os.path.join(sweep_dir, "sweep.jsonl")):
        out.append(os.path.join(sweep_dir, "sweep.jsonl"))
    try:
        names = os.listdir(sweep_dir)
    except OSError:
        names = []
    more = sorted(n for n in names
                  if n.endswith(".jsonl") and (n.startswith("sweep.shard-") or n.startswith("sweep.point-"))
                  and len(n) > len("sweep.shard-.jsonl") and os.path.isfile(os.path.join(sweep_dir, n)))
    return out + [os.path.join(sweep_dir, n) for n in more]


def read_sweep_index(sweep_dir):
    """All index files merged, as read_sweep_index in trainers/sweep.h: one record per point
    name (a "done" record wins over any other; among equals the larger "finished_at", then the
    later file and line), ordered by "index" (ties by name)."""
    best = {}
    for fi, path in enumerate(sweep_index_files(sweep_dir)):
        with open(path) as f:
            for li, line in enumerate(f):
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a last line cut short by a crash
                if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                    continue
                at = r.get("finished_at")
                at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else 0.0
                key = (r.get("status") == "done", at, fi, li)
                if r["name"] not in best or key > best[r["name"]][0]:
                    best[r["name"]] = (key, r)
    recs = [best[n][1] for n in sorted(best)]
    big = float("inf")
    recs.sort(key=lambda r: r["index"] if isinstance(r.get("index"), int) and not isinstance(r.get("index"), bool)
              else big)
    return recs


class Figures:
    def __init__(self, out):
        self.out = out
        self.made = []  # (file stem, caption)

    def save(self, stem, fig, title, xlabel, ylabel, series, caption, extra=None):
        if not fig.get_layout_engine():
            fig.tight_layout()
        fig.savefig(os.path.join(self.out, stem + ".png"), dpi=110)
        plt.close(fig)
        data = {"title": title, "xlabel": xlabel, "ylabel": ylabel, "series": series}
        if extra:
            data.update(extra)
        with open(os.path.join(self.out, stem + ".json"), "w") as f:
            json.dump(data, f, indent=1, allow_nan=True)
        self.made.append((stem, caption))


def style(i, n):
    """Distinct colour + line style for series i of n (tab10 repeats after 10)."""
    if n <= 10:
        return {"color": plt.cm.tab10(i % 10)}
    return {"color": plt.cm.tab20(i % 20), "linestyle": ["-", "--", ":", "-."][(i // 2) % 4]}


def line_figure(figs, stem, title, xlabel, ylabel, series, caption, logy=False, markers=None):
    """series: [{"label", "x", "y"}]; markers: optional [{"label", "x", "y"}] drawn as points."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, s in enumerate(series):
        ax.plot(s["x"], s["y"], label=s["label"], marker="o" if len(s["x"]) <= 12 else None, ms=3,
                **style(i, len(series)))
    for m in markers or []:
        ax.scatter(m["x"], m["y"], color="red", marker="x", s=25, label=m["label"], zorder=5)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if series or markers:
        ax.legend(fontsize=7, ncol=2 if len(series) > 8 else 1)
    figs.save(stem, fig, title, xlabel, ylabel, series + (markers or []), caption)


def column(rows, key):
    """(steps, values) of the rows holding key (scalars)."""
    xs, ys = [], []
    for r in rows:
        if key in r and not isinstance(r[key], list):
            xs.append(r["step"])
            ys.append(num(r[key]))
    return xs, ys


def array_columns(rows, key):
    """{index: (steps, values)} for array-valued keys (per layer / per head)."""
    out = {}
    for r in rows:
        if isinstance(r.get(key), list):
            for i, v in enumerate(r[key]):
                out.setdefault(i, ([], []))
                out[i][0].append(r["step"])
                out[i][1].append(num(v))
    return out


def run_figures(run_dir, figs, prefix="", name=""):
    rows = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    tag = f" ({name})" if name else ""
    series = []
    x, y = column(rows, "loss")
    if x:
        series.append({"label": "train loss (mean over the log window)", "x": x, "y": y})
    x, y = column(rows, "val_loss")
    if x:
        series.append({"label": "validation loss", "x": x, "y": y})
    line_figure(figs, prefix + "loss", "Loss" + tag, "optimizer step", "cross-entropy (nats / token)", series,
                "Training loss (mean over each log window) and validation loss.")
    x, y = column(rows, "lr")
    if x:
        line_figure(figs, prefix + "lr", "Learning rate" + tag, "optimizer step", "learning rate",
                    [{"label": "lr", "x": x, "y": y}], "Learning-rate schedule (value at each logged step).")
    x, y = column(rows, "grad_norm")
    if x:
        cx = [r["step"] for r in rows if r.get("clipped") is True]
        cy = [num(r["grad_norm"]) for r in rows if r.get("clipped") is True]
        line_figure(figs, prefix + "grad_norm", "Gradient norm" + tag, "optimizer step", "global L2 norm (pre-clip)",
                    [{"label": "grad norm", "x": x, "y": y}],
                    "Global gradient norm before clipping; red crosses mark logged steps that were clipped.",
                    logy=True, markers=[{"label": "clipped", "x": cx, "y": cy}] if cx else None)
    for key, title, ylabel, cap in [
        ("max_attn_logit", "Max |attention logit| per layer", "max |S| over unmasked cells",
         "Largest absolute attention logit of each layer (first micro-batch of the logged step)."),
        ("attn_entropy", "Attention entropy per layer", "mean entropy (nats)",
         "Mean attention entropy of each layer; collapse towards 0 means one-hot attention."),
        ("bias_scale", "Bias scale alpha", "alpha", "Every entry of the learnable bias scale alpha over training."),
    ]:
        cols = array_columns(rows, key)
        if cols:
            lbl = "layer" if key != "bias_scale" else "alpha"
            line_figure(figs, prefix + key, title + tag, "optimizer step", ylabel,
                        [{"label": f"{lbl} {i}", "x": c[0], "y": c[1]} for i, c in sorted(cols.items())], cap)
    x, y = column(rows, "z_loss")
    if x:
        line_figure(figs, prefix + "z_loss", "z-loss" + tag, "optimizer step", "coef * mean(logsumexp^2)",
                    [{"label": "z-loss", "x": x, "y": y}], "The z-loss term added to the training loss.")
    div = [r for r in rows if "first_divergence_step" in r]
    return rows, (div[0]["first_divergence_step"] if div else None)


def inspect_figures(run_dir, figs):
    """Figures from `relpos inspect` output (RUN/inspect/inspect.json), when present."""
    path = os.path.join(run_dir, "inspect", "inspect.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        ins = json.load(f)
    if ins.get("bias"):
        series = [{"label": f"layer {c['layer']} head {c['head']}", "x": c["distance"], "y": c["bias"]}
                  for c in ins["bias"]]
        line_figure(figs, "bias_vs_distance", f"Learned bias vs distance ({ins['position']}, step {ins['step']})",
                    "distance kj - qi (tokens)", "bias added to the logit", series,
                    "The additive position bias of each layer and head (times alpha), query attending back.")
    for r in ins.get("position_grad_rows", []):
        if len(r["row_norm"]) < 2:
            continue
        stem = "grad_rows_" + r["param"].replace(".", "_")
        x = list(range(len(r["row_norm"])))
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.bar(x, r["row_norm"], color="tab:blue", label="||grad row||")
        ax.set_yscale("log")
        ax.set_xlabel("table row (bucket / offset / position)")
        ax.set_ylabel("gradient L2 norm (one batch)")
        ax.set_title(f"Gradient per row of {r['param']} {r['shape']}")
        ax.legend()
        figs.save(stem, fig, ax.get_title(), ax.get_xlabel(), ax.get_ylabel(),
                  [{"label": "row norm", "x": x, "y": r["row_norm"]}],
                  "Gradient magnitude each row of the position table receives on one training batch: "
                  "rows near zero do not learn.")
    att = ins.get("attention")
    if att and att.get("layers"):
        heads = att["layers"][0]
        fig, axes = plt.subplots(1, len(heads), figsize=(3.2 * len(heads), 3.4), squeeze=False, layout="constrained")
        for h, (ax, m) in enumerate(zip(axes[0], heads)):
            im = ax.imshow(m, cmap="magma", vmin=0, vmax=1)
            ax.set_title(f"layer 0 head {h}")
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
        fig.colorbar(im, ax=axes[0].tolist(), label="attention probability")
        figs.save("attention_maps", fig, "Attention maps, layer 0", "key position", "query position",
                  [], f"Attention probabilities of layer 0 for the input {att['text']!r}.", extra={"maps": heads})


def short(rec, keys):
    """Label of a sweep point without the grid keys that are constant."""
    parts = [f"{rec['grid'][k]}" for k in keys if k in rec.get("grid", {})]
    if rec.get("recipe"):
        parts.append(rec["recipe"])
    return " ".join(parts) or rec["name"]


def sweep_figures(sweep_dir, figs, md):
    meta = {}
    if os.path.exists(os.path.join(sweep_dir, "sweep.json")):
        with open(os.path.join(sweep_dir, "sweep.json")) as f:
            meta = json.load(f)
    by_name = {r["name"]: r for r in read_sweep_index(sweep_dir)}  # every index file, merged
    # The spec's order (points are matched by name; a grown grid keeps its finished points).
    order = meta.get("point_names") or sorted(by_name, key=lambda n: by_name[n]["index"])
    recs = []
    for i, n in enumerate(order):
        if n in by_name:
            recs.append(dict(by_name[n], index=i))
    grid_keys = meta.get("grid_keys", [])
    varying = [k for k in grid_keys if len({str(r["grid"].get(k)) for r in recs}) > 1]
    recipes = meta.get("recipes", [])
    md.append(f"Sweep `{meta.get('spec', sweep_dir)}`: {len(recs)} points, grid keys "
              f"{', '.join('`' + k + '`' for k in grid_keys) or '-'}"
              f"{', recipes ' + ', '.join(recipes) if recipes else ''}.\n")
    # Summary table
    lens = sorted({e["seq_len"] for r in recs for e in r.get("eval", [])})
    head = ["#", "point", "status", "final train loss", "final val loss", "first divergence step"] + \
        [f"loss @ {L}" for L in lens]
    md.append("| " + " | ".join(head) + " |")
    md.append("|" + "---|" * len(head))
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"
    for r in recs:
        ev = {e["seq_len"]: e["loss"] for e in r.get("eval", [])}
        md.append("| " + " | ".join([str(r["index"]), r["name"], r["status"], fmt(r.get("final_train_loss")),
                                     fmt(r.get("final_val_loss")), str(r.get("first_divergence_step") or "-")] +
                                    [fmt(ev.get(L)) for L in lens]) + " |")
    md.append("")
    # Loss vs evaluation length (ALiBi Fig. 1 shape)
    if lens:
        series, beyond = [], []
        for r in recs:
            ev = sorted(r.get("eval", []), key=lambda e: e["seq_len"])
            if not ev:
                continue
            lab = short(r, varying)
            series.append({"label": lab, "x": [e["seq_len"] for e in ev], "y": [num(e["loss"]) for e in ev]})
            b = [e for e in ev if e.get("beyond_loss") is not None]
            if b:
                beyond.append({"label": lab, "x": [e["seq_len"] for e in b], "y": [num(e["beyond_loss"]) for e in b]})
        mode = recs[0]["eval"][0].get("mode", "?") if recs and recs[0].get("eval") else "?"
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, s in enumerate(series):
            ax.plot(s["x"], s["y"], marker="o", ms=3, label=s["label"], **style(i, len(series)))
        ax.set_xscale("log", base=2)
        ax.set_xticks(lens)
        ax.set_xticklabels([str(L) for L in lens])
        ax.set_xlabel("evaluation length L (tokens, log scale)")
        ax.set_ylabel("validation loss (nats / token)")
        ax.set_title(f"Loss vs evaluation length ({mode} evaluation)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        figs.save("extrapolation", fig, ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), series,
                  "Mean validation loss over all positions of windows of length L, per point; a flat curve "
                  "extrapolates, a rising one does not.")
        if beyond:
            line_figure(figs, "extrapolation_beyond", "Loss on positions beyond the training length",
                        "evaluation length L (tokens)", "loss on positions >= training length (nats / token)",
                        beyond, "Loss counted only on positions the model never saw in training.")
    # Stability grid: lr x recipe -> final train loss (+ first divergence step), per other grid value
    lr_key = next((k for k in grid_keys if k.endswith(".lr")), None)
    if lr_key and recipes:
        others = [k for k in grid_keys if k != lr_key]
        groups = {}
        for r in recs:
            groups.setdefault(tuple(str(r["grid"].get(k)) for k in others), []).append(r)
        lrs = sorted({num(r["grid"][lr_key]) for r in recs})
        fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 0.9 * len(lrs) + 2.2), squeeze=False)
        cells = []
        import numpy as np
        vmax = max([num(r.get("final_train_loss")) for r in recs if r.get("final_train_loss") is not None] + [1])
        for ax, (g, rs) in zip(axes[0], sorted(groups.items())):
            m = np.full((len(lrs), len(recipes)), np.nan)
            for r in rs:
                i, j = lrs.index(num(r["grid"][lr_key])), recipes.index(r["recipe"])
                v = num(r.get("final_train_loss"))
                m[i, j] = v
                d = r.get("first_divergence_step")
                cells.append({"group": " ".join(g), "lr": lrs[i], "recipe": r["recipe"], "final_train_loss": v,
                              "first_divergence_step": d})
                txt = ("nan" if math.isnan(v) else f"{v:.2f}") + (f"\ndiv@{d}" if d is not None else "")
                ax.text(j, i, txt, ha="center", va="center", fontsize=7, color="white")
            im = ax.imshow(m, cmap="viridis_r", vmin=0, vmax=vmax, aspect="auto")
            ax.set_xticks(range(len(recipes)))
            ax.set_xticklabels(recipes, rotation=30, ha="right", fontsize=8)
            ax.set_yticks(range(len(lrs)))
            ax.set_yticklabels([f"{v:g}" for v in lrs])
            ax.set_xlabel("recipe")
            ax.set_ylabel("peak learning rate")
            ax.set_title(" ".join(g) or "all")
            fig.colorbar(im, ax=ax, label="final train loss (nats / token)")
        fig.suptitle("Stability grid: final train loss; div@N = first divergence step")
        figs.save("stability_grid", fig, "Stability grid", "recipe", "peak learning rate", [],
                  "Final training loss per learning rate and recipe (brighter = lower); 'div@N' marks the first "
                  "step whose loss was non-finite or above twice its running minimum.", extra={"cells": cells})
        # max |logit| (last layer) over training for every point of the highest lr
        for g, rs in sorted(groups.items()):
            series = []
            for r in rs:
                if num(r["grid"][lr_key]) != lrs[-1]:
                    continue
                rows = read_jsonl(os.path.join(r["run_dir"], "metrics.jsonl"))
                cols = array_columns(rows, "max_attn_logit")
                if cols:
                    last = cols[max(cols)]
                    series.append({"label": r["recipe"], "x": last[0], "y": last[1]})
            if series:
                stem = "max_logit_" + "_".join(g).replace("/", "-")
                line_figure(figs, stem, f"Max |attention logit|, last layer, {' '.join(g)}, lr {lrs[-1]:g}",
                            "optimizer step", "max |S| (logit units)", series,
                            f"Growth of the largest attention logit per recipe at lr {lrs[-1]:g} ({' '.join(g)}).",
                            logy=True)
    # Training curves of every point
    series = []
    for r in recs:
        p = os.path.join(r["run_dir"], "metrics.jsonl")
        if os.path.exists(p):
            x, y = column(read_jsonl(p), "loss")
            series.append({"label": short(r, varying), "x": x, "y": y})
    if series:
        line_figure(figs, "train_loss_all", "Training loss of every point", "optimizer step",
                    "train loss (nats / token)", series, "Training loss (log-window mean) of every sweep point.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out = a.out or os.path.join(a.dir, "report")
    os.makedirs(out, exist_ok=True)
    figs = Figures(out)
    md = []
    if os.path.exists(os.path.join(a.dir, "sweep.json")) or sweep_index_files(a.dir):
        md.append(f"# Sweep report: `{a.dir}`\n")
        sweep_figures(a.dir, figs, md)
    elif os.path.exists(os.path.join(a.dir, "metrics.jsonl")):
        md.append(f"# Run report: `{a.dir}`\n")
        rows, div = run_figures(a.dir, figs)
        inspect_figures(a.dir, figs)
        last = {}
        for r in rows:
            last.update(r)
        md.append(f"- last logged step: {last.get('step')}")
        md.append(f"- final train loss: {last.get('loss')}, final val loss: {last.get('val_loss')}")
        md.append(f"- first divergence step: {div if div is not None else 'none'}\n")
        cfg = os.path.join(a.dir, "config.yaml")
        if os.path.exists(cfg):
            with open(cfg) as f:
                md.append("Config:\n\n```yaml\n" + f.read().strip() + "\n```\n")
    else:
        sys.exit(f"report: {a.dir} holds neither a sweep index (sweep.json, sweep*.jsonl) nor metrics.jsonl")
    md.append("## Figures\n")
    for stem, cap in figs.made:
        md.append(f"### {stem}\n\n![{stem}]({stem}.png)\n\n{cap} Data: [`{stem}.json`]({stem}.json).\n")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"report: {os.path.join(out, 'report.md')} ({len(figs.made)} figures)")


if __name__ == "__main__":
    main()
