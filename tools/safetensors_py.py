#!/usr/bin/python3
"""An independent, standard-library-only safetensors reader and writer, to cross-check
relpos's C++ implementation (trainers/io/safetensors.cpp) against a second one.

  /usr/bin/python3 tools/safetensors_py.py dump FILE
      Read FILE strictly (header length, JSON, offsets sorted/contiguous/covering, byte
      counts) and print each tensor as name, dtype, shape, values. Exit 1 on any problem.

  /usr/bin/python3 tools/safetensors_py.py write-fixture
      Write tests/fixtures/safetensors_python.safetensors the way the reference writer lays
      a file out (tensors sorted by descending dtype alignment, then by name; metadata
      first) but with json.dumps' default separators (", " and ": "), so relpos's reader
      sees a header formatted differently from its own. tests/trainers/test_checkpoint.cpp
      reads it and checks the values written below.

Run from the repository root.
"""
import json
import struct
import sys

FORMATS = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8)}


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > 100_000_000 or 8 + n > len(blob):
        raise ValueError(f"bad header length {n}")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    expected_begin = 0
    tensors = []
    for name, info in entries:
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"{name}: keys {sorted(info)}")
        code, size = FORMATS[info["dtype"]]
        begin, end = info["data_offsets"]
        numel = 1
        for d in info["shape"]:
            numel *= d
        if begin != expected_begin or end - begin != numel * size:
            raise ValueError(f"{name}: offsets {begin, end} (expected begin {expected_begin}, {numel * size} bytes)")
        expected_begin = end
        values = list(struct.unpack(f"<{numel}{code}", data[begin:end]))
        tensors.append((name, info["dtype"], info["shape"], values))
    if expected_begin != len(data):
        raise ValueError(f"tensors cover {expected_begin} of {len(data)} data bytes")
    return tensors, metadata, n


def write(path, tensors, metadata):
    """tensors: list of (name, dtype, shape, values); laid out like the reference writer."""
    order = sorted(tensors, key=lambda t: (-FORMATS[t[1]][1], t[0]))
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, values in order:
        code, _ = FORMATS[dtype]
        raw = struct.pack(f"<{len(values)}{code}", *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


FIXTURE = "tests/fixtures/safetensors_python.safetensors"
FIXTURE_TENSORS = [
    ("w", "F32", [2, 2], [0.5, -1.5, 3.25, 0.001]),
    ("ids", "I64", [3], [-1, 0, 2 ** 40]),
    ("pi", "F64", [], [3.141592653589793]),
    ("e", "F32", [0], []),
]
FIXTURE_METADATA = {"framework": "python-struct", "note": "written by tools/safetensors_py.py"}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        tensors, metadata, n = read(sys.argv[2])
        print(f"header {n} bytes, metadata {metadata}")
        for name, dtype, shape, values in tensors:
            print(f"{name} {dtype} {shape} {values}")
    elif len(sys.argv) == 2 and sys.argv[1] == "write-fixture":
        write(FIXTURE, FIXTURE_TENSORS, FIXTURE_METADATA)
        tensors, _, _ = read(FIXTURE)
        print(f"wrote {FIXTURE}: " + ", ".join(t[0] for t in tensors))
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
