#!/usr/bin/env python3
"""Helpers of scripts/gpu-check.sh (python3 standard library only: the GPU machine has no dpkg).

  unpack-debs DEBDIR PREFIX     unpack every DEBDIR/*.deb's data archive into PREFIX (idempotent)
  cmake-args PREFIX             the cmake -D arguments that take every build dependency from PREFIX
  verify-cache CACHE PREFIX     every dependency in CMakeCache.txt CACHE resolved inside PREFIX
  curve CPU.jsonl DEV.jsonl     CPU-vs-device train loss table; exit 1 beyond a relative 1e-3
  bench-table BENCH.jsonl       relpos vs torch tokens/s table of the GPU benchmark

Bad input (a missing file, a malformed line, a missing field, a non-finite loss) is one line
naming the file, line and field, and exit 1; never a traceback.
"""
import io
import json
import math
import os
import sys
import tarfile

ARCH = "x86_64-linux-gnu"  # the carried .deb files are Debian amd64
# CMake package -> its config file in the Debian packages (relative to PREFIX).
CONFIGS = {
    "fmt_DIR": f"usr/lib/{ARCH}/cmake/fmt/fmt-config.cmake",
    "yaml-cpp_DIR": f"usr/lib/{ARCH}/cmake/yaml-cpp/yaml-cpp-config.cmake",
    "Catch2_DIR": "usr/lib/cmake/Catch2/Catch2Config.cmake",
    "CLI11_DIR": "usr/share/cmake/CLI11/CLI11Config.cmake",
    "nlohmann_json_DIR": "usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake",
}
# Plain cache variables of CMakeLists.txt (find_library / find_path keep a preset value).
FILES = {
    "RELPOS_OPENBLAS": f"usr/lib/{ARCH}/openblas-openmp/libopenblas.so",
    "CBLAS_INCLUDE_DIR": f"usr/include/{ARCH}/openblas-openmp",
}
LIBDIRS = [f"usr/lib/{ARCH}", f"usr/lib/{ARCH}/openblas-openmp"]
STAMP = ".relpos-debs"


def ar_members(path):
    """(name, bytes) of each member of an ar archive (the .deb container)."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise SystemExit(f"{path}: not a .deb (ar) archive")
        while True:
            hdr = f.read(60)
            if len(hdr) < 60:
                return
            name, size = hdr[:16].decode().strip().rstrip("/"), int(hdr[48:58])
            data = f.read(size)
            if size % 2:
                f.read(1)
            yield name, data


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def unpack_debs(debdir, prefix):
    if not os.path.isdir(debdir):
        fail(f"{debdir}: no such folder: run scripts/gpu-fetch-debs.sh where apt works (it fetches the "
             f".deb files of the build dependencies), or install them on this machine")
    debs = sorted(d for d in os.listdir(debdir) if d.endswith(".deb"))
    if not debs:
        raise SystemExit(f"no .deb files in {debdir}: run scripts/gpu-fetch-debs.sh where apt works")
    stamp = os.path.join(prefix, STAMP)
    if os.path.exists(stamp) and open(stamp).read().split() == debs:
        print(f"{len(debs)} .deb files already unpacked in {prefix}")
        return
    os.makedirs(prefix, exist_ok=True)
    for d in debs:
        data = [m for m in ar_members(os.path.join(debdir, d)) if m[0].startswith("data.tar")]
        if not data:
            raise SystemExit(f"{d}: no data.tar member")
        with tarfile.open(fileobj=io.BytesIO(data[0][1]), mode="r:*") as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(prefix, filter="tar")
            else:
                t.extractall(prefix)
    with open(stamp, "w") as f:
        f.write("\n".join(debs) + "\n")
    print(f"unpacked {len(debs)} .deb files into {prefix}")


def cmake_args(prefix):
    prefix = os.path.abspath(prefix)
    args = []
    for var, rel in CONFIGS.items():
        p = os.path.join(prefix, rel)
        if not os.path.isfile(p):
            raise SystemExit(f"{var}: {p} missing (the carried .deb files lack it)")
        args.append(f"-D{var}={os.path.dirname(p)}")
    for var, rel in FILES.items():
        p = os.path.join(prefix, rel)
        if not os.path.exists(p):
            raise SystemExit(f"{var}: {p} missing (the carried .deb files lack it)")
        args.append(f"-D{var}={p}")
    # The binaries find the carried libraries, and what they need (libgfortran of OpenBLAS),
    # through DT_RPATH, which (unlike RUNPATH) also serves indirect dependencies: no
    # LD_LIBRARY_PATH is needed to run them.
    libdirs = ";".join(os.path.join(prefix, d) for d in LIBDIRS)
    args += [f"-DCMAKE_PREFIX_PATH={os.path.join(prefix, 'usr')}", f"-DCMAKE_BUILD_RPATH={libdirs}",
             "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags"]
    print("\n".join(args))


def verify_cache(cache, prefix):
    prefix = os.path.realpath(prefix)
    vals = {}
    for line in open(cache):
        if ":" in line and "=" in line and not line.startswith(("//", "#")):
            k, v = line.rstrip("\n").split("=", 1)
            vals[k.split(":")[0]] = v
    bad = 0
    for var in list(CONFIGS) + list(FILES):
        v = vals.get(var, "<unset>")
        inside = os.path.realpath(v).startswith(prefix + os.sep)
        print(f"{'ok  ' if inside else 'FAIL'} {var} = {v}")
        bad += not inside
    print(f"{len(CONFIGS) + len(FILES) - bad} of {len(CONFIGS) + len(FILES)} dependencies from {prefix}")
    # and the compile lines: every include directory outside the source/build tree is the
    # prefix's, CUDA's or MPI's (so no header silently comes from the system's /usr/include)
    build = os.path.dirname(os.path.realpath(cache))
    src = vals.get("CMAKE_HOME_DIRECTORY", "")
    dirs = set()
    cc = os.path.join(build, "compile_commands.json")
    if os.path.isfile(cc):
        for entry in json.load(open(cc)):
            toks = entry.get("command", "").split()
            dirs.update(t[2:] if t.startswith("-I") and len(t) > 2 else toks[i + 1] for i, t in enumerate(toks)
                        if (t.startswith("-I") and len(t) > 2) or (t in ("-isystem", "-I") and i + 1 < len(toks)))
    for root, _, files in os.walk(build):
        if "flags.make" in files:
            toks = open(os.path.join(root, "flags.make")).read().split()
            dirs.update(t[2:] if t.startswith("-I") else toks[i + 1] for i, t in enumerate(toks)
                        if t.startswith("-I") and len(t) > 2 or t in ("-isystem", "-I") and i + 1 < len(toks))
    other = sorted(d for d in dirs if not os.path.realpath(d).startswith((prefix + os.sep, build, src or build))
                   and "cuda" not in d and "mpi" not in d)
    print(f"include directories: {len(dirs)}, outside the prefix, the tree, CUDA and MPI: {other or 'none'}")
    sys.exit(1 if bad or other else 0)


def read_jsonl(path):
    """(line number, object) of each JSON object line of path; a clear failure otherwise."""
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip().startswith("{"):
            continue
        try:
            rows.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            fail(f"{path}:{n}: not JSON ({e.msg})")
    return rows


def number(path, n, row, key):
    """row[key] as a float; relpos writes non-finite values as "nan" / "inf" / "-inf"."""
    if key not in row:
        fail(f"{path}:{n}: no field '{key}'")
    v = row[key]
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail(f"{path}:{n}: field '{key}' is {json.dumps(v)}, not a number")
    return float(v)


def curve(cpu_path, dev_path, label="cuda"):
    def load(p):
        out = {}
        for n, r in read_jsonl(p):
            if "loss" in r and not r.get("skipped"):
                if "step" not in r:
                    fail(f"{p}:{n}: a loss without a 'step' field")
                out[r["step"]] = number(p, n, r, "loss")
        return out
    a, b = load(cpu_path), load(dev_path)
    steps = sorted(set(a) & set(b))
    worst, bad = 0.0, []
    print(f"| step | cpu loss | {label} loss | rel diff |\n|---:|---:|---:|---:|")
    for s in steps:
        if not (math.isfinite(a[s]) and math.isfinite(b[s])):
            bad.append(f"step {s}: cpu {a[s]}, {label} {b[s]}")
            print(f"| {s} | {a[s]} | {b[s]} | not finite |")
            continue
        d = abs(a[s] - b[s]) / max(abs(a[s]), 1e-12)
        worst = max(worst, d)
        print(f"| {s} | {a[s]:.6f} | {b[s]:.6f} | {d:.2e} |")
    ok = len(steps) >= 10 and worst < 1e-3 and not bad
    why = f"; non-finite losses: {', '.join(bad)}" if bad else ""
    print(f"worst relative difference {worst:.2e} over {len(steps)} logged steps in both "
          f"(need >= 10 steps, < 1e-3){why}: {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


def bench_table(path):
    by = {}
    for n, r in read_jsonl(path):
        for key in ("size", "pos", "impl"):
            if not isinstance(r.get(key), str):
                fail(f"{path}:{n}: no text field '{key}'")
        tps = number(path, n, r, "tokens_per_s")
        by.setdefault((r["size"], r["pos"]), {})[r["impl"]] = tps
    print("| size | PE | relpos tok/s | torch tok/s | relpos / torch |\n|---|---|---:|---:|---:|")
    for (size, pos), d in by.items():
        a, b = d.get("relpos"), d.get("torch")
        ra = f"{a:.0f}" if a is not None else "-"
        rb = f"{b:.0f}" if b is not None else "-"
        ratio = f"{a / b:.2f}" if a is not None and b else "-"
        print(f"| {size} | {pos} | {ra} | {rb} | {ratio} |")
    if not by:
        print(f"(no benchmark rows in {path})")


if __name__ == "__main__":
    cmds = {"unpack-debs": (unpack_debs, 2, 2), "cmake-args": (cmake_args, 1, 1), "verify-cache": (verify_cache, 2, 2),
            "curve": (curve, 2, 3), "bench-table": (bench_table, 1, 1)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or not cmds[sys.argv[1]][1] <= len(sys.argv) - 2 <= cmds[sys.argv[1]][2]:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        cmds[sys.argv[1]][0](*sys.argv[2:])
    except OSError as e:  # (an unreadable or unwritable file the checks above did not name)
        fail(f"{e.filename or sys.argv[1]}: {e.strerror}")
    except (tarfile.TarError, EOFError, ValueError) as e:
        fail(f"{sys.argv[1]}: {e}")
