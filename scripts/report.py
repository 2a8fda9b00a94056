#!/usr/bin/python3
"""scripts/report.py - the figures and Markdown report behind `relpos report DIR`.

DIR is a run directory (metrics.jsonl, config.yaml) or a sweep directory (sweep.json, the
index files sweep.jsonl / sweep.shard-I-of-N.jsonl / sweep.point-I.jsonl, merged as
read_sweep_index in experiments/sweep.h does, one run directory per point). Writes into OUT
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
training-loss curves of every point. Runs of a sweep that differ only in train.seed (`seeds: N`)
form one point: its numbers are the mean over seeds with a 95% Student-t interval (table cells
"mean ± half-width", bands in the figures), and points are ranked only in tiers that the
intervals separate (tiers()).

Inputs are validated before they are drawn: every file must be a regular file (a FIFO or
device is refused without being opened for a blocking read) of at most 1 GiB, UTF-8, and
hold the JSON the writers in trainers/ produce. A problem ends the script with exit status
1 and one line on stderr, `report: <file>:<line>: <field>: <what was expected, what was
found>` (line and field where they apply), never a traceback. As in trainers/metrics.cpp,
a last line of metrics.jsonl without a newline that does not parse (cut short by a crash)
is dropped; as in read_sweep_index (experiments/sweep.cpp), index lines that do not parse or
hold no string "name" are skipped. Every write is checked (disk full, permissions: one line
naming the file and the reason, exit 1); each file is written to a temporary name and
renamed, and report.md is written last, so a failed run never leaves a report.md that links
figures that were not written.
Only the Python standard library, numpy and matplotlib (Debian python3-matplotlib).
"""
import argparse
import errno
import fcntl
import io
import json
import math
import os
import stat
import sys
import types

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
    import numpy as np
except Exception as e:  # noqa: BLE001 - one line instead of a traceback
    reason = " ".join(f"{type(e).__name__}: {e}".split())
    sys.stderr.write(f"report: cannot import matplotlib ({reason}); install python3-matplotlib\n")
    sys.exit(1)

MAX_INPUT_BYTES = 1 << 30  # every file read (trainers/limits.h kMaxMetricsBytes)


def num(v):
    """metrics values: numbers, or the strings nan / inf / -inf."""
    if v is None:
        return math.nan
    if isinstance(v, str):
        return float(v)
    return float(v)


class ReportError(Exception):
    """An input or output problem, shown as one line: report: <file>:<line>: <field>: <what>."""

    def __init__(self, path, what, line=None, field=None):
        super().__init__(what)
        self.path, self.what, self.line, self.field = path, what, line, field

    def __str__(self):
        where = str(self.path) + (f":{self.line}" if self.line is not None else "")
        return where + (f": {self.field}" if self.field else "") + f": {self.what}"


# ---------------------------------------------------------------------------------------------
# Reading: one bounded reader for every file, one small validating reader per file kind.

def os_reason(e):
    return e.strerror or str(e)


def file_kind(mode):
    for test, name in [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]:
        if test(mode):
            return name
    return "not a regular file"


# Reading a JSON-lines file into Python objects takes many times its size; a file is refused up
# front when that much exceeds the memory budget (as trainers/available_memory.h: the least of
# MemAvailable, the cgroup's headroom, RLIMIT_AS and RLIMIT_DATA minus what is in use).
BYTES_PER_INPUT_BYTE = 24


def memory_budget():
    """(bytes, what bounded it), or (None, None) when nothing is known."""
    best = (None, None)

    def consider(n, what):
        nonlocal best
        if n is not None and n >= 0 and (best[0] is None or n < best[0]):
            best = (n, what)

    status = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                k, _, v = line.partition(":")
                if v.strip().endswith("kB"):
                    status[k] = int(v.split()[0]) * 1024
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    consider(int(line.split()[1]) * 1024, "MemAvailable")
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            lim = f.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            cur = int(f.read().strip())
        if lim != "max":
            consider(max(int(lim) - cur, 0), "cgroup memory.max - memory.current")
    except (OSError, ValueError):
        pass
    try:
        import resource
        for res, label, field in ((resource.RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize"),
                                  (resource.RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData")):
            soft = resource.getrlimit(res)[0]
            if soft != resource.RLIM_INFINITY:
                consider(max(soft - status.get(field, 0), 0), f"{label} {soft} minus {status.get(field, 0)} in use")
    except (ImportError, OSError, ValueError):
        pass
    return best


def check_regular(path, st, what):
    if not stat.S_ISREG(st.st_mode):
        raise ReportError(path, f"is {file_kind(st.st_mode)}, expected the {what} (a regular file)")
    if st.st_size > MAX_INPUT_BYTES:
        raise ReportError(path, f"is {st.st_size} bytes, more than the limit of {MAX_INPUT_BYTES} bytes for the {what}")
    budget, source = memory_budget()
    if budget is not None and st.st_size * BYTES_PER_INPUT_BYTE > budget:
        raise ReportError(path, f"is {st.st_size} bytes; reading the {what} needs about "
                                f"{st.st_size * BYTES_PER_INPUT_BYTE} bytes of memory, more than the {budget} "
                                f"available ({source})")


def read_text(path, what):
    """The whole of a regular file, decoded as UTF-8. Checked with stat before it is opened (a
    FIFO or device is never read), opened non-blocking and checked again on the descriptor,
    read with a hard cap (a file that grows past the limit while being read is refused)."""
    try:
        check_regular(path, os.stat(path), what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ReportError(path, f"cannot read the {what}: {os_reason(e)}") from None
    try:
        check_regular(path, os.fstat(fd), what)
        chunks, size = [], 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            size += len(b)
            if size > MAX_INPUT_BYTES:
                raise ReportError(path, f"grew past the limit of {MAX_INPUT_BYTES} bytes for the {what} while being read")
            chunks.append(b)
    except OSError as e:
        raise ReportError(path, f"cannot read the {what}: {os_reason(e)}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ReportError(path, f"not valid UTF-8 (byte 0x{data[e.start]:02x} at column {col})", line=line) from None


def parse_json(path, text, line=None):
    try:
        return json.loads(text)
    except RecursionError:
        raise ReportError(path, "not valid JSON (nested too deeply)", line=line) from None
    except json.JSONDecodeError as e:
        pos = f"column {e.colno}" if line is not None else f"line {e.lineno} column {e.colno}"
        raise ReportError(path, f"not valid JSON ({e.msg}, {pos})", line=line) from None
    except ValueError as e:  # e.g. an integer of more digits than int() converts
        raise ReportError(path, f"not valid JSON ({e})", line=line) from None


def describe(v):
    """A JSON value as the error messages name it: its type and, when short, the value."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        s = repr(v)
        return f"the number {s if len(s) <= 24 else s[:21] + '...'}"
    if isinstance(v, str):
        s = json.dumps(v)
        return f"the string {s if len(s) <= 32 else s[:29] + '...'}"
    return "an array" if isinstance(v, list) else "an object"


class Where:
    """The place a value came from (file, line) and a field path, for ReportError."""

    def __init__(self, path, line=None, field=None):
        self.path, self.line, self.field = path, line, field

    def sub(self, key):
        if isinstance(key, int):
            return Where(self.path, self.line, f"{self.field or ''}[{key}]")
        return Where(self.path, self.line, f"{self.field}.{key}" if self.field else key)

    def fail(self, expected, v):
        raise ReportError(self.path, f"expected {expected}, found {describe(v)}", line=self.line, field=self.field)

    def missing(self, key, expected):
        raise ReportError(self.path, f"expected {expected}, but the field is missing", line=self.line,
                          field=self.sub(key).field)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_int(v, at, null=False, lo=-(1 << 63), hi=(1 << 63) - 1):
    if (v is None and null) or (is_int(v) and lo <= v <= hi):
        return v
    if is_int(v):
        at.fail(f"an integer in [{lo}, {hi}]", v)
    at.fail("an integer or null" if null else "an integer", v)


def check_value(v, at, null=True, strings=True):
    """A number, or (metrics) a string float() reads such as "nan", "inf", "-inf", or null."""
    expected = "a number" + (' or a string such as "nan"' if strings else "") + (" or null" if null else "")
    if v is None and null:
        return v
    if is_number(v) or (strings and isinstance(v, str)):
        try:
            float(v)
            return v
        except (ValueError, OverflowError):
            pass
    at.fail(expected, v)


def check_values(v, at, null=True, strings=True):
    if not isinstance(v, list):
        at.fail("an array of numbers", v)
    for i, x in enumerate(v):
        check_value(x, at.sub(i), null=null, strings=strings)
    return v


def check_str(v, at, null=False):
    if isinstance(v, str) or (v is None and null):
        return v
    at.fail("a string" + (" or null" if null else ""), v)


def check_object(v, at):
    if not isinstance(v, dict):
        at.fail("a JSON object", v)
    return v


def require(obj, key, at, expected):
    if key not in obj:
        at.missing(key, expected)
    return obj[key]


METRIC_SCALARS = ("loss", "val_loss", "lr", "grad_norm", "z_loss")
METRIC_ARRAYS = ("max_attn_logit", "attn_entropy", "bias_scale")


def check_metrics_row(row, at):
    check_object(row, at)
    check_int(require(row, "step", at, "an integer"), at.sub("step"))
    for k in METRIC_SCALARS:
        if k in row:
            check_value(row[k], at.sub(k))
    for k in METRIC_ARRAYS:
        if k in row:
            check_values(row[k], at.sub(k))
    if "clipped" in row and not isinstance(row["clipped"], bool):
        at.sub("clipped").fail("true or false", row["clipped"])
    if "first_divergence_step" in row:
        check_int(row["first_divergence_step"], at.sub("first_divergence_step"), null=True)


def read_metrics(path):
    """The rows of a metrics.jsonl, as parse_jsonl in trainers/metrics.cpp reads them: blank lines
    skipped, a last line without newline that does not parse dropped (a crash leftover), any other
    line must be a JSON object with an integer "step"."""
    text = read_text(path, "metrics file")
    lines = text.split("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip(" \t\r"):
            continue
        last_unterminated = i == len(lines) - 1
        try:
            row = parse_json(path, line, line=i + 1)
        except ReportError:
            if last_unterminated:
                break
            raise
        check_metrics_row(row, Where(path, i + 1))
        rows.append(row)
    return rows


def read_json_file(path, what):
    """A JSON file holding one object."""
    return check_object(parse_json(path, read_text(path, what)), Where(path))


def read_sweep_meta(path):
    """sweep.json, written by run_sweep (experiments/sweep.cpp)."""
    meta = read_json_file(path, "sweep description")
    at = Where(path)
    for key in ("point_names", "grid_keys", "recipes", "eval_val_paths"):
        v = meta.get(key)
        if v is None:
            continue
        if not isinstance(v, list):
            at.sub(key).fail("an array of strings", v)
        for i, s in enumerate(v):
            check_str(s, at.sub(key).sub(i))
    names = meta.get("point_names") or []
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:  # one run listed as several would show as several seeds with a spread of 0
        raise ReportError(path, f"point_names lists {', '.join(repr(n) for n in dup[:5])} more than once; "
                                "each point is one run", field="point_names")
    return meta


def check_sweep_record(r, at):
    """One record of a sweep index file (the fields the report reads)."""
    check_int(require(r, "index", at, "an integer"), at.sub("index"))
    check_str(require(r, "status", at, "a string"), at.sub("status"))
    check_str(require(r, "run_dir", at, "a string"), at.sub("run_dir"))
    r.setdefault("grid", {})  # a point of a sweep without a grid (points: only) may omit it
    check_object(r["grid"], at.sub("grid"))
    check_str(r.get("recipe"), at.sub("recipe"), null=True)
    for k in ("final_train_loss", "final_val_loss"):
        check_value(r.get(k), at.sub(k), strings=False)
    check_int(r.get("first_divergence_step"), at.sub("first_divergence_step"), null=True)
    ev = r.get("eval", [])
    if not isinstance(ev, list):
        at.sub("eval").fail("an array of evaluations", ev)
    for i, e in enumerate(ev):
        ea = at.sub("eval").sub(i)
        check_object(e, ea)
        check_int(require(e, "seq_len", ea, "an integer"), ea.sub("seq_len"), lo=1)
        check_str(e.get("mode"), ea.sub("mode"), null=True)
        check_value(require(e, "loss", ea, "a number or null"), ea.sub("loss"), strings=False)
        check_value(e.get("beyond_loss"), ea.sub("beyond_loss"), strings=False)
        check_value(e.get("accuracy"), ea.sub("accuracy"), strings=False)
        check_value(e.get("subset_loss"), ea.sub("subset_loss"), strings=False)
        check_str(e.get("subset"), ea.sub("subset"), null=True)


def sweep_index_files(sweep_dir):
    """Every index file of a sweep directory: sweep.jsonl first, then sweep.shard-*.jsonl and
    sweep.point-*.jsonl sorted by name (experiments/sweep.h, sweep_index_files). Unlike there, an
    entry of such a name that is not a regular file is listed too, so that reading it fails
    with its name instead of the file being ignored."""
    out = []
    if os.path.lexists(os.path.join(sweep_dir, "sweep.jsonl")):
        out.append(os.path.join(sweep_dir, "sweep.jsonl"))
    try:
        names = os.listdir(sweep_dir)
    except OSError as e:
        raise ReportError(sweep_dir, f"cannot list the directory: {os_reason(e)}") from None
    more = sorted(n for n in names
                  if n.endswith(".jsonl") and (n.startswith("sweep.shard-") or n.startswith("sweep.point-"))
                  and len(n) > len("sweep.shard-.jsonl"))
    return out + [os.path.join(sweep_dir, n) for n in more]


def to_float(v):
    try:
        return float(v)
    except OverflowError:  # an integer beyond double range
        return math.inf if v > 0 else -math.inf


def index_of(r):
    return r["index"] if is_int(r.get("index")) else float("inf")


def read_sweep_index(sweep_dir):
    """All index files merged, as read_sweep_index in experiments/sweep.h: one record per point
    name (a "done" record wins over any other; among equals the larger "finished_at", then the
    later file and line), ordered by "index" (ties by name). Lines that do not parse (a crash
    leftover, possibly with a later record appended to it) and records without a string "name"
    are skipped as there; every other record is validated."""
    best = {}
    for fi, path in enumerate(sweep_index_files(sweep_dir)):
        for li, line in enumerate(read_text(path, "sweep index").split("\n")):
            try:
                r = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a line cut short by a crash
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                continue
            check_sweep_record(r, Where(path, li + 1))
            at = r.get("finished_at")
            at = to_float(at) if is_number(at) else 0.0
            key = (r.get("status") == "done", at, fi, li)
            if r["name"] not in best or key > best[r["name"]][0]:
                best[r["name"]] = (key, r, Where(path, li + 1))
    recs = [best[n][1:] for n in sorted(best)]
    recs.sort(key=lambda rw: index_of(rw[0]))
    return recs


def check_matrix(m, at):
    """A non-empty rectangular array of arrays of numbers (or null)."""
    if not isinstance(m, list) or not m:
        at.fail("a non-empty array of rows", m)
    for i, row in enumerate(m):
        check_values(row, at.sub(i), strings=False)
        if len(row) != len(m[0]) or not row:
            raise ReportError(at.path, f"expected {len(m[0]) or 'at least 1'} values (as many as row 0), "
                              f"found {len(row)}", field=at.sub(i).field)
    return m


def read_inspect(path):
    """inspect/inspect.json, written by `relpos inspect` (cli/main.cpp run_inspect)."""
    ins = read_json_file(path, "inspect output")
    at = Where(path)
    bias = ins.get("bias")
    if bias:
        if not isinstance(bias, list):
            at.sub("bias").fail("an array of curves", bias)
        check_str(require(ins, "position", at, "a string"), at.sub("position"))
        check_int(require(ins, "step", at, "an integer"), at.sub("step"))
        for i, c in enumerate(bias):
            ca = at.sub("bias").sub(i)
            check_object(c, ca)
            check_int(require(c, "layer", ca, "an integer"), ca.sub("layer"))
            check_int(require(c, "head", ca, "an integer"), ca.sub("head"))
            d = check_values(require(c, "distance", ca, "an array of numbers"), ca.sub("distance"), strings=False)
            b = check_values(require(c, "bias", ca, "an array of numbers"), ca.sub("bias"), strings=False)
            if len(b) != len(d):
                raise ReportError(path, f"expected {len(d)} values (as many as distance), found {len(b)}",
                                  field=ca.sub("bias").field)
    rows = ins.get("position_grad_rows", [])
    if not isinstance(rows, list):
        at.sub("position_grad_rows").fail("an array", rows)
    for i, r in enumerate(rows):
        ra = at.sub("position_grad_rows").sub(i)
        check_object(r, ra)
        check_str(require(r, "param", ra, "a string"), ra.sub("param"))
        norms = check_values(require(r, "row_norm", ra, "an array of numbers"), ra.sub("row_norm"), strings=False)
        require(r, "shape", ra, "an array of integers")
        if "row_distance" in r:
            rd = r["row_distance"]
            if not isinstance(rd, list) or len(rd) != len(norms):
                ra.sub("row_distance").fail(f"an array of {len(norms)} [min, max] pairs or nulls (one per row)", rd)
            for k, d in enumerate(rd):
                if d is not None and not (isinstance(d, list) and len(d) == 2 and all(is_int(x) for x in d)
                                          and d[0] <= d[1]):
                    ra.sub("row_distance").sub(k).fail("null or [min, max] integers with min <= max", d)
            check_int(require(r, "train_distance", ra, "an integer"), ra.sub("train_distance"), lo=0)
            check_int(require(r, "probe_distance", ra, "an integer"), ra.sub("probe_distance"), lo=1)
    kernels = ins.get("conv_kernels", [])
    if not isinstance(kernels, list):
        at.sub("conv_kernels").fail("an array of kernels", kernels)
    for i, kr in enumerate(kernels):
        ka = at.sub("conv_kernels").sub(i)
        check_object(kr, ka)
        check_str(require(kr, "param", ka, "a string"), ka.sub("param"))
        check_matrix(require(kr, "mean_abs", ka, "a k x k array"), ka.sub("mean_abs"))
        chans = require(kr, "channels", ka, "an array of k x k arrays")
        if not isinstance(chans, list):
            ka.sub("channels").fail("an array of k x k arrays", chans)
        for c, m in enumerate(chans):
            check_matrix(m, ka.sub("channels").sub(c))
    grid = ins.get("bias_grid")
    if grid:
        ga = at.sub("bias_grid")
        check_object(grid, ga)
        check_str(require(grid, "row_axis", ga, "a string"), ga.sub("row_axis"))
        check_str(require(grid, "col_axis", ga, "a string"), ga.sub("col_axis"))
        heads = require(grid, "heads", ga, "an array of [rows x cols] matrices, one per head")
        if not isinstance(heads, list) or not heads:
            ga.sub("heads").fail("a non-empty array of matrices", heads)
        for h, m in enumerate(heads):
            check_matrix(m, ga.sub("heads").sub(h))
    att = ins.get("attention")
    if att:
        check_object(att, at.sub("attention"))
        layers = att.get("layers")
        if layers:
            la = at.sub("attention").sub("layers")
            if not isinstance(layers, list):
                la.fail("an array of layers", layers)
            heads = layers[0]
            if not isinstance(heads, list) or not heads:
                la.sub(0).fail("a non-empty array of heads", heads)
            for h, m in enumerate(heads):
                check_matrix(m, la.sub(0).sub(h))
            require(att, "text", at.sub("attention"), "a string")
    return ins


def read_run(run_dir):
    """Everything a run report reads: (metrics rows, inspect.json or None, config.yaml text or None)."""
    rows = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
    ins_path = os.path.join(run_dir, "inspect", "inspect.json")
    ins = read_inspect(ins_path) if os.path.lexists(ins_path) else None
    cfg_path = os.path.join(run_dir, "config.yaml")
    cfg = read_text(cfg_path, "run's config") if os.path.lexists(cfg_path) else None
    return rows, ins, cfg


# ---------------------------------------------------------------------------------------------
# Writing: every file to a temporary name in the output folder, then renamed; errors named.

def write_file(path, data):
    """Writes bytes to path atomically (temporary file, fsync, rename); any OSError (disk full,
    I/O error, permissions) becomes a ReportError naming path, and no temporary file is left."""
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            try:
                os.fsync(f.fileno())
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.ENOTSUP):  # a file system without fsync
                    raise
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ReportError(path, f"cannot write: {os_reason(e)}") from None


def make_output_dir(out):
    try:
        os.makedirs(out, exist_ok=True)
    except FileExistsError:
        raise ReportError(out, "exists and is not a directory; expected the output folder") from None
    except OSError as e:
        raise ReportError(out, f"cannot create the output folder: {os_reason(e)}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ReportError(out, "cannot write into the output folder: Permission denied")
    lock_output_dir(out)


_LOCK = None  # held (open) until the process ends: the kernel releases the flock then


def lock_output_dir(out):
    """One report at a time per output folder: an advisory flock on OUT/.relpos.lock (the same
    file and rule as relpos's run-directory lock), the holder's pid named to a second process."""
    global _LOCK
    path = os.path.join(out, ".relpos.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        raise ReportError(path, f"cannot open the lock file: {os_reason(e)}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise ReportError(out, "is in use by another relpos process" + (f" (pid {holder})" if holder else "")
                              + "; wait for it to finish or pass another --out") from None
        raise ReportError(path, f"cannot lock: {os_reason(e)}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _LOCK = fd


# ---------------------------------------------------------------------------------------------
# Drawing.

class Figures:
    def __init__(self, out):
        self.out = out
        self.made = []  # (file stem, caption), only figures whose PNG and JSON were both written

    def save(self, stem, fig, title, xlabel, ylabel, series, caption, extra=None):
        try:
            if not fig.get_layout_engine():
                fig.tight_layout()
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=110)
        finally:
            plt.close(fig)
        data = {"title": title, "xlabel": xlabel, "ylabel": ylabel, "series": series}
        if extra:
            data.update(extra)
        write_file(os.path.join(self.out, stem + ".png"), png.getvalue())
        write_file(os.path.join(self.out, stem + ".json"), json.dumps(data, indent=1, allow_nan=True).encode())
        self.made.append((stem, caption))


# Okabe & Ito's colour-blind-safe palette (Color Universal Design), black last; beyond 8 series
# the colours repeat with another line style.
PALETTE = ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000"]
LINESTYLES = ["-", "--", ":", "-."]


def style(i):
    """Distinct colour + line style for series i (colour-blind safe; 8 colours x 4 line styles)."""
    return {"color": PALETTE[i % len(PALETTE)], "linestyle": LINESTYLES[(i // len(PALETTE)) % len(LINESTYLES)]}


def outside_legend(ax, n):
    """The legend right of the axes, never over the data."""
    ax.legend(fontsize=7, ncol=1 if n <= 16 else 2, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0.0, frameon=False)


def line_figure(figs, stem, title, xlabel, ylabel, series, caption, logy=False, markers=None):
    """series: [{"label", "x", "y"}]; markers: optional [{"label", "x", "y"}] drawn as points."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, s in enumerate(series):
        ax.plot(s["x"], s["y"], label=s["label"], marker="o" if len(s["x"]) <= 12 else None, ms=3, **style(i))
    for m in markers or []:
        ax.scatter(m["x"], m["y"], color="#D55E00", marker="x", s=25, label=m["label"], zorder=5)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if series or markers:
        outside_legend(ax, len(series) + len(markers or []))
    figs.save(stem, fig, title, xlabel, ylabel, series + (markers or []), caption)


# ---------------------------------------------------------------------------------------------
# Seeds: the runs of a sweep point that differ only in train.seed are one configuration; its
# numbers are the mean over seeds with a 95% Student-t interval.

SEED_KEY = "train.seed"  # the grid key `seeds: N` adds (experiments/sweep.h kSeedKey)

# Two-sided 95% quantiles of Student's t, t(0.975, df) for df = 1..30 (standard tables); above 30
# the value at the lower end of the bracket is used (30 < df <= 40: 2.042, ...): never too narrow.
T975 = [None, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


def t975(df):
    if df < 1:
        raise ValueError("t975: df must be >= 1")
    if df <= 30:
        return T975[df]
    for top, low_end in ((40, 2.042), (60, 2.021), (120, 2.000)):
        if df <= top:
            return low_end
    return 1.980


def summarize(values):
    """One number per seed (None, nan, inf: that seed gave no finite value) -> {"n", "finite",
    "mean", "half", "lo", "hi"}: the mean of the finite values and the half-width of its 95%
    Student-t interval, t(0.975, k-1) * s / sqrt(k) (k finite values, s their sample standard
    deviation); half, lo, hi are None with fewer than 2 finite values, mean None with none."""
    vals = [num(v) for v in values if v is not None and math.isfinite(num(v))]
    k = len(vals)
    out = {"n": len(values), "finite": k, "mean": None, "half": None, "lo": None, "hi": None}
    if k == 0:
        return out
    m = math.fsum(v / k for v in vals)  # each term divided first: no overflow for finite values near the max
    out["mean"] = m
    if k >= 2:
        # scaled by the largest deviation, so squares of huge finite values (1e200) cannot overflow
        big = max(abs(v - m) for v in vals)
        sd = 0.0 if big == 0 or not math.isfinite(big) else \
            big * math.sqrt(math.fsum(((v - m) / big) * ((v - m) / big) for v in vals) / (k - 1))
        h = t975(k - 1) * sd / math.sqrt(k)
        out.update(half=h, lo=m - h, hi=m + h)
    return out


def fmt_summary(sm):
    """'2.0312 ± 0.0140' ('2.0312' with one value, '-' with none), '(k of n finite)' when some
    seeds gave no finite value."""
    if sm["mean"] is None:
        return "-" if sm["n"] <= 1 else f"- (0 of {sm['n']} finite)"
    t = f"{sm['mean']:.4f}" + (f" ± {sm['half']:.4f}" if sm["half"] is not None else "")
    if sm["finite"] < sm["n"]:
        t += f" ({sm['finite']} of {sm['n']} finite)"
    return t


def tiers(items):
    """items: [(label, summary)] -> [(tier, label, summary)] in order of the means (lower is
    better). Tier 1 starts with the best mean; each next item joins the current tier while its
    95% interval overlaps that of the tier's first item, else it starts the next tier. So items
    of one tier are not separated from the tier's first item, and each tier's first item is
    separated from the previous tier's first item. Items without an interval (one finite seed)
    are left out: no ranking without one."""
    ok = sorted([(lab, sm) for lab, sm in items if sm["half"] is not None], key=lambda t: t[1]["mean"])
    out, tier, lead = [], 0, None
    for lab, sm in ok:
        if lead is None or sm["lo"] > lead["hi"]:  # sorted by mean: only the upper side can separate
            tier, lead = tier + 1, sm
        out.append((tier, lab, sm))
    return out


def interval_note(seeded):
    return " (mean over seeds; band: its 95% interval)" if seeded else ""


def small_multiples(figs, stem, title, xlabel, ylabel, series, caption, log2x=None):
    """One panel per series, shared axes: the series in colour (with its 95% interval band where
    it has "lo"/"hi"), every other series in light grey behind it for comparison.
    series: [{"label", "x", "y", optional "lo", "hi"}]."""
    n = len(series)
    cols = max(1, min(4, n))
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols + 0.6, 2.5 * rows + 0.9), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_visible(False)
            continue
        for j, o in enumerate(series):
            if j != k:
                ax.plot(o["x"], o["y"], color="#BBBBBB", lw=0.8, zorder=1)
        s = series[k]
        c = PALETTE[3]  # one colour: the panel title says which series it is
        if s.get("lo") and any(v is not None for v in s["lo"]):
            lo = [np.nan if v is None else v for v in s["lo"]]
            hi = [np.nan if v is None else v for v in s["hi"]]
            ax.fill_between(s["x"], lo, hi, color=c, alpha=0.25, lw=0, zorder=2)
        ax.plot(s["x"], s["y"], color=c, lw=1.6, marker="o" if len(s["x"]) <= 12 else None, ms=3, zorder=3)
        ax.set_title(s["label"], fontsize=9)
        if log2x:
            ax.set_xscale("log", base=2)
            ax.set_xticks(log2x)
            ax.set_xticklabels([str(v) for v in log2x], fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.supxlabel(xlabel, fontsize=9)
    fig.supylabel(ylabel, fontsize=9)
    fig.suptitle(title, fontsize=10)
    figs.save(stem, fig, title, xlabel, ylabel, series, caption)


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


def run_figures(rows, figs, prefix="", name=""):
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


def row_label(d, probe):
    """Tick label of a distance-indexed table row from its [min, max] of kj - qi: causal rows
    (max <= 0) in tokens back ('0', '5-7', '>=64' when the range runs to the probe's end)."""
    if d is None:
        return "none"
    lo, hi = d
    if hi <= 0:
        a, b = -hi, -lo
        return f">={a}" if b >= probe else (f"{a}" if a == b else f"{a}-{b}")
    if lo >= 0:
        return f">=+{lo}" if hi >= probe else (f"+{lo}" if lo == hi else f"+{lo}-{hi}")
    return f"{lo}..{hi}"


def distance_axis(ins, what="distance kj - qi"):
    """The x label of a distance: tokens, or the channel model.position.distance names (time)."""
    d = ins.get("distance", "index")
    if d == "index":
        return f"{what} (tokens)"
    return f"{what} (channel '{d}'" + (", 16ths)" if d == "time" else ")")


def bias_figure(ins, figs):
    """The learned additive bias of each head vs distance (per layer unless one table is shared)."""
    shared = all(c["layer"] == -1 for c in ins["bias"])
    series = [{"label": (f"head {c['head']}" if c["layer"] == -1 else f"layer {c['layer']} head {c['head']}"),
               "x": c["distance"], "y": c["bias"]} for c in ins["bias"]]
    line_figure(figs, "bias_vs_distance",
                f"Learned bias vs distance ({ins['position']}, step {ins['step']}"
                f"{', the same in every layer' if shared else ''})",
                distance_axis(ins), "bias added to the logit", series,
                "The additive position bias of each head (times alpha), query attending back" +
                (": every layer adds the same bias (one table shared by all layers, or a fixed bias), so it "
                 "is drawn once per head." if shared else ", per layer and head."))


def grad_rows_figure(ins, r, figs):
    """The gradient norm each row of one position table receives on a batch (log scale), rows
    labelled with the distances they serve; rows with exactly zero gradient marked."""
    if len(r["row_norm"]) < 2:
        return
    stem = "grad_rows_" + r["param"].replace(".", "_")
    norms = [num(v) for v in r["row_norm"]]
    x = list(range(len(norms)))
    dist = r.get("row_distance")
    fig, ax = plt.subplots(figsize=(max(7.0, 0.28 * len(x) + 2), 4))
    pos = [v for v in norms if math.isfinite(v) and v > 0]
    floor = min(pos) / 10 if pos else 1e-12
    ax.bar(x, [v if v > 0 else np.nan for v in norms], color=PALETTE[3], label="||grad row|| (one batch)")
    zero = [i for i, v in enumerate(norms) if not v > 0]
    caption = ("Gradient magnitude each row of the position table receives on one training batch: "
               "rows near zero do not learn.")
    if zero:
        why = "no gradient"
        if dist is not None:
            T = r["train_distance"]
            if all(dist[i] is None or min(abs(dist[i][0]), abs(dist[i][1])) > T for i in zero):
                why = f"no gradient: beyond the longest training distance, {T}"
        ax.scatter(zero, [floor] * len(zero), marker="x", color=PALETTE[4], zorder=5, label=f"unreached ({why})")
        caption += f" Crosses mark rows with exactly zero gradient ({why})."
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor / 2)
    labels = None
    if dist is not None:
        labels = [row_label(d, r["probe_distance"]) for d in dist]
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        causal = all(d is None or d[1] <= 0 for d in dist)
        ax.set_xlabel(distance_axis(ins, "table row, labelled with the distances it serves, qi - kj back") if causal
                      else distance_axis(ins, "table row, labelled with the distances kj - qi it serves"))
        caption += (" Each row is labelled with the distances that use it; training saw distances up to "
                    f"{r['train_distance']}.")
    else:
        ax.set_xlabel("table row (position / index)")
    ax.set_ylabel("gradient L2 norm (log scale)")
    ax.set_title(f"Gradient per row of {r['param']} {r['shape']}")
    outside_legend(ax, 2)
    figs.save(stem, fig, ax.get_title(), ax.get_xlabel(), ax.get_ylabel(),
              [{"label": "row norm", "x": x, "y": r["row_norm"]}], caption,
              extra={"row_labels": labels} if labels else None)


def conv_kernel_figure(kr, figs):
    """A learned depthwise kernel: the mean |w| of each tap over channels, then the first channels."""
    panels = [("mean |w| over channels", kr["mean_abs"])] + \
        [(f"channel {c}", m) for c, m in enumerate(kr["channels"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(1.9 * len(panels) + 1.2, 2.6), squeeze=False,
                             layout="constrained")
    for ax, (title, m) in zip(axes[0], panels):
        a = np.asarray(m, dtype=float)
        lim = float(np.nanmax(np.abs(a))) if np.isfinite(a).any() else 1.0
        im = ax.imshow(a, cmap="viridis" if title.startswith("mean") else "RdBu_r",
                       vmin=0 if title.startswith("mean") else -lim, vmax=lim or 1.0)
        ax.set_title(title, fontsize=8)
        ax.set_xticks(range(a.shape[1]))
        ax.set_yticks(range(a.shape[0]))
        ax.set_xticklabels([str(v - a.shape[1] // 2) for v in range(a.shape[1])], fontsize=7)
        ax.set_yticklabels([str(v - a.shape[0] // 2) for v in range(a.shape[0])], fontsize=7)
        fig.colorbar(im, ax=ax, shrink=0.7)
    stem = "kernel_" + kr["param"].replace(".", "_")
    figs.save(stem, fig, f"Convolution kernel {kr['param']}", "column offset", "row offset", [],
              f"The learned k x k depthwise kernel {kr['param']} {kr.get('shape')}: the mean |w| of each tap "
              "over the channels (which neighbours the generated positions read), then the first channels' "
              "kernels (signed). Offsets are relative to the token (0, 0 = the token itself).",
              extra={"mean_abs": kr["mean_abs"], "channels": kr["channels"]})


def bias_grid_figure(ins, grid, figs):
    """The learned bias of each head over a 2D grid of relations (ast: up x down steps)."""
    heads = grid["heads"]
    fig, axes = plt.subplots(1, len(heads), figsize=(3.2 * len(heads) + 1, 3.4), squeeze=False,
                             layout="constrained")
    vals = [num(v) for m in heads for row in m for v in row if v is not None and math.isfinite(num(v))]
    lim = max([abs(v) for v in vals] + [1e-12])
    for h, (ax, m) in enumerate(zip(axes[0], heads)):
        im = ax.imshow(np.asarray(m, dtype=float), cmap="RdBu_r", vmin=-lim, vmax=lim, origin="lower")
        ax.set_title(f"head {h}")
        ax.set_xlabel(grid["col_axis"].split(":")[0])  # "down: steps from ..." -> "down"
        ax.set_ylabel(grid["row_axis"].split(":")[0])
    fig.colorbar(im, ax=axes[0].tolist(), label="bias added to the logit")
    rows, cols = grid["row_axis"].split(":")[0], grid["col_axis"].split(":")[0]
    figs.save("bias_grid", fig, f"Learned bias over ({rows}, {cols}) ({ins['position']}, step {ins['step']})",
              grid["col_axis"], grid["row_axis"], [],
              f"{grid['row_axis']}; {grid['col_axis']}. " +
              grid.get("note", "The learned bias of each head (times alpha) at each cell of the grid."),
              extra={"heads": heads})


def attention_figure(att, figs):
    """Attention probabilities of layer 0, one panel per head."""
    heads = att["layers"][0]
    fig, axes = plt.subplots(1, len(heads), figsize=(3.2 * len(heads), 3.4), squeeze=False, layout="constrained")
    for h, (ax, m) in enumerate(zip(axes[0], heads)):
        im = ax.imshow(np.asarray(m, dtype=float), cmap="magma", vmin=0, vmax=1)  # null -> nan
        ax.set_title(f"layer 0 head {h}")
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    fig.colorbar(im, ax=axes[0].tolist(), label="attention probability")
    figs.save("attention_maps", fig, "Attention maps, layer 0", "key position", "query position",
              [], f"Attention probabilities of layer 0 for the input {att['text']!r}.", extra={"maps": heads})


def inspect_figures(ins, figs):
    """Figures from `relpos inspect` output (RUN/inspect/inspect.json, read by read_inspect)."""
    if ins.get("bias"):
        bias_figure(ins, figs)
    for r in ins.get("position_grad_rows", []):
        grad_rows_figure(ins, r, figs)
    for kr in ins.get("conv_kernels", []):
        conv_kernel_figure(kr, figs)
    if ins.get("bias_grid"):
        bias_grid_figure(ins, ins["bias_grid"], figs)
    att = ins.get("attention")
    if att and att.get("layers"):
        attention_figure(att, figs)


def short(rec, keys):
    """Label of a sweep point without the grid keys that are constant."""
    parts = [f"{rec['grid'][k]}" for k in keys if k in rec.get("grid", {})]
    if rec.get("recipe"):
        parts.append(rec["recipe"])
    return " ".join(parts) or rec["name"]


def grid_figure(layout, recipes, lrs):
    """The figure and axes of an lr x recipe panel grid laid out as `layout` (panel_layout)."""
    nrows, ncols = len(layout), len(layout[0])
    return plt.subplots(nrows, ncols, figsize=(0.75 * len(recipes) * ncols + 2.5 * ncols, (0.9 * len(lrs) + 2.2) * nrows),
                        squeeze=False, layout="constrained")


def grid_panels(axes, layout, panels):
    """(axis, panel key) of every laid-out panel that has runs; the other axes are switched off."""
    for i, row in enumerate(layout):
        for j, g in enumerate(row):
            if g in panels:
                yield axes[i][j], g
            else:
                axes[i][j].axis("off")


def runs_at(runs, lr_key, lr, recipe):
    """The runs of one lr x recipe cell of a panel."""
    return [r for r in runs if num(r["grid"][lr_key]) == lr and r["recipe"] == recipe]


def label_grid_panel(fig, ax, im, recipes, lrs, title, colour_label):
    """Ticks, axis labels, title and colour bar of one lr x recipe panel."""
    ax.set_xticks(range(len(recipes)))
    ax.set_xticklabels(recipes, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(lrs)))
    ax.set_yticklabels([f"{v:g}" for v in lrs])
    ax.set_xlabel("recipe")
    ax.set_ylabel("peak learning rate")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label=colour_label)


def text_on(cmap, x):
    """Black or white, whichever reads on colour x (0..1) of the colormap."""
    r, g, b, _ = plt.get_cmap(cmap)(min(max(x, 0.0), 1.0))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def panel_layout(panels, others, recs):
    """Rows x columns of panel keys: with two or more other grid keys, one column per value of the
    last and one row per combination of the others (in the sweep's order); otherwise one row."""
    if len(others) < 2:
        return [sorted(panels)]
    rows, cols = [], []
    for r in recs:
        key = tuple(str(r["grid"].get(k)) for k in others)
        if key[:-1] not in rows:
            rows.append(key[:-1])
        if key[-1] not in cols:
            cols.append(key[-1])
    return [[row + (c,) for c in cols] for row in rows]


def run_diagnosis(rec):
    """What the metrics of one run say went wrong: fp16 overflow steps (skipped updates), skipped
    non-finite steps, the largest attention logit and the largest block activation (finite values
    over every logged step and layer; None when never logged)."""
    rows = point_metrics(rec) or []
    def peak(key):
        vals = [num(v) for r in rows for v in (r.get(key) if isinstance(r.get(key), list) else [])
                if isinstance(v, (int, float)) and math.isfinite(num(v))]
        return max(vals) if vals else None
    last = lambda key: max([int(r[key]) for r in rows if isinstance(r.get(key), int)] + [0])
    return {"overflow_steps": last("overflow_steps"), "skipped_steps": last("skipped_steps"),
            "max_attn_logit": peak("max_attn_logit"), "max_abs_activation": peak("max_abs_activation")}


def why_grid(figs, panels, layout, lr_key, lrs, recipes, seeded):
    """Per (encoding, precision) panel, lr x recipe: colour = the largest attention logit over
    training (log scale: logit growth), text = fp16 overflow steps ("ovf N") and skipped non-finite
    steps ("skip N") — where a precision breaks and whether by overflow or by logit growth."""
    fig, axes = grid_figure(layout, recipes, lrs)
    cells = []
    diag = {r["name"]: run_diagnosis(r) for rs in panels.values() for r in rs}  # one read of each run's metrics
    logits = [d["max_attn_logit"] for d in diag.values() if d["max_attn_logit"] is not None and d["max_attn_logit"] > 0]
    lo, hi = (math.log10(min(logits)), math.log10(max(logits))) if logits else (0.0, 1.0)
    for ax, g in grid_panels(axes, layout, panels):
        m = np.full((len(lrs), len(recipes)), np.nan)
        for i, lr in enumerate(lrs):
            for j, rc in enumerate(recipes):
                runs = runs_at(panels[g], lr_key, lr, rc)
                if not runs:
                    continue
                ds = [diag[r["name"]] for r in runs]
                peaks = [d["max_attn_logit"] for d in ds if d["max_attn_logit"] is not None and d["max_attn_logit"] > 0]
                if peaks:
                    m[i, j] = math.log10(max(peaks))
                ovf, skip = max(d["overflow_steps"] for d in ds), max(d["skipped_steps"] for d in ds)
                act = [d["max_abs_activation"] for d in ds if d["max_abs_activation"] is not None]
                cells.append({"group": " ".join(g), "lr": lr, "recipe": rc, "max_attn_logit": max(peaks) if peaks else None,
                              "max_abs_activation": max(act) if act else None, "overflow_steps": ovf,
                              "skipped_steps": skip, "seeds": len(runs)})
                txt = f"{max(peaks):.0f}" if peaks else "-"
                if ovf:
                    txt += f"\novf {ovf}"
                if skip:
                    txt += f"\nskip {skip}"
                span = max(hi - lo, 1e-9)
                ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                        color=text_on("magma", (m[i, j] - lo) / span if not math.isnan(m[i, j]) else 0.0))
        im = ax.imshow(m, cmap="magma", vmin=lo, vmax=max(hi, lo + 1e-9), aspect="auto")
        label_grid_panel(fig, ax, im, recipes, lrs, " ".join(g), "log10 max |attention logit|")
    fig.suptitle("Why runs break: largest attention logit (colour, number); ovf N = fp16 overflow steps; "
                 "skip N = skipped non-finite steps" + (" (worst seed)" if seeded else ""))
    figs.save("precision_why", fig, "Why runs break", "recipe", "peak learning rate", [],
              "Per encoding and precision: the largest attention logit over training (colour and number: logit "
              "growth), fp16 overflow steps whose update was skipped ('ovf N': the loss scale backed off) and steps "
              "skipped for a non-finite loss or gradient ('skip N')" +
              (", worst over seeds" if seeded else "") + ".", extra={"cells": cells})


def point_metrics(rec):
    """The metrics.jsonl rows of a sweep point, None when its run directory has none."""
    p = os.path.join(rec["run_dir"], "metrics.jsonl")
    return read_metrics(p) if os.path.lexists(p) else None


def mean_curve(curves):
    """curves: [(xs, ys)], one per seed -> (x, mean, lo, hi) over the x every curve has."""
    common = sorted(set.intersection(*[set(x) for x, _ in curves])) if curves else []
    at = [dict(zip(x, y)) for x, y in curves]
    sms = [summarize([d[x] for d in at]) for x in common]
    return common, [m["mean"] for m in sms], [m["lo"] for m in sms], [m["hi"] for m in sms]


def effective_seed(rec):
    """The train.seed a point ran with: the last train.seed=... of its overrides (a recipe's set
    comes after the grid's value), else its grid value; None when neither says."""
    seed = rec.get("grid", {}).get(SEED_KEY)
    ov = rec.get("overrides")
    if isinstance(ov, list):
        for o in ov:
            if isinstance(o, str) and o.startswith(SEED_KEY + "="):
                seed = o[len(SEED_KEY) + 1:]
    return None if seed is None else str(seed)


def sweep_points(sweep_dir, meta, index):
    """The points of a sweep and how they group: meta is sweep.json (or {}), index
    read_sweep_index's (record, Where) pairs. One group per configuration (every grid value but
    the seed, and the recipe; spec order); the runs of a group must differ in their seed."""
    by_name = {r["name"]: r for r, _ in index}  # every index file, merged
    sw = types.SimpleNamespace(where={r["name"]: w for r, w in index}, recs=[], spec=meta.get("spec", sweep_dir))
    # The spec's order (points are matched by name; a grown grid keeps its finished points).
    order = meta.get("point_names") or sorted(by_name, key=lambda n: by_name[n]["index"])
    for i, n in enumerate(order):
        if n in by_name:
            sw.recs.append(dict(by_name[n], index=i))
    sw.grid_keys = meta.get("grid_keys", [])
    sw.config_keys = [k for k in sw.grid_keys if k != SEED_KEY]
    sw.recipes = meta.get("recipes", [])
    sw.val_paths = meta.get("eval_val_paths") or []
    varying = [k for k in sw.config_keys if len({str(r["grid"].get(k)) for r in sw.recs}) > 1]
    groups = {}
    for r in sw.recs:
        key = (tuple(str(r["grid"].get(k)) for k in sw.config_keys), r.get("recipe"))
        label = short(r, varying) if (varying or r.get("recipe")) else None
        groups.setdefault(key, {"label": label, "recs": []})["recs"].append(r)
    sw.groups = list(groups.values())
    for g in sw.groups:
        seen = {}
        for r in g["recs"]:
            s = effective_seed(r)
            if s is not None and s in seen:
                raise ReportError(sw.where[r["name"]].path,
                                  f"points {seen[s]!r} and {r['name']!r} ran with the same train.seed {s} (a recipe "
                                  "or the config sets it?): their spread is not seed-to-seed variation")
            seen[s] = r["name"]
    sw.seeded = SEED_KEY in sw.grid_keys and any(len(g["recs"]) > 1 for g in sw.groups)
    sw.interval = interval_note(sw.seeded)
    for g in sw.groups:
        if g["label"] is None:
            g["label"] = "all seeds" if sw.seeded else g["recs"][0]["name"]
    summarize_evaluations(sw)
    return sw


def summarize_evaluations(sw):
    """The evaluations by (mode, length) (a spec may list several modes: eval.mode: [windows,
    sliding]) and, per group, the summaries over its seeds of the final losses, the loss at each
    (mode, length), beyond the training length, on the token subset and the accuracy."""
    sw.lens = sorted({e["seq_len"] for r in sw.recs for e in r.get("eval", [])})
    sw.modes = []
    for r in sw.recs:
        for e in r.get("eval", []):
            if e.get("mode", "?") not in sw.modes:
                sw.modes.append(e.get("mode", "?"))
    sw.keys = [(m, L) for m in sw.modes for L in sw.lens]
    # A token subset the evaluation scored separately (eval.subset_channel): its description.
    sw.subsets = sorted({e["subset"] for r in sw.recs for e in r.get("eval", []) if e.get("subset")})
    for g in sw.groups:
        ev = [{(e.get("mode", "?"), e["seq_len"]): e for e in r.get("eval", [])} for r in g["recs"]]
        g["train"] = summarize([r.get("final_train_loss") for r in g["recs"]])
        g["val"] = summarize([r.get("final_val_loss") for r in g["recs"]])
        for field, name in (("at", "loss"), ("beyond", "beyond_loss"), ("subset", "subset_loss"), ("acc", "accuracy")):
            g[field] = {k: summarize([e[k].get(name) if k in e else None for e in ev]) for k in sw.keys}


def loss_column(sw, mode, L, what="loss"):
    """The table header of the loss at length L (the mode named unless it is the first)."""
    return f"{what} @ {L}" + ("" if mode == sw.modes[0] else f" ({mode})")


def md_table(md, head, rows):
    """A Markdown table: the header, then one row per list of cells."""
    md.append("| " + " | ".join(head) + " |")
    md.append("|" + "---|" * len(head))
    for cells in rows:
        md.append("| " + " | ".join(cells) + " |")
    md.append("")


def seeded_tables(sw, md):
    """The mean ± 95% interval table of every point, then its rankings in tiers the intervals
    separate (final validation loss, the loss and subset loss at the last length of each mode)."""
    counts = sorted({len(g["recs"]) for g in sw.groups})
    md.append(f"Each point ran with {' or '.join(map(str, counts))} seeds (`{SEED_KEY}`). Every number below is "
              "the mean over the seeds ± the half-width of its 95% Student-t interval, "
              "t(0.975, k-1) · s / √k over the k seeds with a finite value.\n")
    if sw.subsets:
        md.append(f"Subset loss: the loss on {'; '.join(sw.subsets)} only.\n")
    subset_keys = sw.keys if sw.subsets else []
    head = ["point", "seeds", "final train loss", "final val loss"] + [loss_column(sw, *k) for k in sw.keys] + \
        [loss_column(sw, *k, "subset loss") for k in subset_keys]
    md_table(md, head, [[g["label"], str(len(g["recs"])), fmt_summary(g["train"]), fmt_summary(g["val"])] +
                        [fmt_summary(g["at"][k]) for k in sw.keys] + [fmt_summary(g["subset"][k]) for k in subset_keys]
                        for g in sw.groups])
    rank_at = [("final validation loss", lambda g: g["val"])]
    for m in sw.modes if sw.lens else []:
        k = (m, sw.lens[-1])
        rank_at.append((loss_column(sw, *k), lambda g, k=k: g["at"][k]))
        if sw.subsets:
            rank_at.append((loss_column(sw, *k, "subset loss"), lambda g, k=k: g["subset"][k]))
    for title, pick in rank_at:
        ts = tiers([(g["label"], pick(g)) for g in sw.groups])
        if not ts:
            continue
        md.append(f"Ranking by {title} (lower is better), in order of the means. A new tier starts at the "
                  "first point whose 95% interval does not overlap that of the current tier's first point; "
                  "within a tier the order is not a finding.\n")
        md_table(md, ["tier", "point", "mean ± 95% interval"], [[str(t), lab, fmt_summary(sm)] for t, lab, sm in ts])


def summary_series(sw, field, keys):
    """Per group, the (length, summary) points of g[field] at the (mode, length) keys that have a
    mean: [{"label", "x", "y", "lo", "hi", "seeds"}] for small_multiples."""
    out = []
    for g in sw.groups:
        pts = [(k[1], g[field][k]) for k in keys if g[field][k]["mean"] is not None]
        if pts:
            out.append({"label": g["label"], "x": [L for L, _ in pts], "y": [s["mean"] for _, s in pts],
                        "lo": [s["lo"] for _, s in pts], "hi": [s["hi"] for _, s in pts],
                        "seeds": [s["finite"] for _, s in pts]})
    return out


def accuracy_section(sw, figs, md):
    """Classification (eval.mode examples: every validation example once): held-out accuracy per
    evaluation length / validation file, mean over seeds with its interval; a table and a figure."""
    acc_keys = [k for k in sw.keys if k[0] == "examples"]
    if not acc_keys:
        return
    files = [os.path.basename(str(v)) for v in sw.val_paths]

    def acc_col(L):
        i = sw.lens.index(L)
        return f"accuracy @ {L}" + (f" ({files[i]})" if i < len(files) else "")
    md.append("Held-out accuracy: every validation example once (`eval.mode: examples`), at each evaluation "
              "length" + (" on its validation file (`eval.val_paths`)" if files else "") +
              ("; mean over seeds ± the half-width of its 95% Student-t interval" if sw.seeded else "") + ".\n")
    md_table(md, ["point", "runs"] + [acc_col(L) for _, L in acc_keys],
             [[g["label"], str(len(g["recs"]))] + [fmt_summary(g["acc"][k]) for k in acc_keys] for g in sw.groups])
    series = summary_series(sw, "acc", acc_keys)
    if series:
        small_multiples(figs, "accuracy", "Held-out accuracy vs evaluation length",
                        "evaluation length L (tokens, log scale)", "accuracy (every validation example once)",
                        series, "Classification accuracy over the whole validation split at each evaluation "
                        "length" + (" (its own validation file: " + ", ".join(files) + ")" if files else "") +
                        sw.interval + ", one panel per point with every other point in grey behind it.",
                        log2x=sw.lens)


def every_run_table(sw, md):
    """One row per run: status, final losses, first divergence step, the loss at each evaluation."""
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"  # noqa: E731
    if sw.seeded:
        md.append("Every run:\n")
    rows = []
    for r in sw.recs:
        ev = {(e.get("mode", "?"), e["seq_len"]): e["loss"] for e in r.get("eval", [])}
        rows.append([str(r["index"]), r["name"], r["status"], fmt(r.get("final_train_loss")),
                     fmt(r.get("final_val_loss")), str(r.get("first_divergence_step") or "-")] +
                    [fmt(ev.get(k)) for k in sw.keys])
    md_table(md, ["#", "point", "status", "final train loss", "final val loss", "first divergence step"] +
             [loss_column(sw, *k) for k in sw.keys], rows)


def subset_figure(sw, figs):
    """Loss and subset loss per point at the last length of the first mode (eval.subset_channel)."""
    if not (sw.subsets and sw.lens):
        return
    k = (sw.modes[0], sw.lens[-1])
    groups = sw.groups
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(groups) + 2), 4))
    xs = np.arange(len(groups))
    series = []
    for off, field, name, c in ((-0.2, "at", "all targets", PALETTE[0]), (0.2, "subset", "subset", PALETTE[1])):
        ms = [g[field][k]["mean"] for g in groups]
        hs = [g[field][k]["half"] or 0.0 for g in groups]
        ax.bar(xs + off, [m if m is not None else np.nan for m in ms], 0.4, yerr=hs, capsize=3, color=c, label=name)
        series.append({"label": name, "x": [g["label"] for g in groups], "y": ms, "half": hs})
    ax.set_xticks(xs)
    ax.set_xticklabels([g["label"] for g in groups], rotation=20, ha="right")
    ax.set_ylabel("validation loss (nats / token)")
    ax.set_title(f"Loss on all targets and on the subset, length {sw.lens[-1]} ({sw.modes[0]} evaluation)")
    outside_legend(ax, 1)
    figs.save("subset_loss", fig, ax.get_title(), "point", ax.get_ylabel(), series,
              f"Mean loss per point{sw.interval} on every target and on {'; '.join(sw.subsets)} only; error bars: "
              "the 95% interval over seeds.")


def extrapolation_figures(sw, figs):
    """Loss vs evaluation length (ALiBi Fig. 1 shape), one panel per point, one figure per mode;
    the loss beyond the training length likewise."""
    for mode in sw.modes:
        suffix = "" if mode == sw.modes[0] else "_" + mode
        keys = [(mode, L) for L in sw.lens]
        small_multiples(figs, "extrapolation" + suffix, f"Loss vs evaluation length ({mode} evaluation)",
                        "evaluation length L (tokens, log scale)", "validation loss (nats / token)",
                        summary_series(sw, "at", keys),
                        "Validation loss over all positions of windows of length L" + sw.interval + ", one panel per "
                        "point with every other point in grey behind it; a flat curve extrapolates, a rising one "
                        "does not.", log2x=sw.lens)
        beyond = summary_series(sw, "beyond", keys)
        if beyond:
            small_multiples(figs, "extrapolation_beyond" + suffix,
                            f"Loss on positions beyond the training length ({mode} evaluation)",
                            "evaluation length L (tokens, log scale)",
                            "loss on positions >= training length (nats / token)", beyond,
                            "Loss counted only on positions the model never saw in training" + sw.interval + ".",
                            log2x=sw.lens)


def stability_figures(sw, figs):
    """Stability grid: lr x recipe -> final train loss (+ first divergence step), one panel per
    other grid value; the why-grid of precision sweeps; max |logit| over training at the top lr."""
    lr_key = next((k for k in sw.config_keys if k.endswith(".lr")), None)
    if not (lr_key and sw.recipes):
        return
    for r in sw.recs:
        at = sw.where[r["name"]]
        lr = require(r["grid"], lr_key, at.sub("grid"), "a number (a grid key of sweep.json)")
        if not math.isfinite(num(check_value(lr, at.sub("grid").sub(lr_key), null=False))):
            at.sub("grid").sub(lr_key).fail("a finite number", lr)
        if r.get("recipe") not in sw.recipes:
            at.sub("recipe").fail(f"one of the recipes of sweep.json ({', '.join(sw.recipes)})", r.get("recipe"))
    others = [k for k in sw.config_keys if k != lr_key]
    panels = {}
    for r in sw.recs:
        panels.setdefault(tuple(str(r["grid"].get(k)) for k in others), []).append(r)
    lrs = sorted({num(r["grid"][lr_key]) for r in sw.recs})
    layout = panel_layout(panels, others, sw.recs)
    stability_grid(sw, figs, panels, layout, lr_key, lrs)
    if "train.precision" in sw.config_keys:
        why_grid(figs, panels, layout, lr_key, lrs, sw.recipes, sw.seeded)
    max_logit_figures(sw, figs, panels, lr_key, lrs[-1])


def stability_cell(ax, i, j, runs, vmax):
    """One lr x recipe cell: the mean final train loss of its runs written on it, and the cell's
    record for the figure's JSON (None when the recipe did not run there)."""
    if not runs:  # a recipe the spec's points[].only keeps off this group
        ax.text(j, i, "not run", ha="center", va="center", fontsize=7, color="0.45")
        return None
    sm = summarize([r.get("final_train_loss") for r in runs])
    v = sm["mean"] if sm["mean"] is not None else float("nan")
    divs = [r["first_divergence_step"] for r in runs if r.get("first_divergence_step") is not None]
    d = min(divs) if divs else None
    txt = ("nan" if math.isnan(v) else f"{v:.2f}") + (f"±{sm['half']:.2f}" if sm["half"] else "")
    if d is not None:
        txt += f"\ndiv@{d}" + (f" ({len(divs)}/{len(runs)})" if len(runs) > 1 else "")
    ax.text(j, i, txt, ha="center", va="center", fontsize=7,
            color=text_on("viridis_r", v / vmax if vmax and not math.isnan(v) else 0.0))
    return {"final_train_loss": v, "half": sm["half"], "seeds": len(runs), "first_divergence_step": d,
            "diverged_seeds": len(divs)}


def stability_grid(sw, figs, panels, layout, lr_key, lrs):
    """The stability grid figure: per panel (other grid values), lr x recipe cells."""
    recipes = sw.recipes
    fig, axes = grid_figure(layout, recipes, lrs)
    cells = []
    vmax = max([num(r.get("final_train_loss")) for r in sw.recs if r.get("final_train_loss") is not None] + [1])
    for ax, g in grid_panels(axes, layout, panels):
        m = np.full((len(lrs), len(recipes)), np.nan)
        for i, lr in enumerate(lrs):
            for j, rc in enumerate(recipes):
                runs = runs_at(panels[g], lr_key, lr, rc)
                cell = stability_cell(ax, i, j, runs, vmax)
                if cell is not None:
                    m[i, j] = cell["final_train_loss"]
                    cells.append(dict({"group": " ".join(g), "lr": lr, "recipe": rc}, **cell))
        im = ax.imshow(m, cmap="viridis_r", vmin=0, vmax=vmax, aspect="auto")
        label_grid_panel(fig, ax, im, recipes, lrs, " ".join(g) or "all", "final train loss (nats / token)")
    seeded = sw.seeded
    fig.suptitle("Stability grid: final train loss" + (" (mean ± 95% interval over seeds)" if seeded else "") +
                 "; div@N = first divergence step")
    figs.save("stability_grid", fig, "Stability grid", "recipe", "peak learning rate", [],
              "Final training loss per learning rate and recipe (brighter = lower)" +
              (", mean over seeds ± 95% interval" if seeded else "") + "; 'div@N' marks the first step whose "
              "loss was non-finite or above twice its running minimum" +
              (" (the earliest over seeds, with how many seeds diverged)" if seeded else "") + ".",
              extra={"cells": cells})


def max_logit_figures(sw, figs, panels, lr_key, top_lr):
    """Max |logit| (last layer) over training for every run at the highest lr, one figure per panel."""
    for g, rs in sorted(panels.items()):
        series = []
        for r in rs:
            if num(r["grid"][lr_key]) != top_lr:
                continue
            cols = array_columns(point_metrics(r) or [], "max_attn_logit")
            if cols:
                last = cols[max(cols)]
                seed = f" seed {r['grid'][SEED_KEY]}" if sw.seeded and SEED_KEY in r["grid"] else ""
                series.append({"label": r["recipe"] + seed, "x": last[0], "y": last[1]})
        if series:
            stem = "max_logit_" + "_".join(g).replace("/", "-")
            line_figure(figs, stem, f"Max |attention logit|, last layer, {' '.join(g)}, lr {top_lr:g}",
                        "optimizer step", "max |S| (logit units)", series,
                        f"Growth of the largest attention logit per recipe at lr {top_lr:g} ({' '.join(g)}).",
                        logy=True)


def train_curves_figure(sw, figs):
    """Training curves, one panel per point (mean over seeds with its interval)."""
    series = []
    for g in sw.groups:
        curves = [column(rows, "loss") for rows in (point_metrics(r) for r in g["recs"]) if rows is not None]
        if curves:
            x, y, lo, hi = mean_curve(curves) if len(curves) > 1 else (curves[0][0], curves[0][1], None, None)
            series.append({"label": g["label"], "x": x, "y": y, "lo": lo, "hi": hi})
    if series:
        small_multiples(figs, "train_loss_all", "Training loss of every point", "optimizer step",
                        "train loss (nats / token)", series,
                        "Training loss (log-window mean) of every point" + sw.interval + ", one panel per point, the "
                        "others in grey.")


def sweep_figures(sweep_dir, meta, index, figs, md):
    """meta: sweep.json (or {}); index: read_sweep_index's (record, Where) pairs."""
    sw = sweep_points(sweep_dir, meta, index)
    size = f"{len(sw.recs)} runs ({len(sw.groups)} points x seeds)" if sw.seeded else f"{len(sw.recs)} points"
    md.append(f"Sweep `{sw.spec}`: {size}, grid keys "
              f"{', '.join('`' + k + '`' for k in sw.grid_keys) or '-'}"
              f"{', recipes ' + ', '.join(sw.recipes) if sw.recipes else ''}.\n")
    if sw.seeded:
        seeded_tables(sw, md)
    else:
        md.append("No ranking: every point ran with one seed, so nothing separates its differences from "
                  "seed-to-seed variation (add `seeds: N` to the spec for means with 95% intervals).\n")
    accuracy_section(sw, figs, md)
    every_run_table(sw, md)
    subset_figure(sw, figs)
    extrapolation_figures(sw, figs)
    stability_figures(sw, figs)
    train_curves_figure(sw, figs)


def report(run_or_sweep, out):
    """Reads and validates the inputs, then draws; returns (report.md path, number of figures)."""
    try:
        st = os.stat(run_or_sweep)
    except OSError as e:
        raise ReportError(run_or_sweep, f"cannot open the run or sweep directory: {os_reason(e)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ReportError(run_or_sweep, f"is {file_kind(st.st_mode)}, expected a run or sweep directory"
                          if not stat.S_ISREG(st.st_mode) else "is a file, expected a run or sweep directory")
    join = lambda name: os.path.join(run_or_sweep, name)  # noqa: E731
    md = []
    if os.path.lexists(join("sweep.json")) or sweep_index_files(run_or_sweep):
        meta = read_sweep_meta(join("sweep.json")) if os.path.lexists(join("sweep.json")) else {}
        index = read_sweep_index(run_or_sweep)
        make_output_dir(out)
        figs = Figures(out)
        md.append(f"# Sweep report: `{run_or_sweep}`\n")
        sweep_figures(run_or_sweep, meta, index, figs, md)
    elif os.path.lexists(join("metrics.jsonl")):
        rows, ins, cfg = read_run(run_or_sweep)
        make_output_dir(out)
        figs = Figures(out)
        md.append(f"# Run report: `{run_or_sweep}`\n")
        rows, div = run_figures(rows, figs)
        if ins is not None:
            inspect_figures(ins, figs)
        last = {}
        for r in rows:
            last.update(r)
        md.append(f"- last logged step: {last.get('step')}")
        md.append(f"- final train loss: {last.get('loss')}, final val loss: {last.get('val_loss')}")
        md.append(f"- first divergence step: {div if div is not None else 'none'}\n")
        if cfg is not None:
            md.append("Config:\n\n```yaml\n" + cfg.strip() + "\n```\n")
    else:
        raise ReportError(run_or_sweep, "holds neither a sweep index (sweep.json, sweep*.jsonl) nor metrics.jsonl")
    md.append("## Figures\n")
    for stem, cap in figs.made:
        md.append(f"### {stem}\n\n![{stem}]({stem}.png)\n\n{cap} Data: [`{stem}.json`]({stem}.json).\n")
    path = os.path.join(out, "report.md")
    write_file(path, ("\n".join(md) + "\n").encode("utf-8"))  # last: it links only figures written
    return path, len(figs.made)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    path, n = report(a.dir, a.out or os.path.join(a.dir, "report"))
    try:
        print(f"report: {path} ({n} figures)", flush=True)
    except OSError as e:
        raise ReportError("stdout", f"cannot write: {os_reason(e)}") from None


def fail(message):
    """Ends the process with exit status 1 after one line on stderr."""
    line = " ".join(str(message).splitlines())
    try:
        sys.stderr.write(f"report: {line}\n")
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(1)  # not sys.exit: flushing a broken stdout at exit would print more


if __name__ == "__main__":
    try:
        main()
    except ReportError as e:
        fail(e)
    except KeyboardInterrupt:
        fail("interrupted")
    except MemoryError:
        b, src = memory_budget()
        fail("out of memory while reading the inputs" + (f" (the memory budget is {b} bytes: {src})" if b else ""))
    except Exception as e:  # noqa: BLE001 - anything not foreseen still ends in one line
        fail(f"internal error: {type(e).__name__}: {e}")
