#!/usr/bin/python3
"""bench/perf_summary.py PERF_SCRIPT_TXT [--top N] — where a relpos training step spends its time.

Input: `perf script -F comm,tid,time,ip,sym,dso` of `perf record --call-graph dwarf` on
relpos_bench_train (see bench/profile_train.sh). Only samples inside a training step count
(their stack holds Model::forward, cross_entropy, Engine::backward, clip_grad_norm, the AdamW
step or zero_grad, or the graph teardown ~FunctionNode); model construction and start-up are
dropped. Prints Markdown tables (percent of the step samples):
  phase        forward / loss / backward / clip / AdamW / graph free
  autograd op  the innermost autograd-level op (relpos::matmul, relpos::softmax, ...), split
               into its forward and its backward (the op whose backward closure is running)
  kernel       the innermost kernels/ops.h entry (relpos::k::matmul, k::unary, ...) or Tensor copy
  leaf         who executes the sampled instruction: OpenBLAS, libm, page faults/memset
               (fresh allocations), libgomp, malloc/free, relpos' own loops
Samples in JIT code (oneDNN's GEMMs) have no unwindable stack: they are counted and reported
apart, not attributed (RELPOS_GEMM_PROFILE=1 times the GEMMs instead).
"""
import collections
import re
import sys

TOP = 25
args = sys.argv[1:]
if "--top" in args:
    i = args.index("--top")
    TOP = int(args[i + 1])
    del args[i:i + 2]
path = args[0]

FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\(([^)]*)\)\s*$")
AUTOGRAD_OP = re.compile(r"^relpos::(operator\S+?|[a-z_0-9]+)(\(relpos::|\(double|$)")
BACKWARD_PREFIX = "std::_Function_handler<std::vector<relpos::Tensor, std::allocator<relpos::Tensor> > (relpos::Tensor const&), "
# the op whose closure runs; its function may sit in an anonymous namespace (linear_impl)
BACKWARD_OWNER = re.compile(r"relpos::(?:\(anonymous namespace\)::)?([a-z_0-9]+|operator[^\s(]+)\(")
KERNEL = re.compile(r"^relpos::k::([a-z_0-9]+)(\(|$)")
PE_HOOK = re.compile(r"relpos::nn::\(anonymous namespace\)::\w+::(rotate|rotate_key|toeplitz_bias|score_terms|"
                     r"value_terms|embed)\b|^relpos::add_toeplitz_bias")
TENSOR = re.compile(r"^relpos::Tensor::(contiguous|copy_|clone|reshape|to|zeros|empty|full|ones|from_vector|expand)\b")


def samples(f):
    frames = []
    for line in f:
        if not line.strip():
            if frames:
                yield frames
            frames = []
            continue
        if line.startswith("\t") or line.startswith(" "):
            m = FRAME.match(line)
            if m:
                frames.append((m.group(2), m.group(3)))
        # header lines (comm tid time:) start a sample implicitly
    if frames:
        yield frames


def phase_of(stack):
    joined = "\n".join(s for s, _ in stack)
    if "relpos::Engine::backward" in joined:
        return "backward"
    if "AdamBase::step" in joined:
        return "AdamW step"
    if "clip_grad_norm" in joined or "optim::grad_norm" in joined:
        return "clip_grad_norm"
    if "AdamBase::zero_grad" in joined:
        return "zero_grad"
    if "relpos::nn::Model::forward" in joined:
        return "forward"
    if re.search(r"^relpos::cross_entropy", joined, re.M):
        return "loss forward"
    if "FunctionNode::~FunctionNode" in joined or "VariableImpl" in joined and "~" in joined:
        return "graph free"
    return None


def leaf_of(stack):
    sym, dso = stack[0]
    if "openblas" in dso:
        return "OpenBLAS (sgemm + packing)"
    if "libm" in dso:
        return "libm (" + sym.split("@")[0] + ")"
    if "libgomp" in dso:
        return "libgomp (OpenMP runtime)"
    if "kernel" in dso or sym.startswith("__memset"):
        return "page faults / memset (fresh buffers)"
    if "libc" in dso:
        if any(x in sym for x in ("malloc", "free", "_int_", "cfree")):
            return "malloc/free"
        return "libc (" + sym + ")"
    if "libstdc++" in dso:
        return "libstdc++"
    return "relpos code"


def op_name(st, ph):
    """The autograd op of a sample: in backward the op owning the running closure, else the
    innermost op frame; the phase's own name where no op is on the stack."""
    if ph == "backward":
        for sym, _ in st:
            m = BACKWARD_OWNER.search(sym[len(BACKWARD_PREFIX):]) if sym.startswith(BACKWARD_PREFIX) else None
            if m:
                return m.group(1).removesuffix("_impl") + " (backward)"  # linear_impl: linear
        return "engine (grad accumulation, bookkeeping)"
    for sym, _ in st:
        m = AUTOGRAD_OP.match(sym)
        if m:
            return m.group(1) + " (forward)"
    return {"AdamW step": "AdamW step", "clip_grad_norm": "clip_grad_norm",
            "zero_grad": "zero_grad", "graph free": "graph free"}.get(ph, ph + " (other)")


def kernel_name(st):
    """The innermost kernels/ops.h entry of a sample, else the innermost Tensor copy/alloc."""
    for pattern, prefix in ((KERNEL, "k::"), (TENSOR, "Tensor::")):
        for sym, _ in st:
            m = pattern.match(sym)
            if m:
                return prefix + m.group(1)
    return "(no kernel: bookkeeping)"


def table(title, counter, total, top=TOP):
    print(f"| {title} | samples | % |")
    print("|---|---:|---:|")
    for k, v in counter.most_common(top):
        print(f"| {k} | {v} | {100.0 * v / total:.1f} |")
    rest = sum(counter.values()) - sum(v for _, v in counter.most_common(top))
    if rest:
        print(f"| (rest) | {rest} | {100.0 * rest / total:.1f} |")
    print()


def count(f):
    """The counters over every sample inside a training step."""
    c = {k: collections.Counter() for k in ("phase", "op", "kern", "leaf", "leaf_sym")}
    # alloc: samples inside Storage::Storage (alloc + zero fill); kern_mode: leaf in the kernel;
    # pe_fwd: forward samples inside the position encoding's hooks or add_toeplitz_bias;
    # jit: samples whose instruction is in JIT code (oneDNN's GEMM kernels); every: all samples
    n = dict.fromkeys(("alloc", "kern_mode", "pe_fwd", "total", "jit", "every"), 0)
    for st in samples(f):
        n["every"] += 1
        if st[0][1].startswith("/tmp/perf-") and st[0][1].endswith(".map"):
            n["jit"] += 1
        ph = phase_of(st)
        if ph is None:
            continue
        n["total"] += 1
        c["phase"][ph] += 1
        c["op"][op_name(st, ph)] += 1
        n["alloc"] += any("relpos::Storage::Storage" in sym for sym, _ in st)
        n["kern_mode"] += "kernel" in st[0][1]
        n["pe_fwd"] += ph == "forward" and any(PE_HOOK.search(sym) for sym, _ in st)
        c["kern"][kernel_name(st)] += 1
        lf = leaf_of(st)
        c["leaf"][lf] += 1
        if lf == "relpos code":
            c["leaf_sym"][re.sub(r"\(.*", "", st[0][0].replace("(anonymous namespace)", "anon"))[:100]] += 1
    return c, n


def main():
    with open(path, errors="replace") as f:
        c, n = count(f)
    total = n["total"]
    if total == 0:
        sys.exit(f"perf_summary: no samples inside training steps in {path} (of {n['every']} samples)")
    print(f"{total} samples inside training steps ({path})\n")
    if n["jit"]:
        print(f"**Not in these tables: {n['jit']} of all {n['every']} samples ({100.0 * n['jit'] / n['every']:.0f}%) "
              f"ran JIT code** (oneDNN's GEMM kernels, named only in /tmp/perf-PID.map): perf cannot unwind their "
              f"stacks, so they are not attributed to a step, an op or a kernel below. RELPOS_GEMM_PROFILE=1 times "
              f"the GEMMs (bench/profile_train.sh prints that table too).\n")
    table("phase", c["phase"], total)
    print(f"position encoding, forward only (its hooks rotate/toeplitz_bias/score_terms/value_terms + "
          f"add_toeplitz_bias, inclusive): {n['pe_fwd']} samples = {100.0 * n['pe_fwd'] / total:.1f}%\n")
    print(f"fresh buffers: inside Storage::Storage (aligned_alloc + memset zero fill, incl. page faults) "
          f"{100.0 * n['alloc'] / total:.1f}%; in the kernel (page faults, mm) {100.0 * n['kern_mode'] / total:.1f}%\n")
    table("autograd op (forward / backward)", c["op"], total)
    table("kernel (kernels/ops.h entry)", c["kern"], total, 15)
    table("leaf (who runs the instruction)", c["leaf"], total, 12)
    table("relpos-code leaf function", c["leaf_sym"], total, 10)


if __name__ == "__main__":
    main()
