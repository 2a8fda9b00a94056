#!/usr/bin/env python3
"""Python source as relpos token files with each token's place in the syntax tree.

    scripts/prepare_python_ast.py OUT_PREFIX [--stdlib DIR] [--seed S] [--val-files N]
                                             [--identifiers K]
    scripts/prepare_python_ast.py --verify-sources SOURCES_TXT [--stdlib DIR]
        exit 0 when the files read have the SHA-256s listed in SOURCES_TXT (the shipped data is
        then reproducible here), 3 when any differs or is missing (naming it)

reads the fixed list FILES below from the Python standard library (default
/usr/lib/python3.11, PSF license: data/python_ast_LICENSE.md), tokenizes each file with
`tokenize`, parses it with `ast`, and writes OUT_PREFIX_train.rptok and OUT_PREFIX_val.rptok
(RPTOKENS, docs/data.md; written by prepare_tokens.write_token_file), and OUT_PREFIX_sources.txt
(the SHA-256 of every file read). The files are split by
file: random.Random(seed) shuffles the list and the first N validate. docs/data.md,
"Python syntax trees", describes the vocabulary and the channels; in short:

Tokens: every token `tokenize` yields except comments, NL (blank or continuation lines) and
ENDMARKER. Vocabulary: the category tokens <unk> <name> <num> <str> <newline> <indent>
<dedent>, Python's keywords, every operator and delimiter, then the K most frequent
identifiers of the training files (ties by name); other identifiers are <name>, numbers
<num>, strings (docstrings, f-strings, bytes) <str>.

The token tree: every AST node with a source position (`ast` positions, decorated
definitions starting at their first `@`) and every bracket pair ( ) [ ] { } is a span. A span's
head is its first token. Token t's parent is the head of the innermost span that contains t
and whose head is not t; a token with no such span (the first token of a top-level statement,
`;` between top-level statements) is a root. Structural tokens: NEWLINE's parent is the head
of the innermost statement holding the previous token, INDENT's the head of the compound
statement whose block it opens, DEDENT's the head of the one whose block it closes. A parent
always comes before its child.

Channels (one value per token, int32):
  parent  tokens back from the token to its parent (>= 1), 0 for a root; a parent never lies
          before the first token of the token's example
  depth   0 for a root, else the parent's depth + 1
Examples: one per top-level statement (from its first token up to the next top-level
statement), in file order.

Only the standard library. The output carries the Python Software Foundation License of its
input.
"""
import argparse
import ast
import hashlib
import io
import keyword
import os
import random
import sys
import tokenize
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare_tokens import write_token_file  # noqa: E402

# The files read, relative to the standard-library directory (fixed: the shipped data is
# reproduced from this list; tests/data/test_prepare_python_ast.py pins the Python version).
FILES = [
    "abc.py", "bisect.py", "cmd.py", "code.py", "codeop.py", "colorsys.py", "copy.py", "copyreg.py", "csv.py",
    "filecmp.py", "fileinput.py", "fnmatch.py", "genericpath.py", "getopt.py", "glob.py", "graphlib.py",
    "heapq.py", "hmac.py", "imghdr.py", "json/decoder.py", "json/encoder.py", "linecache.py", "netrc.py",
    "numbers.py", "operator.py", "queue.py", "quopri.py", "reprlib.py", "runpy.py", "sched.py", "shelve.py",
    "shlex.py", "stat.py", "string.py", "textwrap.py", "timeit.py", "uu.py", "zipapp.py",
]

CATEGORIES = ["<unk>", "<name>", "<num>", "<str>", "<newline>", "<indent>", "<dedent>"]
OPERATORS = sorted(tokenize.EXACT_TOKEN_TYPES)  # + - ( ) ... := ->
BRACKETS = {"(": ")", "[": "]", "{": "}"}


def read_tokens(src, path):
    """The kept tokens: (type, string, start (line, col), end) with byte columns."""
    lines = src.splitlines(keepends=True)

    def byte_col(line, col):
        if line - 1 >= len(lines):
            return col
        return len(lines[line - 1][:col].encode("utf-8"))

    out = []
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
            continue
        start = (t.start[0], byte_col(*t.start))
        end = (t.end[0], byte_col(*t.end))
        out.append((t.type, t.string, start, end))
    if not out:
        raise ValueError(f"{path}: no tokens")
    return out


def node_spans(tree):
    """(start, end, is_statement, is_top_level) of every AST node with a position."""
    spans = []

    def visit(node, top):
        if isinstance(node, ast.JoinedStr):  # f-string internals: one STRING token
            spans.append(((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset), False, False))
            return
        if hasattr(node, "lineno") and getattr(node, "end_lineno", None) is not None:
            start = (node.lineno, node.col_offset)
            for d in getattr(node, "decorator_list", []):  # a decorated definition starts at its '@'
                start = min(start, (d.lineno, d.col_offset - 1))
            spans.append((start, (node.end_lineno, node.end_col_offset), isinstance(node, ast.stmt), top))
        for child in ast.iter_child_nodes(node):
            visit(child, False)

    for stmt in tree.body:
        visit(stmt, True)
    return spans


def bracket_spans(tokens, path):
    spans, stack = [], []
    for ty, s, start, end in tokens:
        if ty != tokenize.OP:
            continue
        if s in BRACKETS:
            stack.append((s, start))
        elif s in BRACKETS.values():
            if not stack or BRACKETS[stack[-1][0]] != s:
                raise ValueError(f"{path}: unmatched '{s}' at line {start[0]}")
            _, open_at = stack.pop()
            spans.append((open_at, end, False, False))
    return spans


def token_tree(src, path):
    """tokens, parent (absolute token index or -1), example starts."""
    tokens = read_tokens(src, path)
    tree = ast.parse(src, filename=path)
    spans = node_spans(tree) + bracket_spans(tokens, path)
    # Outer spans first: by start, then longest, then AST nodes before brackets of the same
    # extent (either order gives the same heads).
    spans.sort(key=lambda s: (s[0], (-s[1][0], -s[1][1]), not (s[2] or s[3])))
    parent = [-1] * len(tokens)
    example_starts = []
    stack = []  # open spans: [end, head, is_statement, is_top_level]
    blocks = []  # heads of the compound statements whose blocks are open
    last_stmt_head = -1  # innermost statement holding the previous real token
    k = 0
    for t, (ty, s, start, end) in enumerate(tokens):
        if ty in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            if ty == tokenize.DEDENT:
                if not blocks:
                    raise ValueError(f"{path}: DEDENT at line {start[0]} closes no block")
                parent[t] = blocks.pop()
            else:
                parent[t] = last_stmt_head
                if ty == tokenize.INDENT:
                    blocks.append(last_stmt_head)
            continue
        while stack and stack[-1][0] <= start:
            stack.pop()
        while k < len(spans) and spans[k][0] <= start:
            sp_start, sp_end, is_stmt, top = spans[k]
            k += 1
            if sp_end <= start:
                continue  # an empty span, or one that holds no token
            if stack and sp_end > stack[-1][0]:
                raise ValueError(f"{path}: spans cross at line {sp_start[0]}")
            stack.append([sp_end, None, is_stmt, top])
        for sp in stack:
            if sp[1] is None:
                sp[1] = t
                if sp[3]:
                    example_starts.append(t)
        parent[t] = next((sp[1] for sp in reversed(stack) if sp[1] != t), -1)
        last_stmt_head = next((sp[1] for sp in reversed(stack) if sp[2]), -1)
        if last_stmt_head < 0:
            raise ValueError(f"{path}: token {s!r} at line {start[0]} lies in no statement")
    if blocks:
        raise ValueError(f"{path}: {len(blocks)} blocks left open")
    if not example_starts or example_starts[0] != 0:
        raise ValueError(f"{path}: the first token does not start a top-level statement")
    return tokens, parent, example_starts


def vocabulary(train_tokens, k):
    names = Counter(s for toks in train_tokens for ty, s, *_ in toks
                    if ty == tokenize.NAME and not keyword.iskeyword(s))
    frequent = sorted(names.items(), key=lambda x: (-x[1], x[0]))[:k]
    vocab = CATEGORIES + sorted(keyword.kwlist) + OPERATORS + [n for n, _ in frequent]
    if len(set(vocab)) != len(vocab):
        raise ValueError("vocabulary entries collide")
    return vocab


def token_id(index, ty, s):
    if ty == tokenize.NAME:
        return index.get(s, index["<name>"])
    if ty == tokenize.OP:
        return index.get(s, index["<unk>"])
    return index[{tokenize.NUMBER: "<num>", tokenize.STRING: "<str>", tokenize.NEWLINE: "<newline>",
                  tokenize.INDENT: "<indent>", tokenize.DEDENT: "<dedent>"}.get(ty, "<unk>")]


def encode_files(parsed, index):
    """Token ids, example starts and the parent / depth channels of the files, in order."""
    tokens, starts, parent, depth = [], [], [], []
    for toks, par, ex in parsed:
        base = len(tokens)
        bounds = ex + [len(toks)]
        for e in range(len(ex)):
            starts.append(base + bounds[e])
            for t in range(bounds[e], bounds[e + 1]):
                p = par[t]
                if p >= t:
                    raise ValueError(f"token {t}: parent {p} does not precede it")
                if p >= 0 and p < bounds[e]:
                    raise ValueError(f"token {t}: parent {p} lies before its example (starts at {bounds[e]})")
                parent.append(0 if p < 0 else t - p)
                depth.append(0 if p < 0 else depth[base + p] + 1)
        tokens.extend(token_id(index, ty, s) for ty, s, *_ in toks)
    return tokens, starts, parent, depth


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def verify_sources(manifest, stdlib):
    want = {}
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                digest, name = line.split()
                want[name] = digest
    for name in FILES:
        path = os.path.join(stdlib, name)
        if not os.path.isfile(path):
            print(f"{path}: missing", file=sys.stderr)
            return 3
        if want.get(name) != sha256(path):
            print(f"{path}: SHA-256 {sha256(path)} differs from {manifest} ({want.get(name)})", file=sys.stderr)
            return 3
    print(f"{stdlib}: the {len(FILES)} files match {manifest}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_prefix", nargs="?")
    ap.add_argument("--verify-sources", metavar="SOURCES_TXT")
    ap.add_argument("--stdlib", default="/usr/lib/python3.11")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--val-files", type=int, default=6)
    ap.add_argument("--identifiers", type=int, default=160)
    a = ap.parse_args()
    if a.verify_sources:
        return verify_sources(a.verify_sources, a.stdlib)
    if not a.out_prefix:
        ap.error("OUT_PREFIX is required")
    try:
        order = list(FILES)
        random.Random(a.seed).shuffle(order)
        if not 1 <= a.val_files < len(order):
            raise ValueError(f"--val-files must be in 1..{len(order) - 1}, got {a.val_files}")
        val, train = sorted(order[:a.val_files]), sorted(order[a.val_files:])
        parsed = {}
        for f in FILES:
            path = os.path.join(a.stdlib, f)
            with open(path, encoding="utf-8") as fh:
                parsed[f] = token_tree(fh.read(), path)
        with open(f"{a.out_prefix}_sources.txt", "w", encoding="utf-8") as fh:
            fh.write(f"# SHA-256 of the files scripts/prepare_python_ast.py read from {a.stdlib} (Python "
                     f"{sys.version_info[0]}.{sys.version_info[1]} standard library)\n")
            for f in FILES:
                fh.write(f"{sha256(os.path.join(a.stdlib, f))}  {f}\n")
        vocab = vocabulary([parsed[f][0] for f in train], a.identifiers)
        index = {s: i for i, s in enumerate(vocab)}
        for split, files in (("train", train), ("val", val)):
            tokens, starts, parent, depth = encode_files([parsed[f] for f in files], index)
            channels = [("parent", "token", 0, max(parent), parent), ("depth", "token", 0, max(depth), depth)]
            out = f"{a.out_prefix}_{split}.rptok"
            write_token_file(out, len(vocab), tokens, starts, vocab, channels)
            print(f"{out}: {len(files)} files, {len(starts)} examples, {len(tokens)} tokens, vocabulary {len(vocab)}, "
                  f"max depth {max(depth)}")
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, tokenize.TokenError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
