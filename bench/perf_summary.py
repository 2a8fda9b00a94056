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


def main():
    phase = collections.Counter()
    op = collections.Counter()
    kern = collections.Counter()
    leaf = collections.Counter()
    leaf_sym = collections.Counter()
    alloc = kern_mode = 0  # samples inside Storage::Storage (alloc + zero fill); leaf in the kernel
    pe_fwd = 0  # forward samples inside the position encoding's hooks or add_toeplitz_bias
    total = 0
    jit = every = 0  # samples whose instruction is in JIT code (oneDNN's GEMM kernels); all samples
    with open(path, errors="replace") as f:
        for st in samples(f):
            every += 1
            if st[0][1].startswith("/tmp/perf-") and st[0][1].endswith(".map"):
                jit += 1
            ph = phase_of(st)
            if ph is None:
                continue
            total += 1
            phase[ph] += 1
            # autograd op: in backward, the op owning the running closure; else innermost op frame
            name = None
            if ph == "backward":
                for sym, _ in st:
                    m = BACKWARD_OWNER.search(sym[len(BACKWARD_PREFIX):]) if sym.startswith(BACKWARD_PREFIX) else None
                    if m:
                        name = m.group(1).removesuffix("_impl") + " (backward)"  # linear_impl: linear
                        break
                if name is None:
                    name = "engine (grad accumulation, bookkeeping)"
            else:
                for sym, _ in st:
                    m = AUTOGRAD_OP.match(sym)
                    if m:
                        name = m.group(1) + " (forward)"
                        break
                if name is None:
                    name = {"AdamW step": "AdamW step", "clip_grad_norm": "clip_grad_norm",
                            "zero_grad": "zero_grad", "graph free": "graph free"}.get(ph, ph + " (other)")
            op[name] += 1
            if any("relpos::Storage::Storage" in sym for sym, _ in st):
                alloc += 1
            if "kernel" in st[0][1]:
                kern_mode += 1
            if ph == "forward" and any(PE_HOOK.search(sym) for sym, _ in st):
                pe_fwd += 1
            kname = None  # the innermost kernels/ops.h entry, else the innermost Tensor copy/alloc
            for sym, _ in st:
                m = KERNEL.match(sym)
                if m:
                    kname = "k::" + m.group(1)
                    break
            if kname is None:
                for sym, _ in st:
                    m = TENSOR.match(sym)
                    if m:
                        kname = "Tensor::" + m.group(1)
                        break
            kern[kname or "(no kernel: bookkeeping)"] += 1
            lf = leaf_of(st)
            leaf[lf] += 1
            if lf == "relpos code":
                leaf_sym[re.sub(r"\(.*", "", st[0][0].replace("(anonymous namespace)", "anon"))[:100]] += 1

    def table(title, counter, top=TOP):
        print(f"| {title} | samples | % |")
        print("|---|---:|---:|")
        for k, v in counter.most_common(top):
            print(f"| {k} | {v} | {100.0 * v / total:.1f} |")
        rest = sum(counter.values()) - sum(v for _, v in counter.most_common(top))
        if rest:
            print(f"| (rest) | {rest} | {100.0 * rest / total:.1f} |")
        print()

    print(f"{total} samples inside training steps ({path})\n")
    if jit:
        print(f"**Not in these tables: {jit} of all {every} samples ({100.0 * jit / every:.0f}%) ran JIT code** "
              f"(oneDNN's GEMM kernels, named only in /tmp/perf-PID.map): perf cannot unwind their stacks, so "
              f"they are not attributed to a step, an op or a kernel below. RELPOS_GEMM_PROFILE=1 times the "
              f"GEMMs (bench/profile_train.sh prints that table too).\n")
    table("phase", phase)
    print(f"position encoding, forward only (its hooks rotate/toeplitz_bias/score_terms/value_terms + "
          f"add_toeplitz_bias, inclusive): {pe_fwd} samples = {100.0 * pe_fwd / total:.1f}%\n")
    print(f"fresh buffers: inside Storage::Storage (aligned_alloc + memset zero fill, incl. page faults) "
          f"{100.0 * alloc / total:.1f}%; in the kernel (page faults, mm) {100.0 * kern_mode / total:.1f}%\n")
    table("autograd op (forward / backward)", op)
    table("kernel (kernels/ops.h entry)", kern, 15)
    table("leaf (who runs the instruction)", leaf, 12)
    table("relpos-code leaf function", leaf_sym, 10)


if __name__ == "__main__":
    main()
