"""relpos's validation batches, reproduced: the counter-based generator (core/rng.cpp), the
text windows (trainers/data/text_data.cpp), the patch_grid / graph tasks
(trainers/data/structured_tasks.cpp) and token_labels on relpos token files
(trainers/data/token_data.cpp). See docs/model.md "Evaluation windows"."""
import struct
from collections import deque

import torch

M64 = (1 << 64) - 1
IGNORE = -100


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class Generator:
    """relpos::Generator: draw n hashes (seed, n) with SplitMix64."""

    def __init__(self, seed=0, offset=0):
        self.seed, self.offset = seed & M64, offset

    def next_u64(self):
        k = _splitmix64(self.seed ^ 0x5851F42D4C957F2D)
        v = _splitmix64((k + self.offset * 0xD1B54A32D192ED03) & M64)
        self.offset += 1
        return v

    def uniform(self):
        return (self.next_u64() >> 11) * 2.0 ** -53


class TextData:
    """task: text. vocab: the run's vocabulary (trainer_state.json "vocab": characters sorted
    by code point); the text file is split at int(n * (1 - val_fraction))."""

    def __init__(self, path, vocab, val_fraction, batch_size):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        index = {c: i for i, c in enumerate(vocab)}
        self.ids = [index[c] for c in text]
        self.n_train = int(len(self.ids) * (1.0 - val_fraction))
        self.B = batch_size

    def val_batch(self, i, L):
        g = Generator(0x5EED0000 + i)
        lo, hi = self.n_train, len(self.ids)
        x, y = [], []
        for _ in range(self.B):
            s = lo + g.next_u64() % (hi - lo - L - 1)
            x.append(self.ids[s:s + L])
            y.append(self.ids[s + 1:s + L + 1])
        return {"input": torch.tensor(x), "target": torch.tensor(y)}


class TokenData:
    """task: tokens (a relpos token file): validation windows of L + 1 consecutive tokens drawn as
    trainers/data/token_data.cpp draws them, with the token channels of data.position_channels
    as positions [B, L, P] (the channels of the input tokens)."""

    def __init__(self, path, val_path, val_fraction, batch_size, channels):
        if val_path:
            starts, self.tokens, ch = read_token_file(val_path)
            self.lo, self.hi = 0, len(self.tokens)
        else:
            starts, self.tokens, ch = read_token_file(path)
            n_ex = len(starts) - 1
            n_val = max(1, int(n_ex * val_fraction))
            self.lo, self.hi = starts[n_ex - n_val], len(self.tokens)
        self.channels = [ch[c][1] for c in channels]  # (scope, values): the token-scope values
        self.B = batch_size

    def val_batch(self, i, L):
        g = Generator(0x5EED0000 + i)
        x, y, pos = [], [], []
        for _ in range(self.B):
            s = self.lo + g.next_u64() % (self.hi - self.lo - L - 1)
            x.append(self.tokens[s:s + L])
            y.append(self.tokens[s + 1:s + L + 1])
            pos.append([[c[s + t] for c in self.channels] for t in range(L)])
        b = {"input": torch.tensor(x), "target": torch.tensor(y)}
        if self.channels:
            b["positions"] = torch.tensor(pos, dtype=torch.int64)
        return b


class StructuredData:
    """task: patch_grid or graph (encoder tasks; symbols start at token 4)."""

    def __init__(self, task, vocab_size, batch_size, grid_h=4, grid_w=4, edge_prob=0.2):
        self.task, self.V, self.B = task, vocab_size, batch_size
        self.gh, self.gw, self.edge_prob = grid_h, grid_w, edge_prob

    def val_batch(self, i, L):
        g = Generator(0x57A7000 + i)
        B, V = self.B, self.V
        if self.task == "patch_grid":
            x = [[4 + g.next_u64() % V for _ in range(L)] for _ in range(B)]
            y = [[row[((p // self.gw + 1) % self.gh) * self.gw + p % self.gw] for p in range(L)] for row in x]
            return {"input": torch.tensor(x), "target": torch.tensor(y)}
        adj = [[[] for _ in range(L)] for _ in range(B)]
        for b in range(B):
            for u in range(L):
                for v in range(u + 1, L):
                    if g.uniform() < self.edge_prob:
                        adj[b][u].append(v)
                        adj[b][v].append(u)
        spd = [[[-1] * L for _ in range(L)] for _ in range(B)]
        for b in range(B):
            for s in range(L):
                row = spd[b][s]
                row[s] = 0
                q = deque([s])
                while q:
                    u = q.popleft()
                    for v in adj[b][u]:
                        if row[v] == -1:
                            row[v] = row[u] + 1
                            q.append(v)
        x = [[4 + (0 if i == 0 else 1) for i in range(L)] for _ in range(B)]
        y = [[4 + (V - 1 if spd[b][i][0] < 0 else min(spd[b][i][0], V - 2)) for i in range(L)] for b in range(B)]
        return {"input": torch.tensor(x), "target": torch.tensor(y), "position_index": torch.tensor(spd)}


class SyntheticData:
    """copy / reverse / sort / recall / addition (trainers/data/tasks.cpp); tokens 0 PAD, 1 BOS,
    2 SEP, 3 EOS, symbols from 4. Validation batch i at length n uses Generator(0xE7A10000 + i)."""

    PAD, BOS, SEP, EOS, FIRST = 0, 1, 2, 3, 4

    def __init__(self, task, kind, vocab_size, batch_size):
        self.task, self.kind, self.V, self.B = task, kind, vocab_size, batch_size

    def _sym(self, g):
        return self.FIRST + g.next_u64() % self.V

    def _example(self, n, g):
        t, F = self.task, self.FIRST
        if t in ("copy", "reverse", "sort"):
            x = [self._sym(g) for _ in range(n)]
            y = list(reversed(x)) if t == "reverse" else sorted(x) if t == "sort" else list(x)
        elif t == "recall":
            p = max(1, n // 2)
            keys = [F + i for i in range(self.V)]
            for i in range(p):
                j = i + g.next_u64() % (self.V - i)
                keys[i], keys[j] = keys[j], keys[i]
            x, vals = [], []
            for i in range(p):
                vals.append(self._sym(g))
                x += [keys[i], vals[-1]]
            q = g.next_u64() % p
            x.append(keys[q])
            y = [vals[q]]
        else:  # addition
            a = [g.next_u64() % 10 for _ in range(n)]
            b = [g.next_u64() % 10 for _ in range(n)]
            x = [F + d for d in a] + [F + 10] + [F + d for d in b]
            s, carry = [0] * (n + 1), 0
            for i in range(n - 1, -1, -1):
                v = a[i] + b[i] + carry
                s[i + 1], carry = v % 10, v // 10
            s[0] = carry
            y = [F + d for d in s]
        return x, y

    def val_batch(self, i, n):
        g = Generator(0xE7A10000 + i)
        ex = [self._example(n, g) for _ in range(self.B)]
        xmax, ymax = max(len(e[0]) for e in ex), max(len(e[1]) for e in ex)
        if self.kind == "decoder":
            L = xmax + ymax + 2
            inp, tg = [[self.PAD] * L for _ in ex], [[IGNORE] * L for _ in ex]
            for b, (x, y) in enumerate(ex):
                seq = [self.BOS] + x + [self.SEP]
                y0 = len(seq)
                seq += y + [self.EOS]
                for t in range(len(seq) - 1):
                    inp[b][t] = seq[t]
                    if t + 1 >= y0:
                        tg[b][t] = seq[t + 1]
            return {"input": torch.tensor(inp), "target": torch.tensor(tg)}
        inp = [x + [self.PAD] * (xmax - len(x)) for x, _ in ex]
        pad = [[0.0] * len(x) + [1.0] * (xmax - len(x)) for x, _ in ex]
        out = {"input": torch.tensor(inp), "padding": torch.tensor(pad)}
        if self.kind == "encoder":
            out["target"] = torch.tensor([y + [IGNORE] * (xmax - len(y)) for _, y in ex])
            return out
        Ly = ymax + 1
        out["dec_input"] = torch.tensor([[self.BOS] + y + [self.PAD] * (Ly - 1 - len(y)) for _, y in ex])
        out["target"] = torch.tensor([y + [self.EOS] + [IGNORE] * (Ly - 1 - len(y)) for _, y in ex])
        return out


def read_token_file(path):
    """A relpos token file (RPTOKENS v1, docs/data.md): (example starts, tokens, {channel: (scope, values)})."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"RPTOKENS":
        raise ValueError(f"{path}: not a relpos token file")
    _, header_bytes, token_bytes, n_ch = struct.unpack_from("<IIII", b, 8)
    _, n_tok, n_ex, _ = struct.unpack_from("<QQQQ", b, 24)
    chans = []
    for c in range(n_ch):
        at = 80 + 64 * c
        chans.append((b[at:at + 32].rstrip(b"\0").decode(), struct.unpack_from("<I", b, at + 32)[0]))
    at = header_bytes
    starts = list(struct.unpack_from("<%dQ" % (n_ex + 1), b, at))
    at += 8 * (n_ex + 1)
    toks = list(struct.unpack_from("<%d%s" % (n_tok, "H" if token_bytes == 2 else "I"), b, at))
    at += token_bytes * n_tok
    at += -at % 8
    values = {}
    for name, scope in chans:
        n = n_tok if scope == 0 else n_ex
        values[name] = (scope, list(struct.unpack_from("<%di" % n, b, at)))
        at += 4 * n
        at += -at % 8
    return starts, toks, values


class TokenLabelData:
    """task: token_labels: one example per row (drawn with Generator(0x5EED0000 + i)), its first L
    tokens padded to L, the `label` channel as target (per example: at position 0), the
    data.position_channels as positions [B, L, P] (padding 0). Validation: all of val_path, or the
    last max(1, floor(n val_fraction)) examples of path."""

    def __init__(self, path, val_path, val_fraction, batch_size, channels):
        self.B, self.channels = batch_size, list(channels)
        if val_path:
            self.starts, self.toks, self.ch = read_token_file(val_path)
            self.lo, self.hi = 0, len(self.starts) - 1
        else:
            self.starts, self.toks, self.ch = read_token_file(path)
            n = len(self.starts) - 1
            self.lo, self.hi = n - min(max(int(n * val_fraction), 1), n - 1), n

    def val_batch(self, i, L):
        g = Generator(0x5EED0000 + i)
        scope, labels = self.ch["label"]
        x, y, pad, pos = [], [], [], []
        for _ in range(self.B):
            e = self.lo + g.next_u64() % (self.hi - self.lo)
            s, n = self.starts[e], min(self.starts[e + 1] - self.starts[e], L)
            x.append(self.toks[s:s + n] + [0] * (L - n))
            pad.append([0.0] * n + [1.0] * (L - n))
            y.append(labels[s:s + n] + [IGNORE] * (L - n) if scope == 0 else [labels[e]] + [IGNORE] * (L - 1))
            pos.append([[self.ch[c][1][s + t] for c in self.channels] if t < n else [0] * len(self.channels)
                        for t in range(L)])
        out = {"input": torch.tensor(x), "target": torch.tensor(y), "padding": torch.tensor(pad)}
        if self.channels:
            out["positions"] = torch.tensor(pos, dtype=torch.int64)
        return out
