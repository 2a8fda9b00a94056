#!/usr/bin/python3
"""Write tests/fixtures/parity_composite.json: a PyTorch reference for a small composite
function, used by tests/autograd/test_torch_parity.cpp.

    h      = x @ W1                                   x [6, 5], W1 [5, 8]
    ln     = layer_norm(h, [8], weight=g, bias=b, eps=1e-5)
    a      = gelu(ln)                                 (erf form)
    s      = softmax(a, dim=-1)
    logits = s @ W2                                   W2 [8, 4]
    loss   = cross_entropy(logits, target, ignore_index=-100, reduction="mean")

Inputs are drawn (seeded) in float32. The reference is computed twice from the same
float32-valued inputs: once in float32 and once in float64 (inputs widened exactly), with
the gradients of loss w.r.t. x, W1, g, b and W2.

Every float is written as Python's repr of the exact double value of the tensor element,
so a float32 element round-trips bit-exactly (strtod then cast to float).

Run with Debian's torch:  /usr/bin/python3 tools/make_parity_fixture.py [OUT]
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

SEED = 20240611
EPS = 1e-5
IGNORE_INDEX = -100


def make_inputs():
    gen = torch.Generator().manual_seed(SEED)

    def randn(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float32) * scale + shift)

    inputs = {
        "x": randn(6, 5),
        "W1": randn(5, 8, scale=0.7),
        "g": randn(8, scale=0.3, shift=1.0),
        "b": randn(8, scale=0.2),
        "W2": randn(8, 4, scale=1.5),
    }
    # One row ignored; the others cover every class at least once.
    target = torch.tensor([2, 0, IGNORE_INDEX, 3, 1, 3], dtype=torch.int64)
    return inputs, target


def forward_backward(inputs, target, dtype):
    leaves = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in inputs.items()}
    x, W1, g, b, W2 = (leaves[k] for k in ("x", "W1", "g", "b", "W2"))
    h = x @ W1
    ln = F.layer_norm(h, (h.shape[-1],), weight=g, bias=b, eps=EPS)
    a = F.gelu(ln, approximate="none")
    s = torch.softmax(a, dim=-1)
    logits = s @ W2
    loss = F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX, reduction="mean")
    loss.backward()
    outputs = {"h": h, "layer_norm": ln, "gelu": a, "softmax": s, "logits": logits, "loss": loss}
    return ({k: enc(v) for k, v in outputs.items()},
            {k: enc(leaves[k].grad) for k in ("x", "W1", "g", "b", "W2")})


def enc(t):
    t = t.detach()
    # .tolist() yields Python floats holding the exact value of each element.
    return {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures",
                                                            "parity_composite.json")
    torch.set_num_threads(1)
    inputs, target = make_inputs()
    fixture = {
        "description": "x@W1 -> layer_norm(g,b) -> gelu(erf) -> softmax(-1) -> @W2 -> "
                       "cross_entropy(ignore_index=-100, mean)",
        "generator": "tools/make_parity_fixture.py",
        "torch_version": torch.__version__,
        "seed": SEED,
        "eps": EPS,
        "ignore_index": IGNORE_INDEX,
        "inputs": {k: enc(v) for k, v in inputs.items()},
        "target": {"shape": list(target.shape), "data": [int(v) for v in target.tolist()]},
    }
    for name, dtype in (("float32", torch.float32), ("float64", torch.float64)):
        outputs, grads = forward_backward(inputs, target, dtype)
        fixture[name] = {"outputs": outputs, "grads": grads}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(fixture, f, indent=1)  # json uses repr() for floats: exact round trip
        f.write("\n")
    print(f"wrote {out}: loss f32 {fixture['float32']['outputs']['loss']['data'][0]!r}, "
          f"f64 {fixture['float64']['outputs']['loss']['data'][0]!r}")


if __name__ == "__main__":
    main()
