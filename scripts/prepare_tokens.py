#!/usr/bin/env python3
"""Write relpos token files (RPTOKENS, version 1; the byte layout is docs/data.md).

As a module: write_token_file(path, vocab_size, tokens, example_starts, vocab=None, channels=())
with channels a list of (name, scope, min, max, values), scope "token" or "example".

As a command:
    scripts/prepare_tokens.py chars TEXT OUT      characters of a UTF-8 text file, one example per
                                                  paragraph (blank-line separated), the sorted
                                                  distinct characters as vocabulary strings
    scripts/prepare_tokens.py ids IDS OUT --vocab V
                                                  whitespace-separated token ids, one example per
                                                  line, no vocabulary strings
Only the standard library. The license of the output is the input's (the bundled
data/tinyshakespeare.txt is public domain).
"""
import argparse
import struct
import sys
import zlib

MAGIC = b"RPTOKENS"
VERSION = 1


def _pad8(b):
    return b + b"\0" * (-len(b) % 8)


def encode(vocab_size, tokens, example_starts, vocab=None, channels=()):
    """The file's bytes."""
    token_bytes = 2 if vocab_size <= 65536 else 4
    strings = b"".join(struct.pack("<I", len(s.encode())) + s.encode() for s in (vocab or []))
    table = b""
    for name, scope, lo, hi, _ in channels:
        table += name.encode().ljust(32, b"\0") + struct.pack("<IIqqQ", {"token": 0, "example": 1}[scope], 0, lo, hi, 0)
    header_bytes = 80 + len(table) + len(strings)
    header_bytes += -header_bytes % 8
    fixed = MAGIC + struct.pack("<IIII", VERSION, header_bytes, token_bytes, len(channels))
    fixed += struct.pack("<QQQQ", vocab_size, len(tokens), len(example_starts), len(strings))
    body = struct.pack("<%dQ" % (len(example_starts) + 1), *example_starts, len(tokens))
    body += _pad8(struct.pack("<%d%s" % (len(tokens), "H" if token_bytes == 2 else "I"), *tokens))
    for *_, values in channels:
        body += _pad8(struct.pack("<%di" % len(values), *values))
    payload_crc = zlib.crc32(body)
    rest = struct.pack("<QQ", 0, 0) + table + strings
    head = fixed + struct.pack("<II", payload_crc, 0) + rest
    head = _pad8(head)
    header_crc = zlib.crc32(head)
    head = fixed + struct.pack("<II", payload_crc, header_crc) + head[64:]
    return head + body


def write_token_file(path, vocab_size, tokens, example_starts, vocab=None, channels=()):
    with open(path, "wb") as f:
        f.write(encode(vocab_size, tokens, example_starts, vocab, channels))


def paragraphs(text):
    out, start = [], 0
    while start < len(text):
        at = text.find("\n\n", start)
        if at < 0:
            out.append(text[start:])
            break
        end = at
        while end < len(text) and text[end] == "\n":
            end += 1
        out.append(text[start:end])
        start = end
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("chars")
    c.add_argument("text")
    c.add_argument("out")
    i = sub.add_parser("ids")
    i.add_argument("ids")
    i.add_argument("out")
    i.add_argument("--vocab", type=int, required=True)
    a = ap.parse_args()
    try:
        if a.cmd == "chars":
            with open(a.text, encoding="utf-8") as f:
                text = f.read()
            vocab = sorted(set(text))
            index = {ch: k for k, ch in enumerate(vocab)}
            tokens, starts = [], []
            for p in paragraphs(text):
                starts.append(len(tokens))
                tokens.extend(index[ch] for ch in p)
            write_token_file(a.out, len(vocab), tokens, starts, vocab)
        else:
            tokens, starts = [], []
            with open(a.ids) as f:
                for line in f:
                    ids = [int(w) for w in line.split()]
                    if ids:
                        starts.append(len(tokens))
                        tokens.extend(ids)
            bad = [t for t in tokens if not 0 <= t < a.vocab]
            if bad:
                print(f"error: {a.ids}: token id {bad[0]} is outside [0, {a.vocab})", file=sys.stderr)
                return 2
            write_token_file(a.out, a.vocab, tokens, starts)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
