#!/usr/bin/python3
"""tests/report/check_report_inputs.py - scripts/report.py (`relpos report`) on bad inputs.

Builds small run and sweep directories by hand (the formats of trainers/metrics.cpp,
experiments/sweep.cpp and `relpos inspect`), checks that valid ones give a report (exit 0,
report.md), then breaks one thing at a time: a line that is not JSON, bytes that are not
UTF-8, a field of the wrong type or missing, a directory / FIFO / device / oversized file
where a file is expected, an unreadable file, an output folder that is a file, a full disk.
Each must end with exit status 1 and exactly one line on stderr naming the file, no
traceback, nothing claimed on stdout. Every run has a timeout (a FIFO must not block).
Exit 77 when matplotlib cannot be imported by the interpreter that runs report.py.

usage: check_report_inputs.py [--report scripts/report.py] [--python /usr/bin/python3]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 60


def metrics_rows(steps=(2, 4, 6, 8)):
    """Rows as MetricsWriter::log writes them for a small run (bias scale, z-loss, validation)."""
    rows = []
    for i, s in enumerate(steps):
        r = {"step": s, "loss": 2.5 - 0.1 * i, "lr": 0.01 * (1 - 0.1 * i), "grad_norm": 1.5 - 0.2 * i,
             "clipped": i % 2 == 0, "tokens_per_s": 50000.0 + i, "pos_grad_norm": 0.001,
             "max_attn_logit": [3.5 + i, 1.0 + 0.1 * i], "attn_entropy": [1.3, 1.6 - 0.01 * i],
             "bias_scale": [0.08, 0.10 + 0.01 * i, 0.11, 0.12], "z_loss": 0.005 + 0.0001 * i}
        if i % 2 == 1:
            r["val_loss"] = 2.45 - 0.1 * i
            r["val_accuracy"] = 0.2
        rows.append(r)
    return rows


def jsonl(rows):
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)


def write(path, text, mode="w"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)


def make_run(d, with_inspect=True):
    write(os.path.join(d, "metrics.jsonl"), jsonl(metrics_rows()))
    write(os.path.join(d, "config.yaml"), "model: {d_model: 16, n_layers: 2, n_heads: 2, position: {type: t5}}\n"
          "data: {task: copy, vocab_size: 6, seq_len: 5, batch_size: 4}\ntrain: {steps: 8, log_every: 2}\n")
    if with_inspect:
        ins = {"run": d, "checkpoint": d + "/checkpoints/step_00000008", "step": 8, "position": "t5",
               "bias": [{"layer": 0, "head": h, "distance": [0, -1, -2, -3], "bias": [0.1 * h, 0.2, 0.15, 0.1]}
                        for h in range(2)],
               "position_grad_rows": [{"param": "stack.pos.table", "shape": [4, 2], "row_norm": [0.1, 0.2, 0.05, 0.01]}],
               "attention": {"text": "ab", "tokens": 2,
                             "layers": [[[[1.0, 0.0], [0.4, 0.6]], [[1.0, 0.0], [0.7, 0.3]]]]}}
        write(os.path.join(d, "inspect", "inspect.json"), json.dumps(ins) + "\n")
    return d


SWEEP_POINTS = [("alibi", "1.0e-3", "base"), ("alibi", "1.0e-3", "qk"), ("alibi", "1.0e-2", "base"),
                ("alibi", "1.0e-2", "qk")]


def sweep_record(d, i):
    typ, lr, recipe = SWEEP_POINTS[i]
    run_dir = os.path.join(d, f"{i:03d}_{typ}_{lr}_{recipe}")
    ev = [{"seq_len": L, "mode": "random", "stride": 0, "loss": 2.3 + 0.01 * i + 0.001 * L, "accuracy": 0.1,
           "tokens": 48, "beyond_loss": 2.31 + 0.01 * i, "beyond_tokens": 48,
           "buckets": [{"lo": 0, "hi": 5, "loss": None, "tokens": 0}]} for L in (5, 10)]
    return {"index": i, "name": f"type={typ} lr={lr} {recipe}", "run_dir": run_dir,
            "grid": {"model.position.type": typ, "optim.lr": lr}, "recipe": recipe, "overrides": [],
            "status": "done", "steps": 8, "final_train_loss": 2.2 + 0.01 * i, "final_val_loss": 2.1 + 0.01 * i,
            "first_divergence_step": None, "eval": ev, "seconds": 0.1, "finished_at": 1700000000.0 + i}


def make_sweep(d):
    meta = {"eval_lengths": [5, 10], "eval_modes": ["windows"], "grid_keys": ["model.position.type", "optim.lr"],
            "point_names": [sweep_record(d, i)["name"] for i in range(len(SWEEP_POINTS))],
            "points": len(SWEEP_POINTS), "recipes": ["base", "qk"], "spec": "spec.yaml"}
    write(os.path.join(d, "sweep.json"), json.dumps(meta, indent=2) + "\n")
    recs = [sweep_record(d, i) for i in range(len(SWEEP_POINTS))]
    write(os.path.join(d, "sweep.jsonl"), jsonl(recs))
    for r in recs:
        make_run(r["run_dir"], with_inspect=False)
    return d


class Checker:
    def __init__(self, python, report, tmp):
        self.python, self.report, self.tmp = python, report, tmp
        self.passed, self.failed, self.n = 0, 0, 0
        self.env = dict(os.environ, MPLCONFIGDIR=os.path.join(tmp, "mplconfig"))
        self.env.pop("PYTHONWARNINGS", None)  # library warnings would add lines to stderr

    def fresh(self, name):
        """A new directory for one case."""
        self.n += 1
        d = os.path.join(self.tmp, f"{self.n:02d}_{name}")
        os.makedirs(d)
        return d

    limit_as = None  # RLIMIT_AS of the report's process (bytes), when set

    def run(self, target, out=None):
        cmd = [self.python, self.report, target] + (["--out", out] if out else [])
        limit = self.limit_as

        def preexec():
            if limit:
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                               timeout=TIMEOUT_S, env=self.env, preexec_fn=preexec)
        except subprocess.TimeoutExpired:
            return None
        return p

    def result(self, name, problems, p=None):
        if problems:
            self.failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
            if p is not None:
                print(f"  exit {p.returncode}\n  stdout: {p.stdout!r}\n  stderr: {p.stderr!r}")
        else:
            self.passed += 1
            print(f"ok   {name}" + (f": {p.stderr.strip()}" if p is not None and p.stderr.strip() else ""))

    def good(self, name, target, out=None):
        """The report succeeds: exit 0, report.md linking only figures that exist."""
        out = out or os.path.join(target, "report")
        p = self.run(target, out)
        if p is None:
            return self.result(name, [f"no result within {TIMEOUT_S} s"])
        problems = []
        if p.returncode != 0:
            problems.append(f"exit {p.returncode}, expected 0")
        md = os.path.join(out, "report.md")
        if not os.path.isfile(md):
            problems.append("no report.md")
        else:
            with open(md, encoding="utf-8") as f:
                text = f.read()
            for stem in [ln[4:].strip() for ln in text.splitlines() if ln.startswith("### ")]:
                for ext in (".png", ".json"):
                    if not os.path.isfile(os.path.join(out, stem + ext)):
                        problems.append(f"report.md links {stem}{ext}, which does not exist")
        if "Traceback" in p.stderr:
            problems.append("traceback on stderr")
        self.result(name, problems, p if problems else None)
        return out

    def bad(self, name, target, names, out=None, also=()):
        """The report fails: exit 1, exactly one non-empty stderr line holding every string of
        `names` (the file, and the line or field where given) and `also`, no traceback, nothing
        claimed on stdout."""
        p = self.run(target, out)
        if p is None:
            return self.result(name, [f"no result within {TIMEOUT_S} s (blocked?)"])
        problems = []
        if p.returncode != 1:
            problems.append(f"exit {p.returncode}, expected 1")
        lines = p.stderr.splitlines()
        if len(lines) != 1 or not lines[0].strip():
            problems.append(f"expected one line on stderr, got {len(lines)}")
        if "Traceback" in p.stderr:
            problems.append("traceback on stderr")
        for s in list(names) + list(also):
            if s not in p.stderr:
                problems.append(f"stderr does not name {s!r}")
        if "figures)" in p.stdout:
            problems.append("stdout claims a report")
        self.result(name, problems, p)
        return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", default=os.path.join(HERE, "..", "..", "scripts", "report.py"))
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
    a = ap.parse_args()
    report = os.path.abspath(a.report)
    if not os.path.isfile(report):
        print(f"check_report_inputs: {report} not found")
        return 1
    if subprocess.run([a.python, "-c", "import matplotlib"], capture_output=True).returncode != 0:
        print(f"SKIP: {a.python} cannot import matplotlib (Debian: python3-matplotlib)")
        return 77
    root = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix="relpos_report_inputs_") as tmp:
        c = Checker(a.python, report, tmp)
        J = os.path.join

        # --- valid inputs -------------------------------------------------------------------
        c.good("valid run", make_run(c.fresh("run")))
        d = make_run(c.fresh("run_cut_tail"))
        write(J(d, "metrics.jsonl"), '{"step":10,"loss":2.0,"l', "a")  # a crash mid-row: tolerated
        c.good("valid run, last line cut short by a crash", d)
        c.good("valid sweep", make_sweep(c.fresh("sweep")))

        # --- run directory: metrics.jsonl ------------------------------------------------------
        def run_with_metrics(name, text, mode="w"):
            d = make_run(c.fresh(name))
            write(J(d, "metrics.jsonl"), text, mode)
            return d

        rows = metrics_rows()
        m = jsonl(rows).splitlines(keepends=True)
        d = run_with_metrics("bad_json", m[0] + '{"step": 4, "loss": 2.1,,}\n' + "".join(m[2:]))
        c.bad("metrics.jsonl: line 2 not JSON", d, [J(d, "metrics.jsonl") + ":2:"], also=["JSON"])
        d = run_with_metrics("bad_json_last_terminated", "".join(m) + '{"step": 10, "lo\n')
        c.bad("metrics.jsonl: cut last line followed by a newline", d, [J(d, "metrics.jsonl") + ":5:"])
        d = run_with_metrics("not_utf8", ("".join(m[:2]) + '{"step": 6, "loss": 2.0, "note": "\xff\xfe"}\n').encode(
            "latin-1"), "wb")
        c.bad("metrics.jsonl: not UTF-8", d, [J(d, "metrics.jsonl") + ":3:"], also=["UTF-8"])
        d = run_with_metrics("loss_string", jsonl(rows[:1] + [dict(rows[1], loss="abc")]))
        c.bad('metrics.jsonl: "loss": "abc"', d, [J(d, "metrics.jsonl") + ":2: loss:"], also=['"abc"'])
        d = run_with_metrics("step_array", jsonl(rows[:2] + [dict(rows[2], step=[1])]))
        c.bad('metrics.jsonl: "step": [1]', d, [J(d, "metrics.jsonl") + ":3: step:"], also=["integer"])
        d = run_with_metrics("no_step", jsonl(rows[:1] + [{k: v for k, v in rows[1].items() if k != "step"}]))
        c.bad("metrics.jsonl: row without step", d, [J(d, "metrics.jsonl") + ":2: step:"], also=["missing"])
        d = run_with_metrics("row_array", jsonl(rows[:1]) + "[1, 2]\n")
        c.bad("metrics.jsonl: row not an object", d, [J(d, "metrics.jsonl") + ":2:"], also=["object"])
        d = run_with_metrics("layer_string", jsonl(rows[:1] + [dict(rows[1], max_attn_logit=[1.0, "x"])]))
        c.bad("metrics.jsonl: per-layer value a string", d, [J(d, "metrics.jsonl") + ":2: max_attn_logit[1]:"])
        d = run_with_metrics("loss_bool", jsonl([dict(rows[0], loss=True)]))
        c.bad("metrics.jsonl: loss true", d, [J(d, "metrics.jsonl") + ":1: loss:"])

        d = make_run(c.fresh("metrics_dir"))
        os.remove(J(d, "metrics.jsonl"))
        os.mkdir(J(d, "metrics.jsonl"))
        c.bad("metrics.jsonl is a directory", d, [J(d, "metrics.jsonl")], also=["directory"])
        d = make_run(c.fresh("metrics_fifo"))
        os.remove(J(d, "metrics.jsonl"))
        os.mkfifo(J(d, "metrics.jsonl"))
        c.bad("metrics.jsonl is a FIFO (must not block)", d, [J(d, "metrics.jsonl")], also=["FIFO"])
        d = make_run(c.fresh("metrics_dev"))
        os.remove(J(d, "metrics.jsonl"))
        os.symlink("/dev/zero", J(d, "metrics.jsonl"))
        c.bad("metrics.jsonl -> /dev/zero", d, [J(d, "metrics.jsonl")], also=["device"])
        d = make_run(c.fresh("metrics_huge"))
        os.truncate(J(d, "metrics.jsonl"), (1 << 30) + 1)  # sparse: no disk used
        c.bad("metrics.jsonl above 1 GiB", d, [J(d, "metrics.jsonl")], also=["limit"])
        d = make_run(c.fresh("metrics_dangling"))
        os.remove(J(d, "metrics.jsonl"))
        os.symlink(J(d, "nowhere.jsonl"), J(d, "metrics.jsonl"))
        c.bad("metrics.jsonl a dangling symlink", d, [J(d, "metrics.jsonl")])
        if root:
            print("SKIP unreadable metrics.jsonl: running as root, which reads any file")
        else:
            d = make_run(c.fresh("metrics_unreadable"))
            os.chmod(J(d, "metrics.jsonl"), 0)
            c.bad("metrics.jsonl unreadable", d, [J(d, "metrics.jsonl")], also=["Permission denied"])

        # --- run directory: config.yaml, inspect.json ---------------------------------------------
        d = make_run(c.fresh("config_utf8"))
        write(J(d, "config.yaml"), b"model: {d_model: 16}\n# \xc3\x28\n", "wb")
        c.bad("config.yaml not UTF-8", d, [J(d, "config.yaml") + ":2:"], also=["UTF-8"])
        d = make_run(c.fresh("config_dir"))
        os.remove(J(d, "config.yaml"))
        os.mkdir(J(d, "config.yaml"))
        c.bad("config.yaml is a directory", d, [J(d, "config.yaml")], also=["directory"])
        d = make_run(c.fresh("inspect_json"))
        write(J(d, "inspect", "inspect.json"), '{"bias": [')
        c.bad("inspect.json not JSON", d, [J(d, "inspect", "inspect.json")], also=["JSON"])
        d = make_run(c.fresh("inspect_field"))
        with open(J(d, "inspect", "inspect.json")) as f:
            ins = json.load(f)
        ins["bias"][1]["distance"] = "0..3"
        write(J(d, "inspect", "inspect.json"), json.dumps(ins))
        c.bad("inspect.json bias[1].distance a string", d, [J(d, "inspect", "inspect.json") + ": bias[1].distance:"])
        d = make_run(c.fresh("inspect_kernel"))  # a convolution kernel (cpe) with a ragged row
        with open(J(d, "inspect", "inspect.json")) as f:
            ins = json.load(f)
        ins["conv_kernels"] = [{"param": "stack.pos.conv_weight", "shape": [2, 3, 3],
                                "mean_abs": [[0.1, 0.2, 0.1], [0.2, 0.3], [0.1, 0.2, 0.1]], "channels": []}]
        write(J(d, "inspect", "inspect.json"), json.dumps(ins))
        c.bad("inspect.json conv_kernels[0].mean_abs ragged", d,
              [J(d, "inspect", "inspect.json") + ": conv_kernels[0].mean_abs[1]"])
        d = make_run(c.fresh("inspect_fifo"))
        os.remove(J(d, "inspect", "inspect.json"))
        os.mkfifo(J(d, "inspect", "inspect.json"))
        c.bad("inspect.json is a FIFO (must not block)", d, [J(d, "inspect", "inspect.json")], also=["FIFO"])

        # --- sweep directory ----------------------------------------------------------------------
        def sweep_with_records(name, edit):
            d = make_sweep(c.fresh(name))
            recs = [sweep_record(d, i) for i in range(len(SWEEP_POINTS))]
            edit(recs)
            write(J(d, "sweep.jsonl"), jsonl(recs))
            return d

        d = make_sweep(c.fresh("sweep_json"))
        write(J(d, "sweep.json"), '{"grid_keys": ["a",]}')
        c.bad("sweep.json not JSON", d, [J(d, "sweep.json")], also=["JSON"])
        d = make_sweep(c.fresh("sweep_json_type"))
        write(J(d, "sweep.json"), '{"grid_keys": "optim.lr", "recipes": []}')
        c.bad("sweep.json grid_keys a string", d, [J(d, "sweep.json") + ": grid_keys:"])
        d = sweep_with_records("index_string", lambda rs: rs[2].update(index="2"))
        c.bad('sweep.jsonl: "index": "2"', d, [J(d, "sweep.jsonl") + ":3: index:"])
        d = sweep_with_records("no_status", lambda rs: rs[1].pop("status"))
        c.bad("sweep.jsonl: record without status", d, [J(d, "sweep.jsonl") + ":2: status:"], also=["missing"])
        d = sweep_with_records("eval_loss", lambda rs: rs[0]["eval"][1].update(loss="abc"))
        c.bad("sweep.jsonl: eval loss a string", d, [J(d, "sweep.jsonl") + ":1: eval[1].loss:"])
        d = sweep_with_records("eval_mode", lambda rs: rs[0]["eval"][0].update(mode=["windows"]))
        c.bad("sweep.jsonl: eval mode an array", d, [J(d, "sweep.jsonl") + ":1: eval[0].mode:"], also=["string"])
        d = sweep_with_records("final_loss", lambda rs: rs[3].update(final_train_loss=[2.0]))
        c.bad("sweep.jsonl: final_train_loss an array", d, [J(d, "sweep.jsonl") + ":4: final_train_loss:"])
        d = sweep_with_records("recipe", lambda rs: rs[3].update(recipe="zz"))
        c.bad("sweep.jsonl: recipe not in sweep.json", d, [J(d, "sweep.jsonl") + ":4: recipe:"], also=['"zz"'])
        d = sweep_with_records("grid_lr", lambda rs: rs[0]["grid"].update({"optim.lr": "fast"}))
        c.bad("sweep.jsonl: grid lr not a number", d, [J(d, "sweep.jsonl") + ":1: grid.optim.lr:"])
        d = make_sweep(c.fresh("sweep_utf8"))
        write(J(d, "sweep.jsonl"), b'{"name": "\xff"}\n', "ab")
        c.bad("sweep.jsonl not UTF-8", d, [J(d, "sweep.jsonl") + ":5:"], also=["UTF-8"])
        d = make_sweep(c.fresh("sweep_fifo"))
        os.remove(J(d, "sweep.jsonl"))
        os.mkfifo(J(d, "sweep.jsonl"))
        c.bad("sweep.jsonl is a FIFO (must not block)", d, [J(d, "sweep.jsonl")], also=["FIFO"])
        d = make_sweep(c.fresh("shard_dir"))
        os.mkdir(J(d, "sweep.shard-0-of-2.jsonl"))
        c.bad("sweep.shard-0-of-2.jsonl is a directory", d, [J(d, "sweep.shard-0-of-2.jsonl")], also=["directory"])
        d = make_sweep(c.fresh("point_metrics"))
        p = J(sweep_record(d, 3)["run_dir"], "metrics.jsonl")
        write(p, '{"step": 2, "loss": 2.0}\n{"step": "four", "loss": 1.9}\n')
        c.bad("a point's metrics.jsonl: step a string", d, [p + ":2: step:"])

        # --- sweeps that cannot lie, numbers at the edge, the memory budget ------------------------
        def seeded_sweep(name, losses, seeds, overrides=None):
            """Two runs of one configuration (train.seed varies) with these final losses."""
            d = c.fresh(name)
            recs = []
            for i, (loss, seed) in enumerate(zip(losses, seeds)):
                r = sweep_record(d, 0)
                r.update(index=i, name=f"type=alibi seed={seed}", grid={"model.position.type": "alibi",
                                                                        "train.seed": str(seed)},
                         recipe=None, final_train_loss=loss, final_val_loss=loss,
                         run_dir=os.path.join(d, f"{i:03d}_alibi_{seed}"),
                         overrides=["model.position.type=alibi", f"train.seed={seed}"] + (overrides or []))
                recs.append(r)
                make_run(r["run_dir"], with_inspect=False)
            meta = {"eval_lengths": [5, 10], "eval_modes": ["windows"], "grid_keys": ["model.position.type",
                                                                                     "train.seed"],
                    "point_names": [r["name"] for r in recs], "points": len(recs), "recipes": [], "spec": "s.yaml"}
            write(J(d, "sweep.json"), json.dumps(meta) + "\n")
            write(J(d, "sweep.jsonl"), jsonl(recs))
            return d

        c.good("seeds with finite but huge losses (1e200, 3e200)", seeded_sweep("huge_loss", [1e200, 3e200], [1, 2]))
        d = seeded_sweep("same_seed", [2.0, 2.1], [1, 2], overrides=["train.seed=7"])
        c.bad("two seeds that ran with one train.seed (a recipe set it)", d, [J(d, "sweep.jsonl")],
              also=["same train.seed 7"])
        d = make_sweep(c.fresh("dup_point_names"))
        meta = json.load(open(J(d, "sweep.json"), encoding="utf-8"))
        meta["point_names"] = meta["point_names"] + [meta["point_names"][0]]
        write(J(d, "sweep.json"), json.dumps(meta) + "\n")
        c.bad("sweep.json lists a point twice", d, [J(d, "sweep.json")], also=["point_names", "more than once"])
        # A metrics file whose parsed rows would not fit the address-space limit: refused by size,
        # naming the budget, not a MemoryError.
        d = make_run(c.fresh("metrics_over_budget"))
        row = json.dumps(metrics_rows()[1])
        with open(J(d, "metrics.jsonl"), "w", encoding="utf-8") as f:
            for s in range(1, 200001):
                f.write(row.replace('"step": 4', f'"step": {s}') + "\n")
        env, c.env = c.env, dict(c.env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        try:
            c.limit_as = 900 << 20
            c.bad("metrics.jsonl over the memory budget (ulimit -v 900 MiB)", d, [J(d, "metrics.jsonl")],
                  also=["RLIMIT_AS", "bytes of memory"])
        finally:
            c.env, c.limit_as = env, None

        # --- output -------------------------------------------------------------------------------
        d = make_run(c.fresh("out_file"))
        write(J(d, "out"), "a file\n")
        c.bad("--out is a file", d, [J(d, "out")], out=J(d, "out"), also=["not a directory"])
        d = make_run(c.fresh("out_under_file"))
        write(J(d, "out"), "a file\n")
        c.bad("--out below a file", d, [J(d, "out", "sub")], out=J(d, "out", "sub"))
        d = make_run(c.fresh("report_md_dir"))
        os.makedirs(J(d, "report", "report.md"))
        c.bad("report.md is a directory", d, [J(d, "report", "report.md")])
        if root:
            print("SKIP --out not writable: running as root, which writes anywhere")
        else:
            d = make_run(c.fresh("out_readonly"))
            os.makedirs(J(d, "ro"))
            os.chmod(J(d, "ro"), 0o555)
            c.bad("--out not writable", d, [J(d, "ro")], out=J(d, "ro"))
            os.chmod(J(d, "ro"), 0o755)
        full_disk(c, root)

        for dirpath, dirnames, _ in os.walk(tmp):  # let TemporaryDirectory remove everything
            for n in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, n), 0o755)
                except OSError:
                    pass
        print(f"{c.passed} passed, {c.failed} failed")
        return 1 if c.failed else 0


def full_disk(c, root):
    """A report into a 64 KiB tmpfs: one line naming a file and ENOSPC, no report.md, no temporary
    file left behind. Needs root and a kernel that lets this process mount; SKIP otherwise."""
    if not root or not shutil.which("mount"):
        print("SKIP full disk: needs root and mount(8)")
        return
    d = make_run(c.fresh("full_disk"))
    mnt = os.path.join(d, "small")
    os.makedirs(mnt)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], capture_output=True, text=True)
    if m.returncode != 0:
        print(f"SKIP full disk: cannot mount a tmpfs ({m.stderr.strip() or m.returncode})")
        return
    try:
        c.bad("disk full while writing", d, [mnt], out=mnt, also=["No space left on device"])
        left = os.listdir(mnt)
        problems = []
        if "report.md" in left:
            problems.append("report.md written although figures are missing")
        if any(".tmp-" in n for n in left):
            problems.append(f"temporary files left: {left}")
        c.result("disk full: no report.md, no temporary file", problems)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
