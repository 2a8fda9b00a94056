#!/usr/bin/env python3
"""scripts/gpu-check.sh and scripts/gpu_check.py without a build (ctest: gpu_check_script).

The verdict rules run against fake binaries (shell scripts standing in for relpos,
relpos_cuda_tests and nvidia-smi), so each rule is checked where no GPU is: a CUDA test binary
that exits 77 after failing (Catch2's count of failed assertions) fails the check, a failing
case is named and rerun by triage, `relpos info` without a device or with cuBLAS not loading
fails the device part, the plan fits 540 s and plans every verb it is given, and bad input to
the helpers is one line naming the file, never a traceback.
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu-check.sh")
HELPER = os.path.join(ROOT, "scripts", "gpu_check.py")
failures = []


def check(cond, what, detail=""):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     ")[-3000:])


def run(args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(args, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def write_exe(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/usr/bin/env bash\n" + text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def plan_checks():
    rc, out = run([SCRIPT, "all", "--dry-run"])
    m = re.search(r"^#### all: budgets sum to (\d+) s", out, re.M)
    check(rc == 0 and m is not None and int(m.group(1)) <= 540, "all --dry-run: the budgets sum to <= 540 s",
          out[-800:])
    parts = re.findall(r"^== part (\S+) \((\S+)\): timeout (\d+ s|the rest)", out, re.M)
    check([p[0] for p in parts] == ["facts", "deps", "configure", "compile", "device", "cuda-tests", "triage",
                                    "curve", "configs", "bench"], "all: the parts in order, each with a timeout",
          str(parts))
    build = sum(int(b.split()[0]) for n, _, b in parts if n in ("deps", "configure", "compile"))
    check(build <= 300, f"all: the build's budget ({build} s) is at most 300 s")
    rc, out = run([SCRIPT, "build", "check", "--dry-run"])
    check(rc == 0 and "#### build:" in out and "#### check:" in out, "build check --dry-run plans both verbs",
          out[-600:])
    rc, out = run([SCRIPT, "all", "check"])
    check(rc == 2 and "stand alone" in out, "all check: refused (all already has the check)", out[-300:])
    rc, out = run([SCRIPT, "check", "--only", "nope", "--dry-run"])
    check(rc == 2 and "no part 'nope'" in out, "--only with an unknown part: refused naming it", out[-300:])
    # the rehearsal's plan: the same parts
    rc, out = run([SCRIPT, "all", "--rehearse", "--dry-run"])
    check(rc == 0 and len(re.findall(r"^== part ", out, re.M)) == 10, "all --rehearse --dry-run: the same 10 parts")
    # the configs stay valid: their step count exceeds the warmup the part sets
    rc, out = run([SCRIPT, "check", "--dry-run", "--only", "configs"])
    steps = re.search(r"train\.steps=(\d+)", out)
    warm = re.search(r"optim\.warmup=(\d+)", out)
    check(steps is not None and warm is not None and int(warm.group(1)) < int(steps.group(1)),
          "configs: optim.warmup set below train.steps (every config stays valid)", out[-600:])


def helper_checks(tmp):
    def no_traceback(args, what, want):
        rc, out = run([sys.executable, HELPER] + args)
        check(rc == 1 and "Traceback" not in out and want in out, what, out[-600:])

    no_traceback(["unpack-debs", os.path.join(tmp, "no-debs"), os.path.join(tmp, "prefix")],
                 "unpack-debs without the folder: a message naming it", "no-debs: no such folder")
    no_traceback(["curve", os.path.join(tmp, "missing.jsonl"), os.path.join(tmp, "missing.jsonl")],
                 "curve with a missing file: a message naming it", "missing.jsonl: cannot read")
    nan = os.path.join(tmp, "nan.jsonl")
    fine = os.path.join(tmp, "fine.jsonl")
    with open(nan, "w") as f:
        f.writelines('{"step": %d, "loss": %s}\n' % (s, '"nan"' if s == 30 else "2.5") for s in range(5, 65, 5))
    with open(fine, "w") as f:
        f.writelines('{"step": %d, "loss": 2.5}\n' % s for s in range(5, 65, 5))
    no_traceback(["curve", fine, nan], "curve with relpos's \"nan\" loss: FAIL naming the step", "step 30")
    rc, out = run([sys.executable, HELPER, "curve", fine, fine])
    check(rc == 0 and "PASS" in out, "curve of equal losses: PASS", out[-400:])
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"size": "small", "pos": "none", "impl": "relpos"}\n')
    no_traceback(["bench-table", bad], "bench-table with a row lacking a field: names the line and field",
                 "bad.jsonl:1: no field 'tokens_per_s'")
    with open(bad, "w") as f:
        f.write('{"size": "small", "pos": \n')
    no_traceback(["bench-table", bad], "bench-table with a broken line: names the line", "bad.jsonl:1: not JSON")
    rc, out = run([SCRIPT, "deps-configure"], env={"RELPOS_GPU_DEBS": os.path.join(tmp, "no-debs")})
    check(rc == 1 and "Traceback" not in out and "gpu-fetch-debs.sh" in out,
          "deps-configure without .gpu-debs: a message, no traceback", out[-600:])


def fake_machine(tmp, cuda_tests, info, smi="GPU 0: NVIDIA H200 (UUID: GPU-fake)"):
    """A fake build folder and PATH: relpos, tests/relpos_cuda_tests, nvidia-smi."""
    build = os.path.join(tmp, "build")
    shutil.rmtree(build, ignore_errors=True)
    bindir = os.path.join(tmp, "bin")
    shutil.rmtree(bindir, ignore_errors=True)
    write_exe(os.path.join(build, "relpos"), 'case $1 in info) %s ;; *) echo "relpos 0.1.0" ;; esac\n' % info)
    write_exe(os.path.join(build, "tests", "relpos_cuda_tests"), cuda_tests)
    write_exe(os.path.join(build, "relpos_bench_train"), "exit 1\n")
    write_exe(os.path.join(bindir, "nvidia-smi"), f'echo "{smi}"\n' if smi else "exit 9\n")
    out = os.path.join(tmp, "out")
    shutil.rmtree(out, ignore_errors=True)
    env = {"RELPOS_GPU_BUILD": build, "OUT": out, "PATH": bindir + os.pathsep + os.environ["PATH"]}
    return env, out


INFO_OK = 'printf "CUDA:         built; CUDA runtime 13.0; cuBLAS 13.0.0\\nCUDA devices: 1\\n"'
LIST = 'if [[ $1 == --list-test-names-only ]]; then printf "cuda: one\\ncuda: two, [with] *specials\\ncuda: three\\n"; exit 0; fi\n'


def verdict_checks(tmp):
    # Catch2 returns the number of failed assertions: 77 failures must not read as a skip
    env, out = fake_machine(tmp, LIST + 'echo "test cases: 1 | 1 failed; assertions: 77 | 77 failed"; exit 77\n', INFO_OK)
    rc, text = run([SCRIPT, "check", "--only", "cuda-tests"], env=env)
    check(rc == 1 and "FAIL cuda-tests" in text and "PASS cuda-tests" not in text and "gpu-check: FAIL" in text,
          "cuda-tests: a binary exiting 77 with a device present fails", text[-1500:])
    files = sorted(os.listdir(out))
    check(set(files) <= {"gpu-check.log", "build-detail.log", "cuda-tests.txt", "triage.txt", "curve.txt",
                         "configs.txt", "bench.jsonl"}, f"the output folder holds only the named files: {files}")

    # one failing case among three: named, and triage reruns exactly it (spec escaped)
    env, out = fake_machine(tmp, LIST + 'echo "ran: $1 sync=${RELPOS_CUDA_SYNC:-0}"\n'
                            '[[ $1 == "cuda: two\\, \\[with\\] \\*specials" ]] && { echo "FAILED: x == y"; exit 1; }\nexit 0\n',
                            INFO_OK)
    rc, text = run([SCRIPT, "check", "--only", "cuda-tests,triage"], env=env)
    tri = open(os.path.join(out, "triage.txt")).read() if os.path.exists(os.path.join(out, "triage.txt")) else ""
    check(rc == 1 and "FAIL case 2: cuda: two, [with] *specials" in text and "2 of 3 cases passed" in text,
          "cuda-tests: the failing case is named; the others ran", text[-1500:])
    check("case: cuda: two, [with] *specials" in tri and "sync=1" in tri,
          "triage: the first failing case again under RELPOS_CUDA_SYNC=1", tri[-800:] + text[-800:])
    # a later call: `check --only triage` finds the failing case in cuda-tests.txt
    os.remove(os.path.join(out, "triage.txt"))
    rc, text = run([SCRIPT, "check", "--only", "triage"], env=env)
    tri = open(os.path.join(out, "triage.txt")).read() if os.path.exists(os.path.join(out, "triage.txt")) else ""
    check("case: cuda: two, [with] *specials" in tri, "check --only triage: the failing case of cuda-tests.txt",
          tri[-800:] + text[-800:])
    cases = open(os.path.join(out, "cuda-tests.txt")).read()
    check(cases.count("start: ") == 3 and cases.count("end (") == 3, "cuda-tests.txt: a start and an end line per case",
          cases[-800:])

    # every case passes: PASS, and triage is skipped as not needed
    env, out = fake_machine(tmp, LIST + "exit 0\n", INFO_OK)
    rc, text = run([SCRIPT, "check", "--only", "cuda-tests,triage"], env=env)
    check(rc == 0 and "PASS cuda-tests" in text and "SKIP triage: not needed: cuda-tests passed" in text
          and "gpu-check: PASS" in text, "cuda-tests all passing: PASS, triage skipped", text[-1200:])

    # no device: the CUDA binary's own message -> "no GPU", a failure
    env, out = fake_machine(tmp, LIST + 'echo "RELPOS_REQUIRE_CUDA=1 but no CUDA device is usable: fake" >&2; exit 1\n',
                            INFO_OK)
    rc, text = run([SCRIPT, "check", "--only", "cuda-tests"], env=env)
    check(rc == 1 and re.search(r"FAIL cuda-tests \(\d+ s\): no GPU", text) is not None,
          "cuda-tests without a device: FAIL ... no GPU", text[-1200:])

    # device part: PASS with a GPU and cuBLAS; FAIL without a device (no false PASS); FAIL when
    # cuBLAS does not load; FAIL when relpos info itself fails
    env, _ = fake_machine(tmp, LIST, INFO_OK)
    rc, text = run([SCRIPT, "check", "--only", "device"], env=env)
    check(rc == 0 and "PASS device" in text, "device: a GPU and cuBLAS: PASS", text[-800:])
    env, _ = fake_machine(tmp, LIST, 'printf "CUDA devices: 0\\n"', smi="")
    rc, text = run([SCRIPT, "check", "--only", "device"], env=env)
    check(rc == 1 and re.search(r"FAIL device \(\d+ s\): no GPU", text) is not None,
          "device without a GPU: FAIL ... no GPU (never PASS)", text[-800:])
    env, _ = fake_machine(tmp, LIST, 'printf "CUDA:         built; cuBLAS not loadable (dlopen)\\nCUDA devices: 1\\n"')
    rc, text = run([SCRIPT, "check", "--only", "device"], env=env)
    check(rc == 1 and "cuBLAS does not load" in text and "FAIL device" in text,
          "device: cuBLAS not loading fails the check", text[-800:])
    env, _ = fake_machine(tmp, LIST, 'echo "relpos info: 1 CUDA device(s), but cuBLAS not loadable" >&2; exit 1')
    rc, text = run([SCRIPT, "check", "--only", "device"], env=env)
    check(rc == 1 and "FAIL device" in text, "device: relpos info exiting 1 fails the check", text[-800:])

    # the rehearsal's expectation: a GPU part that passes without a GPU is a missed expectation
    env, _ = fake_machine(tmp, LIST + "exit 0\n", INFO_OK)
    rc, text = run([SCRIPT, "check", "--rehearse", "--only", "cuda-tests"], env=env)
    check(rc == 1 and "rehearsal expects 'no GPU': MISSED" in text,
          "rehearsal: cuda-tests reading PASS (a GPU part) misses the expectation", text[-800:])

    # a missing test binary: FAIL naming the path it looked for
    env, _ = fake_machine(tmp, LIST, INFO_OK)
    os.remove(os.path.join(env["RELPOS_GPU_BUILD"], "tests", "relpos_cuda_tests"))
    rc, text = run([SCRIPT, "check", "--only", "cuda-tests"], env=env)
    check(rc == 1 and "tests/relpos_cuda_tests" in text and "FAIL cuda-tests" in text,
          "cuda-tests without the binary: FAIL naming tests/relpos_cuda_tests", text[-800:])


def main():
    tmp = tempfile.mkdtemp(prefix="relpos-gpu-check-test.")
    try:
        plan_checks()
        helper_checks(tmp)
        verdict_checks(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
