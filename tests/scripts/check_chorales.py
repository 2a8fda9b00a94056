#!/usr/bin/env python3
"""The shipped Bach-chorale token files (data/chorales_*) and their scripts.

    check_chorales.py data                 the shipped files, standard library only: every token is an
                                           event token, the `time` channel is what the tokens say
                                           (within each chorale: its start plus the waits before each
                                           token), chorales lie end to end, the JSON split matches
    check_chorales.py music21 --relpos R   with music21 (this interpreter, or $RELPOS_MUSIC21_PYTHON):
                                           scripts/prepare_chorales.py reproduces the shipped files
                                           byte for byte; scripts/events_to_midi.py turns a validation
                                           chorale and `relpos sample` output of a trained chorale run
                                           into MIDI files that music21 reads back note for note.
                                           Exit 77 (skipped) when no interpreter has music21.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = re.compile(r"^(?:n(\d+)d(\d+)|w(\d+))$")


def read_rptokens(path):
    """(vocab, example_starts, tokens, {channel: values}) of a token file (docs/data.md)."""
    with open(path, "rb") as f:
        b = f.read()
    assert b[:8] == b"RPTOKENS", path
    _, header_bytes, token_bytes, n_channels = struct.unpack_from("<IIII", b, 8)
    vocab_size, n_tokens, n_examples, strings_bytes = struct.unpack_from("<QQQQ", b, 24)
    channels, at = [], 80
    for _ in range(n_channels):
        name = b[at:at + 32].rstrip(b"\0").decode()
        scope, _, lo, hi, _ = struct.unpack_from("<IIqqQ", b, at + 32)
        channels.append((name, scope, lo, hi))
        at += 64
    vocab = []
    for _ in range(vocab_size if strings_bytes else 0):
        (n,) = struct.unpack_from("<I", b, at)
        vocab.append(b[at + 4:at + 4 + n].decode())
        at += 4 + n
    at = header_bytes
    starts = list(struct.unpack_from("<%dQ" % (n_examples + 1), b, at))
    at += 8 * (n_examples + 1)
    tokens = list(struct.unpack_from("<%d%s" % (n_tokens, "H" if token_bytes == 2 else "I"), b, at))
    at += n_tokens * token_bytes
    at += -at % 8
    values = {}
    for name, scope, lo, hi in channels:
        n = n_tokens if scope == 0 else n_examples
        values[name] = (list(struct.unpack_from("<%di" % n, b, at)), lo, hi)
        at += 4 * n
        at += -at % 8
    assert at == len(b), "%s: %d bytes, the header implies %d" % (path, len(b), at)
    return vocab, starts, tokens, values


def check_data():
    manifest = json.load(open(os.path.join(ROOT, "data", "chorales.json")))
    seen = set()
    for split in ("train", "val"):
        path = os.path.join(ROOT, "data", "chorales_%s.rptok" % split)
        vocab, starts, tokens, values = read_rptokens(path)
        assert len(vocab) == manifest["vocab_size"], path
        assert vocab[:16] == ["w%d" % k for k in range(1, 17)], path
        parsed = [TOKEN.match(s) for s in vocab]
        assert all(parsed), "%s: a vocabulary string is not an event token" % path
        assert len(starts) - 1 == len(manifest[split]), "%s: %d chorales, the JSON lists %d" % (
            path, len(starts) - 1, len(manifest[split]))
        assert not seen & set(manifest[split]), "a chorale is in both splits"
        seen |= set(manifest[split])
        times, lo, hi = values["time"]
        assert lo == 0 and hi == max(times), path
        clock = 0
        for e in range(len(starts) - 1):
            a, z = starts[e], starts[e + 1]
            assert times[a] == clock, "%s: chorale %d starts at %d, the previous one ends at %d" % (
                path, e, times[a], clock)
            now, end = times[a], times[a]
            for t in range(a, z):
                assert times[t] == now, "%s: token %d (chorale %d): time %d, its tokens say %d" % (
                    path, t, e, times[t], now)
                m = parsed[tokens[t]]
                if m.group(3):
                    now += int(m.group(3))
                else:
                    end = max(end, now + int(m.group(2)))
            clock = end
        print("%s: %d chorales, %d tokens, times recomputed from the tokens" % (path, len(starts) - 1, len(tokens)))
    return 0


def music21_python():
    for exe in (os.environ.get("RELPOS_MUSIC21_PYTHON"), sys.executable):
        if exe and subprocess.run([exe, "-c", "import music21"], capture_output=True).returncode == 0:
            return exe
    return None


def run(cmd, env=None):
    """Run cmd; on failure print its output and stop (exit 1), naming the command."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print("FAIL: %s exited %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
        sys.exit(1)
    return r.stdout


def midi_notes(py, path, env):
    """[(onset16, pitch, dur16)] of a MIDI file, read by music21 (notes it splits at barlines
    joined again: stripTies)."""
    code = ("import sys, music21\n"
            "s = music21.converter.parse(sys.argv[1])\n"
            "for part in s.parts:\n"
            "    for n in part.stripTies().flatten().notes:\n"
            "        for p in n.pitches:\n"
            "            print(round(float(n.offset) * 4), p.midi, round(float(n.quarterLength) * 4))\n")
    out = run([py, "-c", code, path], env)
    return sorted(tuple(int(x) for x in line.split()) for line in out.splitlines())


def events_of(text):
    now, out = 0, []
    for m in re.finditer(r"n(\d+)d(\d+)|w(\d+)", text):
        if m.group(3):
            now += int(m.group(3))
        else:
            out.append((now, int(m.group(1)), int(m.group(2))))
    return sorted(out)


def check_music21(relpos):
    py = music21_python()
    if not py:
        print("music21 is not installed for this interpreter (pip install music21, or set "
              "RELPOS_MUSIC21_PYTHON to an interpreter that has it): skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TMPDIR=tmp)  # music21 keeps a scratch folder under the temp dir
        prefix = os.path.join(tmp, "chorales")
        run([py, os.path.join(ROOT, "scripts", "prepare_chorales.py"), prefix], env)
        for suffix in ("_train.rptok", "_val.rptok", ".json"):
            with open(prefix + suffix, "rb") as a, open(os.path.join(ROOT, "data", "chorales" + suffix), "rb") as b:
                assert a.read() == b.read(), "data/chorales%s differs from a fresh run of the script" % suffix
        print("scripts/prepare_chorales.py reproduces data/chorales_* byte for byte")
        # a validation chorale -> MIDI -> the same notes
        vocab, starts, tokens, _ = read_rptokens(os.path.join(ROOT, "data", "chorales_val.rptok"))
        text = "".join(vocab[t] for t in tokens[starts[0]:starts[1]])
        ev = os.path.join(tmp, "chorale.txt")
        open(ev, "w").write(text)
        mid = os.path.join(tmp, "chorale.mid")
        run([py, os.path.join(ROOT, "scripts", "events_to_midi.py"), ev, mid], env)
        assert midi_notes(py, mid, env) == events_of(text), "chorale -> MIDI -> notes differ"
        # `relpos sample` of a (briefly) trained chorale run -> MIDI
        rundir = os.path.join(tmp, "run")
        run([relpos, "--threads", "1", "train", os.path.join(ROOT, "configs", "chorales_t5.yaml"),
             "--set", "train.steps=20", "--set", "train.eval_every=20", "--set", "optim.warmup=5",
             "--set", "data.path=" + os.path.join(ROOT, "data", "chorales_train.rptok"),
             "--set", "data.val_path=" + os.path.join(ROOT, "data", "chorales_val.rptok"),
             "--set", "output.dir=" + rundir])
        out = run([relpos, "sample", rundir, "--tokens", "120", "--seed", "3"])
        open(ev, "w").write(out)
        run([py, os.path.join(ROOT, "scripts", "events_to_midi.py"), ev, mid], env)
        assert midi_notes(py, mid, env) == events_of(out), "sample -> MIDI -> notes differ"
        print("events_to_midi.py: a validation chorale and `relpos sample` output -> MIDI -> the same notes")
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "data":
        return check_data()
    if len(sys.argv) == 4 and sys.argv[1] == "music21" and sys.argv[2] == "--relpos":
        return check_music21(sys.argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
