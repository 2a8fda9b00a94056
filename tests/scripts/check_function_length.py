#!/usr/bin/env python3
"""No Python function outside tests is longer than 80 lines (the rule
tests/core/test_function_length.cpp checks for the C++ sources).

Scans every .py file under scripts/, bench/, tools/ and python/ (python/tests excepted; virtual
environments and bench/results/ are data, not code) with the standard library's parser: a
function's length is its last line minus its first (the `def`) plus one, nested functions
counted inside their parent and on their own.

  check_function_length.py [--root DIR]   exit 0 when none is longer; else one line per function
                                          (file:line: name, N lines) and exit 1
  check_function_length.py --self-test    plants an 81-line and an 80-line function in a scratch
                                          tree and checks that only the first is reported
"""
import argparse
import ast
import os
import sys
import tempfile

LIMIT = 80
FOLDERS = ("scripts", "bench", "tools", "python")
SKIP = ("bench/results/", "python/tests/")


def python_files(root):
    for top in FOLDERS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(d, root).replace(os.sep, "/") + "/"
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__"
                             and not (rel + x + "/").startswith(SKIP))
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.join(d, f)


def long_functions(path, root):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    rel = os.path.relpath(path, root)
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = n.end_lineno - n.lineno + 1
            if lines > LIMIT:
                yield f"{rel}:{n.lineno}: {n.name}, {lines} lines (at most {LIMIT})"


def check(root):
    found, files = [], 0
    for p in python_files(root):
        files += 1
        found.extend(long_functions(p, root))
    return found, files


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "scripts"))
        body = lambda name, n: f"def {name}():\n" + "    x = 1\n" * (n - 2) + "    return x\n"  # noqa: E731
        with open(os.path.join(root, "scripts", "planted.py"), "w") as f:
            f.write(body("too_long", LIMIT + 1) + "\n\n" + body("just_fits", LIMIT))
        found, files = check(root)
        ok = files == 1 and len(found) == 1 and "too_long, 81 lines" in found[0]
        print("self-test:", "ok" if ok else f"FAILED ({files} files, found {found})")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    found, files = check(os.path.abspath(a.root))
    for line in found:
        print(line)
    if files < 10:
        print(f"only {files} Python files found under {a.root}: wrong --root?")
        return 1
    print(f"{files} Python files, {len(found)} function(s) over {LIMIT} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
