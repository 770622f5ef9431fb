#!/usr/bin/env python3
"""Per-block timelines of two row kernels on one GPU: how long each block
lives, how many blocks an SM holds over time, and how long a freed slot
stays empty before the next block starts.

    python3 benches/block_timeline.py OURS.ptx [MORE.ptx ...] [--reps N] [--pad-shared BYTES] [--random]

OURS.ptx is tilefuse's rmsnorm kernel for x [16384, 4096] f32 (written by
`cargo run --release --example throughput -- --ptx DIR`, with tuning
variables for variants), 512 threads a block. The others are
torch.compile's for the same rmsnorm, every configuration its autotuning
compiled, taken from Inductor's cache after compiling it in this process
(PyTorch and a GPU needed). `--pad-shared BYTES` adds, for each of those, a
copy that also holds BYTES of static shared memory (one word written).
The input and weights hold 1.0 everywhere, or normal random values with
`--random` (drawn by PyTorch and copied in).

Both PTX texts get the same instrumentation: a `%clock64` read at entry,
and at exit a barrier, then thread 0 writes the block's start and end
clocks and its SM to a buffer passed as one more parameter. Both are
launched through the driver (ctypes) on the same buffers, timed with CUDA
events, and the last launch's timeline is summarised per kernel.
"""
import argparse
import ctypes
import glob
import json
import os
import re
import statistics
import sys
import tempfile

from cuda_driver import check, open_device0

ROWS, COLS = 16384, 4096
RECORD = 32  # bytes per block: start, end (clock64), SM


def instrument(ptx: str) -> str:
    """The kernel of `ptx` with a timeline record written per block."""
    head = re.search(r"\.entry\s+\w+\s*\(", ptx)
    if not head:
        raise SystemExit("no .entry in the PTX")
    close = ptx.index(")", head.end())
    params = ptx[head.end():close]
    ptx = ptx[:close] + (",\n" if params.strip() else "") + "\t.param .u64 tf_ts_param\n" + ptx[close:]
    body = ptx.index("{", close)
    start = (
        "\n\t.reg .b64 %tsd<6>;\n\t.reg .b32 %tsw<4>;\n\t.reg .pred %tsp;\n"
        "\tmov.u64 %tsd1, %clock64;\n"
    )
    ptx = ptx[: body + 1] + start + ptx[body + 1 :]
    count = 0

    def end(_match):
        nonlocal count
        count += 1
        label = f"$TS_END_{count}"
        return (
            "\tbar.sync 0;\n"
            "\tmov.u32 %tsw1, %tid.x;\n"
            "\tsetp.ne.u32 %tsp, %tsw1, 0;\n"
            f"\t@%tsp bra {label};\n"
            "\tmov.u64 %tsd2, %clock64;\n"
            "\tmov.u32 %tsw2, %smid;\n"
            "\tmov.u32 %tsw3, %ctaid.x;\n"
            "\tld.param.u64 %tsd3, [tf_ts_param];\n"
            "\tcvta.to.global.u64 %tsd3, %tsd3;\n"
            f"\tmul.wide.u32 %tsd4, %tsw3, {RECORD};\n"
            "\tadd.u64 %tsd5, %tsd3, %tsd4;\n"
            "\tst.global.u64 [%tsd5], %tsd1;\n"
            "\tst.global.u64 [%tsd5+8], %tsd2;\n"
            "\tst.global.u32 [%tsd5+16], %tsw2;\n"
            f"{label}:\n"
            "\tret;"
        )

    ptx = re.sub(r"^\s*ret;", end, ptx, flags=re.M)
    if count == 0:
        raise SystemExit("no ret; in the PTX")
    return ptx


def pad_shared(ptx: str, nbytes: int) -> str:
    """`ptx` with `nbytes` more static shared memory, kept by one store."""
    body = ptx.index("{", re.search(r"\.entry\s+\w+\s*\(", ptx).end())
    pad = (
        f"\n\t.shared .align 16 .b8 tf_pad[{nbytes}];\n\t.reg .b32 %padw;\n"
        "\tmov.u32 %padw, tf_pad;\n\tst.shared.u32 [%padw], 0;\n"
    )
    return ptx[: body + 1] + pad + ptx[body + 1 :]


def triton_rmsnorm():
    """torch.compile's rmsnorm kernels for the suite's shape, every
    configuration its autotuning compiled: [(label, ptx, shared bytes)]."""
    cache = tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    import torch

    x = torch.randn(ROWS, COLS, device="cuda")
    w = torch.randn(COLS, device="cuda")
    f = torch.compile(lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w)
    f(x, w)
    torch.cuda.synchronize()
    chosen = [
        json.load(open(b)).get("triton_cache_hash")
        for b in glob.glob(os.path.join(cache, "**", "*.best_config"), recursive=True)
    ]
    kernels = []
    for path in sorted(glob.glob(os.path.join(cache, "**", "*.ptx"), recursive=True)):
        if "rsqrt" not in path:
            continue
        ptx = open(path).read()
        meta_path = path[: -len(".ptx")] + ".json"
        meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
        folder = os.path.basename(os.path.dirname(path))
        label = f"torch.compile {folder[:6]}{' (chosen)' if folder in chosen else ''}"
        kernels.append((label, ptx, meta.get("shared", 0)))
    if not kernels:
        raise SystemExit("no Triton rmsnorm PTX in " + cache)
    return kernels


class Driver:
    def __init__(self, stream=False):
        self.cu = cu = open_device0()
        # Launches and events on the legacy default stream, or on a created
        # non-blocking stream (as tilefuse's pool makes them).
        self.stream = ctypes.c_void_p()
        if stream:
            check(cu.cuStreamCreate(ctypes.byref(self.stream), 1), "cuStreamCreate")
        cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        cu.cuMemsetD32_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t]
        cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        cu.cuEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]

    def alloc(self, nbytes, word=0):
        p = ctypes.c_uint64()
        check(self.cu.cuMemAlloc_v2(ctypes.byref(p), nbytes), "cuMemAlloc")
        check(self.cu.cuMemsetD32_v2(p.value, word, nbytes // 4), "cuMemsetD32")
        return p.value

    def function(self, ptx):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        check(self.cu.cuModuleLoadData(ctypes.byref(mod), ptx.encode() + b"\0"), "cuModuleLoadData")
        name = re.search(r"\.entry\s+(\w+)", ptx).group(1)
        check(self.cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
        return fn

    def launch(self, fn, args, shared):
        holders = [ctypes.c_uint64(a) if kind == "u64" else ctypes.c_uint32(a) for kind, a in args]
        ptrs = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
        check(self.cu.cuLaunchKernel(fn, ROWS, 1, 1, 512, 1, 1, shared, self.stream, ptrs, None), "cuLaunchKernel")

    def timed(self, fn, args, shared, launches=1):
        """µs per launch of `launches` queued back to back between two events."""
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        check(self.cu.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        check(self.cu.cuEventCreate(ctypes.byref(end), 0), "cuEventCreate")
        check(self.cu.cuEventRecord(start, self.stream), "cuEventRecord")
        for _ in range(launches):
            self.launch(fn, args, shared)
        check(self.cu.cuEventRecord(end, self.stream), "cuEventRecord")
        check(self.cu.cuEventSynchronize(end), "cuEventSynchronize")
        ms = ctypes.c_float()
        check(self.cu.cuEventElapsedTime(ctypes.byref(ms), start, end), "cuEventElapsedTime")
        return ms.value * 1e3 / launches

    def timed_each(self, fn, args, shared, launches=20):
        """Median µs of `launches` queued back to back, each between its own
        two events (as the throughput report and `compare_torch.py` time)."""
        events = []
        for _ in range(2 * launches):
            e = ctypes.c_void_p()
            check(self.cu.cuEventCreate(ctypes.byref(e), 0), "cuEventCreate")
            events.append(e)
        for k in range(launches):
            check(self.cu.cuEventRecord(events[2 * k], self.stream), "cuEventRecord")
            self.launch(fn, args, shared)
            check(self.cu.cuEventRecord(events[2 * k + 1], self.stream), "cuEventRecord")
        check(self.cu.cuEventSynchronize(events[-1]), "cuEventSynchronize")
        times = []
        for k in range(launches):
            ms = ctypes.c_float()
            check(self.cu.cuEventElapsedTime(ctypes.byref(ms), events[2 * k], events[2 * k + 1]), "cuEventElapsedTime")
            times.append(ms.value * 1e3)
        for e in events:
            check(self.cu.cuEventDestroy_v2(e), "cuEventDestroy")
        return statistics.median(times)


PRELUDE_PTX = """
.version 7.8
.target sm_90
.address_size 64
.extern .shared .align 16 .b8 prelude_smem[];
.visible .entry prelude(.param .u64 unused)
.maxntid 512, 1, 1
{
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    st.shared.u32 [prelude_smem + 0], %r1;
    ret;
}
"""


PIN_PTX = """
.version 7.8
.target sm_90
.address_size 64
.visible .entry pin(.param .u64 x, .param .u64 out)
.maxntid 512, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<10>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mul.wide.u32 %rd3, %r2, 16384;
    mul.wide.u32 %rd4, %r1, 16;
    add.s64 %rd5, %rd3, %rd4;
    add.s64 %rd6, %rd1, %rd5;
    createpolicy.fractional.L2::evict_last.b64 %rd7, 1.0;
    ld.global.L2::cache_hint.v4.f32 {%f1, %f2, %f3, %f4}, [%rd6], %rd7;
    ld.global.L2::cache_hint.v4.f32 {%f5, %f6, %f7, %f8}, [%rd6 + 8192], %rd7;
    add.f32 %f9, %f1, %f5;
    setp.eq.f32 %p1, %f9, 0f7F7FFFFF;
    @%p1 st.global.f32 [%rd2], %f9;
    ret;
}
"""


def run_pin(drv, x, out):
    """Reads every row of `x` once with an L2 evict_last policy, as
    torch.compile's rmsnorm reads its input, and waits."""
    fn = drv.function(PIN_PTX)
    holders = [ctypes.c_uint64(x), ctypes.c_uint64(out)]
    ptrs = (ctypes.c_void_p * 2)(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    check(drv.cu.cuLaunchKernel(fn, ROWS, 1, 1, 512, 1, 1, 0, drv.stream, ptrs, None), "cuLaunchKernel")
    check(drv.cu.cuCtxSynchronize(), "cuCtxSynchronize")


def run_prelude(drv, kib):
    """Launches a do-nothing kernel with `kib` KiB of dynamic shared memory a
    block over 16384 blocks of 512 threads, and waits for it."""
    fn = drv.function(PRELUDE_PTX)
    nbytes = max(kib * 1024, 16)
    if nbytes > 48 * 1024:
        check(drv.cu.cuFuncSetAttribute(fn, 8, nbytes), "cuFuncSetAttribute")
    holder = ctypes.c_uint64(0)
    ptrs = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(holder), ctypes.c_void_p))
    check(drv.cu.cuLaunchKernel(fn, ROWS, 1, 1, 512, 1, 1, nbytes, drv.stream, ptrs, None), "cuLaunchKernel")
    check(drv.cu.cuCtxSynchronize(), "cuCtxSynchronize")


def summarise(name, raw, us):
    blocks = []
    for b in range(ROWS):
        s, e, sm = (int.from_bytes(raw[b * RECORD + o : b * RECORD + o + n], "little") for o, n in ((0, 8), (8, 8), (16, 4)))
        blocks.append((sm, s, e))
    per_sm = {}
    for sm, s, e in blocks:
        per_sm.setdefault(sm, []).append((s, e))
    durations, refills, concurrency, spans = [], [], [], []
    for sm, bs in per_sm.items():
        first = min(s for s, _ in bs)
        last = max(e for _, e in bs)
        spans.append(last - first)
        concurrency.append(sum(e - s for s, e in bs) / (last - first))
        durations.extend(e - s for s, e in bs)
        starts = sorted(s for s, _ in bs)
        ends = sorted(e for _, e in bs)
        # Each block after an SM's first wave takes the slot of the k-th
        # block to end: the refill delay is its start minus that end.
        wave = sum(1 for s in starts if s <= ends[0])
        for k, s in enumerate(starts[wave:]):
            refills.append(s - ends[k])
    q = lambda v, f: sorted(v)[int(f * (len(v) - 1))]
    print(
        f"{name}: {us:.1f} µs; {len(per_sm)} SMs, {len(blocks) / len(per_sm):.1f} blocks each; "
        f"block life median {statistics.median(durations):.0f} cycles (p10 {q(durations, 0.1)}, p90 {q(durations, 0.9)}); "
        f"blocks alive per SM on average {statistics.mean(concurrency):.3f}; "
        f"slot refill median {statistics.median(refills):.0f} cycles (p10 {q(refills, 0.1)}, p90 {q(refills, 0.9)}, "
        f"mean {statistics.mean(refills):.0f}); SM span median {statistics.median(spans):.0f} cycles"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", nargs="+", help="tilefuse's rmsnorm PTX, one or more variants")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--pad-shared", type=int, default=0, metavar="BYTES")
    ap.add_argument("--random", action="store_true", help="normal random input and weights instead of ones")
    ap.add_argument(
        "--setup",
        choices=[
            "torch-init", "torch-tensor", "torch-alloc", "torch-eager", "compile-add", "triton-jit",
            "cache-shared", "cache-l1", "cache-equal",
        ],
        help="before timing: initialise PyTorch's CUDA state, or set the context's cache configuration",
    )
    ap.add_argument("--save-triton", metavar="JSON", help="write torch.compile's kernels (label, PTX, shared bytes) to JSON")
    ap.add_argument("--triton-from", metavar="JSON", help="time the kernels saved by --save-triton instead of compiling them")
    ap.add_argument("--carveout", type=int, metavar="PCT", help="preferred shared-memory carveout of every kernel timed")
    ap.add_argument("--prelude", type=int, metavar="KIB", help="first run a do-nothing kernel with KIB KiB of shared memory a block")
    ap.add_argument(
        "--pin", choices=["input", "other"],
        help="first read the input (or another buffer of its size) once with an L2 evict_last policy",
    )
    ap.add_argument("--no-torch", action="store_true", help="time only the given PTX, without importing PyTorch")
    ap.add_argument("--stream", action="store_true", help="launch on a created non-blocking stream")
    ap.add_argument("--gap", type=int, default=0, metavar="MIB", help="MiB allocated between the input and the output")
    args = ap.parse_args()
    if args.setup == "torch-init":
        import torch

        torch.cuda.init()
    elif args.setup == "torch-tensor":
        import torch

        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    elif args.setup in ("torch-alloc", "torch-eager"):
        import torch

        kept = [torch.randn(ROWS, COLS, device="cuda"), torch.randn(COLS, device="cuda")]
        if args.setup == "torch-eager":
            x_, w_ = kept
            kept.append(x_ * torch.rsqrt((x_ * x_).mean(-1, keepdim=True) + 1e-6) * w_)
        torch.cuda.synchronize()
    if args.setup == "compile-add":
        import torch

        a = torch.randn(1 << 20, device="cuda")
        torch.compile(lambda a: a + 1)(a)
        torch.cuda.synchronize()
    elif args.setup == "triton-jit":
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def add_one(p, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(p + i, tl.load(p + i, mask=i < n) + 1, mask=i < n)

        a = torch.zeros(1 << 20, device="cuda")
        add_one[(a.numel() // 1024,)](a, a.numel(), BLOCK=1024)
        torch.cuda.synchronize()
    if args.triton_from:
        tritons = [tuple(k) for k in json.load(open(args.triton_from))]
    else:
        tritons = [] if args.no_torch else triton_rmsnorm()
    if args.save_triton:
        json.dump(tritons, open(args.save_triton, "w"))
    drv = Driver(args.stream)
    cache = {"cache-shared": 1, "cache-l1": 2, "cache-equal": 3}.get(args.setup)
    if cache is not None:
        check(drv.cu.cuCtxSetCacheConfig(cache), "cuCtxSetCacheConfig")
    x = drv.alloc(ROWS * COLS * 4, 0x3F800000)
    w = drv.alloc(COLS * 4, 0x3F800000)
    # The fills run on the legacy stream, which a created stream
    # (`--stream`) does not wait for.
    check(drv.cu.cuCtxSynchronize(), "cuCtxSynchronize")
    if args.gap:
        drv.alloc(args.gap << 20)
    if args.random:
        import torch

        drv.cu.cuMemcpyDtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
        for dst, n in ((x, ROWS * COLS), (w, COLS)):
            src = torch.randn(n, device="cuda")
            torch.cuda.synchronize()
            check(drv.cu.cuMemcpyDtoD_v2(dst, src.data_ptr(), n * 4), "cuMemcpyDtoD")
            check(drv.cu.cuCtxSynchronize(), "cuCtxSynchronize")
    out = drv.alloc(ROWS * COLS * 4)
    print(f"input at {x:#x}, weights at {w:#x}, output at {out:#x}", file=sys.stderr)
    ts = drv.alloc(ROWS * RECORD)
    check(drv.cu.cuCtxSynchronize(), "cuCtxSynchronize")
    # name -> (ptx, arguments without the timeline buffer, shared bytes)
    specs = {}
    for path in args.ours:
        specs[f"tilefuse {path}"] = (open(path).read(), [("u64", x), ("u64", w), ("u64", out)], 0)
    if args.pad_shared:
        tritons += [(label + f" +{args.pad_shared} B shared", pad_shared(ptx, args.pad_shared), shared) for label, ptx, shared in tritons]
    for label, ptx, shared in tritons:
        params = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ptx, re.S).group(1)
        kinds = ["u32" if ".u32" in p or ".s32" in p else "u64" for p in params.split(",")]
        values = [x, w, out, ROWS, COLS] + [0] * (len(kinds) - 5)
        specs[label] = (ptx, list(zip(kinds, values)), shared)
    plain = {k: (drv.function(p), a, sh) for k, (p, a, sh) in specs.items()}
    if args.prelude is not None:
        run_prelude(drv, args.prelude)
    if args.pin:
        run_pin(drv, x if args.pin == "input" else drv.alloc(ROWS * COLS * 4), out)
    if args.carveout is not None:
        # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, on every kernel timed.
        for fn, _, _ in plain.values():
            check(drv.cu.cuFuncSetAttribute(fn, 9, args.carveout), "cuFuncSetAttribute")
    traced = {k: (drv.function(instrument(p)), a + [("u64", ts)], sh) for k, (p, a, sh) in specs.items()}
    if args.carveout is not None:
        for fn, _, _ in traced.values():
            check(drv.cu.cuFuncSetAttribute(fn, 9, args.carveout), "cuFuncSetAttribute")
    alone = {k: [] for k in specs}
    batched = {k: [] for k in specs}
    each = {k: [] for k in specs}
    for _ in range(args.reps):
        for k in specs:
            alone[k].append(drv.timed(*plain[k]))
            batched[k].append(drv.timed(*plain[k], launches=20))
            each[k].append(drv.timed_each(*plain[k]))
    for k in specs:
        print(
            f"{k}: {statistics.median(alone[k]):.1f} µs alone, "
            f"{statistics.median(batched[k]):.1f} µs each of 20 back to back, "
            f"{statistics.median(each[k]):.1f} µs median of 20 back to back timed one by one"
        )
    for k, (fn, a, shared) in traced.items():
        us = drv.timed(fn, a, shared)
        raw = (ctypes.c_char * (ROWS * RECORD))()
        check(drv.cu.cuMemcpyDtoH_v2(raw, ts, ROWS * RECORD), "cuMemcpyDtoH")
        summarise(k + " (instrumented)", bytes(raw), us)


if __name__ == "__main__":
    sys.exit(main())
