#!/usr/bin/python3
"""Write tests/fixtures/optim_adam.json: reference trajectories of torch.optim.Adam and
torch.optim.AdamW (PyTorch 1.13, single-tensor path) on small float64 parameters.

Each case has two parameter groups (different weight decay; the second runs at half the
base lr, i.e. relpos's lr_scale 0.5), fixed per-step gradients (null = the parameter has no
grad that step and must be skipped), and a base-lr change mid-run (relpos's set_lr). After
every step the parameters are recorded. tests/nn/test_optim.cpp replays the gradients.

Run from the repository root:  /usr/bin/python3 tools/make_optim_fixture.py
"""
import json
import os

import torch

SHAPES = {"decay": [[3, 4], [5]], "no_decay": [[2, 2], [3]]}
STEPS = 6
# Global parameter index 3 (no_decay's second) has no grad on these steps.
NO_GRAD = {3: {0, 2}}


def run_case(name, cls, lr, betas, eps, decay_wd, lr_change, seed):
    gen = torch.Generator().manual_seed(seed)
    groups = []
    params = []
    for gname, shapes in SHAPES.items():
        ps = [torch.randn(s, generator=gen, dtype=torch.float64).requires_grad_() for s in shapes]
        params += ps
        groups.append({"name": gname, "weight_decay": decay_wd if gname == "decay" else 0.0,
                       "lr_scale": 1.0 if gname == "decay" else 0.5, "params": ps})
    case = {
        "name": name, "optimizer": cls.__name__, "lr": lr, "beta1": betas[0], "beta2": betas[1], "eps": eps,
        "groups": [{"name": g["name"], "weight_decay": g["weight_decay"], "lr_scale": g["lr_scale"],
                    "params": [{"shape": list(p.shape), "init": p.detach().flatten().tolist()} for p in g["params"]]}
                   for g in groups],
        "steps": [],
    }
    opt = cls([{"params": g["params"], "weight_decay": g["weight_decay"], "lr": lr * g["lr_scale"]} for g in groups],
              lr=lr, betas=betas, eps=eps, foreach=False)
    base_lr = lr
    for step in range(STEPS):
        if step in lr_change:
            base_lr = lr_change[step]
            for g, pg in zip(groups, opt.param_groups):
                pg["lr"] = base_lr * g["lr_scale"]
        grads = []
        for i, p in enumerate(params):
            if step in NO_GRAD.get(i, ()):
                p.grad = None
                grads.append(None)
            else:
                # magnitudes from 1e-3 to 1e1 so that eps and the bias corrections matter
                scale = 10.0 ** float(torch.randint(-3, 2, (1,), generator=gen))
                g = torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale
                p.grad = g.clone()
                grads.append(g.flatten().tolist())
        opt.step()
        case["steps"].append({"lr": base_lr, "grads": grads,
                              "params_after": [p.detach().flatten().tolist() for p in params]})
    case["final_param_steps"] = [int(opt.state[p]["step"].item()) if p in opt.state else 0 for p in params]
    return case


def main():
    torch.set_default_dtype(torch.float64)
    out = {
        "generator": "tools/make_optim_fixture.py",
        "torch_version": torch.__version__,
        "cases": [
            run_case("adam", torch.optim.Adam, 1e-2, (0.9, 0.999), 1e-8, 0.1, {3: 5e-3}, seed=1234),
            run_case("adamw", torch.optim.AdamW, 2e-2, (0.8, 0.99), 1e-6, 0.05, {4: 1e-2}, seed=4321),
        ],
    }
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "tests", "fixtures", "optim_adam.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)  # floats are written with repr: they round-trip exactly
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
