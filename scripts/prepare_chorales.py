#!/usr/bin/env python3
"""J.S. Bach's chorales from music21's corpus as relpos event tokens with onset times.

    scripts/prepare_chorales.py OUT_PREFIX [--val-fraction 0.1] [--seed 52]

writes OUT_PREFIX_train.rptok and OUT_PREFIX_val.rptok (RPTOKENS, docs/data.md) and
OUT_PREFIX.json (the chorale of each example). Needs music21 (PyPI; not needed to train on the
shipped files). The shipped data/chorales_* are its output with the defaults:
    scripts/prepare_chorales.py data/chorales

The chorales: music21.corpus.chorales.Iterator() (the 371 of Riemenschneider's numbering), each
chorale's four vocal parts (the parts named soprano, alto, tenor, bass, or the four parts of a score
whose four parts have no names; any other chorale is left out and listed in the JSON), ties merged (stripTies), grace notes dropped, onsets
and durations rounded to 16th notes (a note shorter than a 16th lasts one).

One token per event, in time order (docs/data.md, "Bach chorales"):
    n<pitch>d<dur>   a note of MIDI pitch <pitch> lasting <dur> 16ths, starting at the current time
    w<k>             wait: the current time advances by k 16ths (1 <= k <= 16; longer waits repeat)
Notes with the same onset come highest pitch first. Token channel `time` is each token's
onset in 16ths: the chorale's start plus the sum of k over the w<k> tokens before it in its
chorale, so the time of every event within its chorale is recomputable from the tokens alone.
The chorales of a file lie end to end on one clock (each starts where the one before ends: its
last note's release), so the channel never decreases along a file, also where a training window
crosses from one chorale into the next. The vocabulary is
every w1..w16 plus the notes of the corpus, sorted. The split is by chorale: a shuffle of the
chorales with random.Random(seed) puts the last max(1, floor(n * val_fraction)) in validation.

License: the scores are public domain (Bach, 1685-1750); the music21 corpus encodings are
distributed under BSD-3-Clause (music21's license), which the token files keep (data/LICENSE-chorales).
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare_tokens import write_token_file  # noqa: E402

VOICES = ("soprano", "alto", "tenor", "bass")
MAX_WAIT = 16


def chorale_events(score):
    """[(onset16, pitch, dur16)] of the four voices, or None when a voice is missing."""
    parts = {}
    for p in score.parts:
        name = (p.partName or "").strip().lower()
        if name in VOICES and name not in parts:
            parts[name] = p
    if not parts and len(score.parts) == 4 and not any(p.partName for p in score.parts):
        parts = dict(zip(VOICES, score.parts))  # four unnamed parts: S, A, T, B from the top
    if len(parts) != 4:
        return None
    events = []
    for v in VOICES:
        for n in parts[v].stripTies().flatten().notes:
            if n.duration.isGrace or n.quarterLength == 0:
                continue
            onset = int(round(float(n.offset) * 4))
            dur = max(1, int(round(float(n.quarterLength) * 4)))
            for pitch in n.pitches:
                events.append((onset, int(pitch.midi), dur))
    events = sorted(set(events), key=lambda e: (e[0], -e[1], e[2]))
    return events


def to_strings(events):
    """The event tokens (as strings), each token's time from the chorale's start, and the
    chorale's length in 16ths (its last release)."""
    out, times, now = [], [], 0
    for onset, pitch, dur in events:
        while now < onset:
            k = min(MAX_WAIT, onset - now)
            out.append("w%d" % k)
            times.append(now)
            now += k
        out.append("n%dd%d" % (pitch, dur))
        times.append(now)
    return out, times, max(onset + dur for onset, _, dur in events)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_prefix")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=52)
    a = ap.parse_args()
    try:
        from music21 import corpus
    except ImportError:
        print("error: scripts/prepare_chorales.py needs music21 (pip install music21); the prepared "
              "files are shipped in data/", file=sys.stderr)
        return 2
    names, chorales, skipped = [], [], []
    for name in corpus.chorales.Iterator(returnType="filename"):
        if name in names:
            continue
        events = chorale_events(corpus.parse(name))
        if not events:
            skipped.append(name)
            continue
        names.append(name)
        chorales.append(to_strings(events))
    notes = sorted({s for toks, _, _ in chorales for s in toks if s.startswith("n")},
                   key=lambda s: tuple(int(x) for x in s[1:].split("d")))
    vocab = ["w%d" % k for k in range(1, MAX_WAIT + 1)] + notes
    index = {s: i for i, s in enumerate(vocab)}
    order = list(range(len(names)))
    random.Random(a.seed).shuffle(order)
    n_val = max(1, int(len(order) * a.val_fraction))
    splits = {"train": sorted(order[:-n_val]), "val": sorted(order[-n_val:])}
    manifest = {"source": "music21.corpus.chorales.Iterator()", "seed": a.seed,
                "val_fraction": a.val_fraction, "vocab_size": len(vocab), "skipped": skipped}
    for split, members in splits.items():
        tokens, starts, times, clock = [], [], [], 0
        for c in members:
            toks, ts, length = chorales[c]
            starts.append(len(tokens))
            tokens.extend(index[s] for s in toks)
            times.extend(clock + t for t in ts)
            clock += length
        write_token_file("%s_%s.rptok" % (a.out_prefix, split), len(vocab), tokens, starts, vocab,
                         [("time", "token", 0, max(times), times)])
        manifest[split] = [names[c] for c in members]
    with open(a.out_prefix + ".json", "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
