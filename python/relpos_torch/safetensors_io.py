"""A minimal safetensors reader / writer (numpy), so the loader needs no `safetensors` package.
Format: 8-byte little-endian header length, JSON header {name: {dtype, shape, data_offsets}},
optional "__metadata__", then the raw little-endian data."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "F16": np.float16}


def read(path):
    """-> (dict name -> numpy array, metadata dict)"""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(blob, dtype=dt, count=(e - b) // dt.itemsize, offset=base + b).reshape(info["shape"]).copy()
    return out, meta


def write(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (float32 / float64 / int64)."""
    names = {np.dtype(v): k for k, v in DTYPES.items()}
    header, chunks, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    # the reference writer's layout: descending alignment, then by name
    for name in sorted(tensors, key=lambda n: (-np.asarray(tensors[n]).dtype.itemsize, n)):
        a = np.ascontiguousarray(tensors[name])
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
