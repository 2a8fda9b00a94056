#!/usr/bin/env python3
"""The project's text stays about the program, in the present tense.

Scans README.md, CHANGELOG.md, docs/, bench/RESULTS.md and every source, script and config
file (comments included) for references to how the project is developed rather than what
the program does: labels of development periods (ordinal or not), "of the day" moods of a
machine, and the like. Raw measurement data (bench/results/), test fixtures, generated
figures' data and build trees are not scanned.

  check_prose.py [--root DIR]     exit 0 when clean; else one line per finding
                                  (file:line: the phrase) and exit 1
  check_prose.py --self-test      plants each forbidden phrase in a scratch tree and checks
                                  that it is found (and that allowed phrases are not)
"""
import argparse
import os
import re
import sys
import tempfile

# Built from pieces so that this file does not match itself.
_PERIOD = "sess" + "ion"
FORBIDDEN = [
    (re.compile(r"\b" + _PERIOD + r"s?\b", re.I), "a development-period label"),
    (re.compile(r"\bwork[- ]periods?\b", re.I), "a development-period label"),
    (re.compile(r"\b(?:VM|machine|host|box) of the day\b", re.I), "the machine's mood of a day"),
    (re.compile(r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
                r"twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|"
                r"nineteenth|twentieth|twenty-\w+|thirtieth)(?:'s)? (?:VM|machine|run of the day)\b",
                re.I), "an ordinal label of a development period's machine"),
]
# Identifiers of libraries that happen to contain the word (Catch2's runner class).
ALLOWED = [re.compile(r"Catch::" + _PERIOD.capitalize())]

SELF = os.path.abspath(__file__)
TEXT_SUFFIXES = {".md", ".txt", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".inc", ".py", ".sh",
                 ".cmake", ".yaml", ".yml", ".in", ".json"}
TEXT_NAMES = {"CMakeLists.txt", "run", ".clang-format", ".gitignore"}
SKIP_DIRS = {".git", "runs", "mutation-out", "gpu-check-out", ".gpu-debs", ".gpu-deps",
             "__pycache__", "node_modules"}
# Paths (relative, '/'-separated prefixes) holding data rather than prose.
SKIP_PREFIXES = ("bench/results/", "bench/out/", "bench/.venv", "tests/fixtures/", "docs/figures/",
                 "data/", "fuzz/corpus", "fuzz/seeds")


def scanned_files(root):
    for d, dirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root).replace(os.sep, "/")
        rel_d = "" if rel_d == "." else rel_d + "/"
        dirs[:] = sorted(x for x in dirs
                         if x not in SKIP_DIRS and not x.startswith("build")
                         and not (rel_d + x + "/").startswith(SKIP_PREFIXES))
        for f in sorted(files):
            rel = rel_d + f
            if rel.startswith(SKIP_PREFIXES) or os.path.abspath(os.path.join(d, f)) == SELF:
                continue  # data, or this file (its self-test holds the phrases it looks for)
            if os.path.splitext(f)[1] in TEXT_SUFFIXES or f in TEXT_NAMES:
                yield rel


def findings(root):
    out = []
    for rel in scanned_files(root):
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                lines = fh.readlines()
        except OSError as e:
            out.append(f"{rel}: cannot read ({e.strerror})")
            continue
        for n, line in enumerate(lines, 1):
            text = line
            for a in ALLOWED:
                text = a.sub("", text)
            for rx, why in FORBIDDEN:
                m = rx.search(text)
                if m:
                    out.append(f"{rel}:{n}: '{m.group(0)}' ({why}): {line.strip()[:120]}")
                    break
    return out


def self_test():
    bad = [f"The twenty-seventh {_PERIOD} made it faster.", f"Measured in the last {_PERIOD}s.",
           "as the work period before showed", "on the VM of the day",
           "the sixteenth's VM ran it", f"// see the {_PERIOD.upper()} notes"]
    good = [f"return Catch::{_PERIOD.capitalize()}().run(argc, argv);", "five rounds of each cell",
            "measured 2026-12-05 on a 2-vCPU Intel Xeon", "the first round runs relpos first"]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "docs"))
        os.makedirs(os.path.join(tmp, "bench", "results", "x"))
        for i, line in enumerate(bad):
            with open(os.path.join(tmp, "docs", f"bad{i}.md"), "w") as fh:
                fh.write("Fine text.\n" + line + "\n")
        with open(os.path.join(tmp, "docs", "good.cpp"), "w") as fh:
            fh.write("\n".join(good) + "\n")
        with open(os.path.join(tmp, "bench", "results", "x", "raw.md"), "w") as fh:
            fh.write(bad[0] + "\n")  # raw data: not scanned
        found = findings(tmp)
        for i, line in enumerate(bad):
            if not any(f.startswith(f"docs/bad{i}.md:2:") for f in found):
                print(f"self-test: not flagged: {line!r}")
                failures += 1
        for f in found:
            if f.startswith(("docs/good.cpp", "bench/results/")):
                print(f"self-test: flagged an allowed line: {f}")
                failures += 1
    print("self-test:", "ok" if failures == 0 else f"{failures} failure(s)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    found = findings(os.path.abspath(args.root))
    for f in found:
        print(f)
    print(f"{len(found)} finding(s): the project's text must describe the program, not how it is developed"
          if found else "prose: clean")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
