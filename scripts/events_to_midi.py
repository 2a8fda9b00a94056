#!/usr/bin/env python3
"""Turn Bach-chorale event tokens (scripts/prepare_chorales.py) back into a MIDI or MusicXML file.

    scripts/events_to_midi.py EVENTS OUT.mid|OUT.musicxml [--tempo 80]

EVENTS is a text file (or - for standard input) holding event tokens as `relpos sample` writes
them for a chorale run: the vocabulary strings one after another, e.g.
    n69d4n64d4n61d4n57d2w2n56d2w2...
n<pitch>d<dur> is a note of MIDI pitch <pitch> lasting <dur> 16ths at the current time, w<k>
advances the current time by k 16ths (docs/data.md, "Bach chorales"). Whitespace between
tokens is ignored. The notes are laid out in parts that never overlap (lanes(): a chorale's
voices come out as about four parts, soprano first). Needs music21 (pip install music21).
Exit 0: the file is written, with a summary line (events, notes, length in quarter notes);
exit 2: an input that is not event tokens (the first offending characters are named), no
music21, or a file that cannot be written.
"""
import argparse
import re
import sys

TOKEN = re.compile(r"n(\d+)d(\d+)|w(\d+)")


def parse(text, source):
    """[(onset16, pitch, dur16)] from event tokens; ValueError names the offending place."""
    events, now, pos = [], 0, 0
    text = "".join(text.split())
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError("%s: character %d: expected an event token n<pitch>d<dur> or w<k>, found %r"
                             % (source, pos, text[pos:pos + 12]))
        if m.group(3) is not None:
            now += int(m.group(3))
        else:
            pitch, dur = int(m.group(1)), int(m.group(2))
            if not 0 <= pitch <= 127 or dur < 1:
                raise ValueError("%s: character %d: note %r: pitch must be 0..127 and duration >= 1"
                                 % (source, pos, m.group(0)))
            events.append((now, pitch, dur))
        pos = m.end()
    return events, now


def lanes(events):
    """The notes in lanes that never overlap (one MIDI track / MusicXML part each): in time
    order, highest first, each note joins the first lane free at its onset. A chorale's four
    voices come out as about four lanes, soprano first."""
    out, free_at = [], []
    for onset, pitch, dur in sorted(events, key=lambda e: (e[0], -e[1])):
        k = next((i for i, t in enumerate(free_at) if t <= onset), len(out))
        if k == len(out):
            out.append([])
            free_at.append(0)
        out[k].append((onset, pitch, dur))
        free_at[k] = onset + dur
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("events")
    ap.add_argument("out")
    ap.add_argument("--tempo", type=float, default=80.0, help="quarter notes per minute")
    a = ap.parse_args()
    try:
        text = sys.stdin.read() if a.events == "-" else open(a.events, encoding="utf-8").read()
        events, end = parse(text, a.events)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    if not events:
        print("error: %s: no note events" % a.events, file=sys.stderr)
        return 2
    try:
        from music21 import note, stream, tempo
    except ImportError:
        print("error: scripts/events_to_midi.py needs music21 (pip install music21)", file=sys.stderr)
        return 2
    parts = []
    for lane in lanes(events):
        part = stream.Part()
        part.insert(0, tempo.MetronomeMark(number=a.tempo))
        for onset, pitch, dur in lane:
            n = note.Note(pitch)
            n.quarterLength = dur / 4
            part.insert(onset / 4, n)
        parts.append(part)
    score = stream.Score(parts)
    fmt = "musicxml" if a.out.endswith((".xml", ".musicxml", ".mxl")) else "midi"
    try:
        score.write(fmt, fp=a.out)
    except OSError as e:
        print("error: %s: %s" % (a.out, e), file=sys.stderr)
        return 2
    length = max(o + d for o, _, d in events) / 4
    print("%s: %d events, %d notes, %.2f quarter notes" % (a.out, len(TOKEN.findall("".join(text.split()))),
                                                         len(events), length))
    return 0


if __name__ == "__main__":
    sys.exit(main())
