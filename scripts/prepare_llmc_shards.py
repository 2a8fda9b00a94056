#!/usr/bin/env python3
"""Write llm.c / nanoGPT-style token shards (the layout of llm.c's dev/data/data_common.py:
a header of 256 little-endian int32 — magic, version, token count — then the tokens).

    scripts/prepare_llmc_shards.py OUT_PREFIX [--tokens N] [--vocab V] [--seed S] [--llama3]

writes OUT_PREFIX_train_000000.bin and OUT_PREFIX_val_000000.bin: N (val: N // 10) tokens over V
token ids from a fixed seed, each the previous one plus 1 (mod V) nine times in ten and random
otherwise, so a model has something to learn. GPT-2 shards
(magic 20240520, version 1, uint16), or Llama-3 shards with --llama3 (20240801, version 7, uint32).
Only the standard library; the tokens are synthetic (no license applies). relpos reads the shards
with `data.task: tokens` (docs/data.md). data/llmc_toy_{train,val}_000000.bin are this script's
output with the defaults (`scripts/prepare_llmc_shards.py data/llmc_toy`; configs/tokens_llmc.yaml
trains on them); tests/trainers/test_token_file.cpp checks they are, and trains on its output.
"""
import argparse
import random
import struct
import sys


def write_shard(path, tokens, llama3):
    magic, version, fmt = (20240801, 7, "<%dI") if llama3 else (20240520, 1, "<%dH")
    header = [0] * 256
    header[0], header[1], header[2] = magic, version, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(fmt % len(tokens), *tokens))


def tokens(n, vocab, rng):
    # only random(): Python keeps its sequence for a seed across versions (randrange's may change)
    def draw():
        return int(rng.random() * vocab)
    out = [draw()]
    while len(out) < n:
        out.append((out[-1] + 1) % vocab if rng.random() < 0.9 else draw())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llama3", action="store_true")
    a = ap.parse_args()
    limit = 1 << 32 if a.llama3 else 1 << 16
    if not 2 <= a.vocab <= limit or a.tokens < 1:
        print(f"error: --vocab must be in [2, {limit}] and --tokens >= 1", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    write_shard(f"{a.prefix}_train_000000.bin", tokens(a.tokens, a.vocab, rng), a.llama3)
    write_shard(f"{a.prefix}_val_000000.bin", tokens(max(a.tokens // 10, 1), a.vocab, rng), a.llama3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
