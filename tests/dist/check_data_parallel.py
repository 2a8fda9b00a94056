#!/usr/bin/env python3
"""Data-parallel training under mpirun (issue: beyond one machine). One check per invocation:

  check_data_parallel.py --relpos BUILD/relpos CHECK      CHECK in: equivalence, equivalence_seq2seq,
                                                          hang, stall, exit, mismatch, diverge, resume

Exit 77 (ctest: skipped) when mpirun is missing or relpos was built without MPI.
Each check runs tiny configs in a fresh temporary directory and compares metrics.jsonl files.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--relpos", required=True)
ap.add_argument("check")
args = ap.parse_args()
RELPOS = os.path.abspath(args.relpos)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = shutil.which("mpirun")
if not MPIRUN:
    print("SKIP: mpirun not found (Debian: openmpi-bin; scripts/install-deps.sh installs it)")
    sys.exit(77)
info = subprocess.run([RELPOS, "info"], capture_output=True, text=True).stdout
if "MPI: built without" in info or "MPI:" not in info:
    print("SKIP: this relpos was built without MPI (RELPOS_MPI=OFF)")
    sys.exit(77)

# A tiny decoder with dropout on every path that has one; data.batch_size is per rank.
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.dropout=0.1",
        "model.position.type=t5", "data.seq_len=32", "optim.warmup=2", "train.steps=8", "train.log_every=1",
        "train.eval_every=4", "train.eval_batches=2", "train.checkpoint_every=4", "train.check_every=2"]
SEQ2SEQ = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.d_ff=64", "model.dropout=0.1",
           "optim.warmup=2", "train.steps=8", "train.log_every=1", "train.eval_every=4", "train.eval_batches=2",
           "train.checkpoint_every=4"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
           # ptrace-restricted containers: no CMA single-copy between ranks
           OMPI_MCA_btl_vader_single_copy_mechanism="none", ASAN_OPTIONS="detect_leaks=0")
ENV.pop("RELPOS_FAULT", None)


def sets(xs):
    out = []
    for x in xs:
        out += ["--set", x]
    return out


def run(cmd, env=None, timeout=300, expect=0):
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=env or ENV, capture_output=True, text=True, timeout=timeout)
    dt = time.time() - t0
    if expect is not None and p.returncode != expect:
        print("FAILED:", " ".join(cmd), "exit", p.returncode, "\n--- stdout\n", p.stdout[-3000:], "\n--- stderr\n",
              p.stderr[-3000:])
        sys.exit(1)
    return p, dt


def mpi(n, config, overrides, env=None, timeout=300, expect=0, extra=()):
    return run([MPIRUN, "-np", str(n), RELPOS, "--threads", "1", "train", config] + sets(overrides) + list(extra),
               env=env, timeout=timeout, expect=expect)


def single(config, overrides, extra=()):
    return run([RELPOS, "--threads", "1", "train", config] + sets(overrides) + list(extra))


def metrics(run_dir):
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    loss = {r["step"]: r["loss"] for r in rows if "loss" in r and not r.get("skipped")}
    val = {r["step"]: r["val_loss"] for r in rows if "val_loss" in r}
    return loss, val


def compare(a, b, tol, what):
    la, va = metrics(a)
    lb, vb = metrics(b)
    assert sorted(la) == sorted(lb) and la, f"{what}: logged steps differ: {sorted(la)} vs {sorted(lb)}"
    worst = 0.0
    for s in la:
        d = abs(la[s] - lb[s]) / max(abs(lb[s]), 1e-12)
        worst = max(worst, d)
        assert d <= tol, f"{what}: step {s}: loss {la[s]!r} vs {lb[s]!r} (rel. diff {d:.3g} > {tol})"
    for s in va:
        d = abs(va[s] - vb[s]) / max(abs(vb[s]), 1e-12)
        worst = max(worst, d)
        assert d <= tol, f"{what}: step {s}: val loss {va[s]!r} vs {vb[s]!r} (rel. diff {d:.3g} > {tol})"
    print(f"{what}: {len(la)} steps, worst relative difference {worst:.3g} (tolerance {tol})")
    return worst


# float32, summation order differs (two half batches vs one batch in each GEMM and reduction):
# stated tolerance on the per-step loss over 8 AdamW steps.
TOL = 1e-4

with tempfile.TemporaryDirectory(prefix="relpos_dp_") as tmp:
    d = lambda name: os.path.join(tmp, name)
    quick = "configs/quickstart.yaml"
    if args.check in ("equivalence", "equivalence_seq2seq"):
        cfg, base = (quick, TINY) if args.check == "equivalence" else ("configs/encoder_decoder_reverse.yaml", SEQ2SEQ)
        mpi(2, cfg, base + ["data.batch_size=4", f"output.dir={d('dp2')}"])
        single(cfg, base + ["data.batch_size=8", f"output.dir={d('one')}"])
        compare(d("dp2"), d("one"), TOL, f"{cfg}: 2 ranks x batch 4 vs 1 process x batch 8 (dropout 0.1)")
        # and a different split of the same global batch must differ from nothing but rounding
        st = json.load(open(os.path.join(d("dp2"), "checkpoints", "step_00000008", "trainer_state.json")))
        assert st["world_size"] == 2, st
        assert not os.path.exists(os.path.join(d("dp2"), "metrics.jsonl.tmp"))
    elif args.check == "hang":
        env = dict(ENV, RELPOS_FAULT="hang:1:6")
        p, dt = mpi(2, quick, TINY + ["data.batch_size=4", "train.checkpoint_every=2", "train.dist_timeout=5",
                                        f"output.dir={d('hang')}"], env=env, timeout=120, expect=None)
        out = p.stdout + p.stderr
        assert p.returncode != 0, "a hung rank must stop the job with an error"
        assert "rank 1 did not reach step 6" in out, out[-2000:]
        print(f"hang: job stopped after {dt:.1f} s (dist_timeout 5 s), exit {p.returncode}, rank 1 named")
        run([RELPOS, "--threads", "1", "eval", d("hang")])  # the last checkpoint (step 4) is loadable
    elif args.check == "stall":
        # rank 1 stops between its backward and the gradient all-reduce (as a SIGSTOPped rank
        # would): rank 0 waits inside the collective, which now has the same deadline.
        env = dict(ENV, RELPOS_FAULT="stall:1:6")
        p, dt = mpi(2, quick, TINY + ["data.batch_size=4", "train.checkpoint_every=2", "train.dist_timeout=5",
                                        f"output.dir={d('stall')}"], env=env, timeout=120, expect=None)
        out = p.stdout + p.stderr
        assert p.returncode != 0, "a rank stopped before the all-reduce must stop the job with an error"
        assert "rank 1 did not reach the gradient all-reduce" in out, out[-2000:]
        assert dt < 60, f"the job took {dt:.1f} s to stop (dist_timeout 5 s)"
        print(f"stall: job stopped after {dt:.1f} s (dist_timeout 5 s), exit {p.returncode}, rank 1 named")
        run([RELPOS, "--threads", "1", "eval", d("stall")])  # the last checkpoint (step 4) is loadable
    elif args.check == "exit":
        env = dict(ENV, RELPOS_FAULT="exit:1:3")
        p, dt = mpi(2, quick, TINY + ["data.batch_size=4", "train.checkpoint_every=2", "train.dist_timeout=20",
                                        f"output.dir={d('exit')}"], env=env, timeout=120, expect=None)
        out = p.stdout + p.stderr
        assert p.returncode != 0, "a dead rank must stop the job"
        # mpirun names the process (rank 1) that exited; our rendezvous names it when it times out first
        assert ("rank 1 did not reach" in out) or (",1]" in out and "Exit code: 3" in out.replace("Exit code:    3", "Exit code: 3")) or ("rank 1" in out), out[-2000:]
        print(f"exit: job stopped after {dt:.1f} s, exit {p.returncode}")
        run([RELPOS, "--threads", "1", "eval", d("exit")])  # step 2's checkpoint is loadable
    elif args.check == "mismatch":
        base = [RELPOS, "--threads", "1", "train", quick] + sets(TINY + ["data.batch_size=4", f"output.dir={d('mm')}"])
        p, _ = run([MPIRUN, "-np", "1"] + base + ["--set", "optim.lr=0.001", ":", "-np", "1"] + base +
                   ["--set", "optim.lr=0.002"], timeout=120, expect=None)
        out = p.stdout + p.stderr
        assert p.returncode == 2, f"exit {p.returncode}\n{out[-2000:]}"
        assert "rank 1 runs a different config" in out, out[-2000:]
        assert not os.path.exists(os.path.join(d("mm"), "metrics.jsonl")), "nothing may be written"
        print("mismatch: exit 2, rank 1 named, nothing written")
    elif args.check == "diverge":
        env = dict(ENV, RELPOS_FAULT="diverge:1:3")
        p, _ = mpi(2, quick, TINY + ["data.batch_size=4", "train.check_every=1", f"output.dir={d('dv')}"], env=env,
                   timeout=120, expect=None)
        out = p.stdout + p.stderr
        assert p.returncode == 1, f"exit {p.returncode}\n{out[-2000:]}"
        assert "after step 3 the parameters of rank 1 differ" in out, out[-2000:]
        print("diverge: exit 1, step 3 and rank 1 named")
    elif args.check == "resume":
        mpi(2, quick, TINY + ["data.batch_size=4", f"output.dir={d('full')}"])
        mpi(2, quick, TINY + ["data.batch_size=4", "train.steps=4", f"output.dir={d('part')}"])
        # steps=4 -> cosine schedule differs; resume with the full step count instead
        shutil.rmtree(d("part"))
        mpi(2, quick, TINY + ["data.batch_size=4", f"output.dir={d('part')}"])
        ck4 = os.path.join(d("part"), "checkpoints", "step_00000004")
        assert os.path.isdir(ck4), os.listdir(os.path.join(d("part"), "checkpoints"))
        shutil.copytree(d("part"), d("resumed"))
        shutil.rmtree(os.path.join(d("resumed"), "checkpoints", "step_00000008"))
        mpi(2, quick, TINY + ["data.batch_size=4"], extra=["--resume", d("resumed")])
        la, _ = metrics(d("full"))
        lb, _ = metrics(d("resumed"))
        assert la == lb, f"resume with the same ranks must be bit-exact:\n{la}\n{lb}"
        p, _ = run([RELPOS, "--threads", "1", "train", quick] + sets(TINY + ["data.batch_size=4"]) +
                   ["--resume", ck4])
        assert "the checkpoint was written by 2 rank(s), this run has 1" in p.stdout, p.stdout[-2000:]
        print("resume: 2 ranks resumed at step 4 == uninterrupted (bit-exact); 1-rank resume warns")
    else:
        print("unknown check", args.check)
        sys.exit(2)
print("ok")
