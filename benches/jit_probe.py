#!/usr/bin/env python3
"""Times the CUDA driver's JIT of PTX files, the cost that dominates the
first call of a new pipeline, the way the library compiles: through the
driver's linker (`cuLinkCreate`, `cuLinkAddData`, `cuLinkComplete`), then
`cuModuleLoadData` of the cubin; quick modules at JIT level 1, tuned ones
at the driver's default, as the library loads them.

    python3 benches/jit_probe.py DIR [--reps N]

DIR is what `cargo run --release --example throughput -- --ptx DIR` writes:
each kernel's tuned module in DIR, and its quick module (when it has one)
under DIR/quick with the same name. For every kernel it prints the median
host time of

- the first module alone (the quick one, or the tuned one when there is no
  quick tier): what a first call waits for;
- the same module while the tuned one compiles on another thread, as the
  library does it (both start together); for a kernel without a quick
  module the library compiles nothing beside it, and this column is
  left out;
- the tuned module alone.

Runs alternate between the alone and the beside form, so drift of the
machine reaches both. The driver's JIT cache is disabled. Only the driver
library is needed (ctypes); no PyTorch.
"""
import ctypes
import glob
import os
import statistics
import sys
import threading
import time

os.environ["CUDA_CACHE_DISABLE"] = "1"

from cuda_driver import check, open_device0  # noqa: E402

CU_JIT_INPUT_PTX = 1
CU_JIT_OPTIMIZATION_LEVEL = 7
QUICK_LEVEL = 1


def main():
    args = sys.argv[1:]
    reps = 7
    if "--reps" in args:
        i = args.index("--reps")
        try:
            reps = int(args[i + 1])
        except (IndexError, ValueError):
            raise SystemExit("--reps takes a positive number")
        if reps < 1:
            raise SystemExit("--reps takes a positive number")
        del args[i : i + 2]
    if len(args) != 1:
        raise SystemExit(__doc__)
    root = args[0]
    cu = open_device0()
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    cu.cuLinkCreate_v2.argtypes = [ctypes.c_uint, vp, vp, vp]
    cu.cuLinkAddData_v2.argtypes = [vp, ctypes.c_int, vp, sz, ctypes.c_char_p, ctypes.c_uint, vp, vp]
    cu.cuLinkComplete.argtypes = [vp, vp, vp]
    cu.cuLinkDestroy.argtypes = [vp]
    cu.cuModuleLoadData.argtypes = [vp, vp]
    cu.cuModuleUnload.argtypes = [vp]
    ctx = ctypes.c_void_p()
    check(cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")

    def link(image, level=None):
        """Compiles and loads `image` at JIT level `level` (None: the
        driver's default), unloads it; returns the host time in ms."""
        state = ctypes.c_void_p()
        if level is None:
            n, opts, vals = 0, None, None
        else:
            n = 1
            opts = (ctypes.c_int * 1)(CU_JIT_OPTIMIZATION_LEVEL)
            vals = (ctypes.c_void_p * 1)(level)
        t = time.perf_counter()
        check(cu.cuLinkCreate_v2(n, opts, vals, ctypes.byref(state)), "cuLinkCreate")
        check(
            cu.cuLinkAddData_v2(state, CU_JIT_INPUT_PTX, image, len(image), b"probe", 0, None, None),
            "cuLinkAddData",
        )
        cubin = ctypes.c_void_p()
        size = ctypes.c_size_t()
        check(cu.cuLinkComplete(state, ctypes.byref(cubin), ctypes.byref(size)), "cuLinkComplete")
        mod = ctypes.c_void_p()
        check(cu.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
        took = time.perf_counter() - t
        check(cu.cuLinkDestroy(state), "cuLinkDestroy")
        check(cu.cuModuleUnload(mod), "cuModuleUnload")
        return took * 1e3

    def beside(first, tuned):
        """`first` (a quick module) on this thread while `tuned` compiles on
        another; a failure on either thread ends the probe."""
        go = threading.Barrier(2, timeout=60)
        failure = []

        def other():
            try:
                check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
                go.wait()
                link(tuned)
            except BaseException as e:  # SystemExit from `check` included
                failure.append(e)
                go.abort()

        t = threading.Thread(target=other)
        t.start()
        try:
            go.wait()
            took = link(first, QUICK_LEVEL)
        except threading.BrokenBarrierError:
            took = None
        finally:
            t.join()
        if failure or took is None:
            raise SystemExit(f"the tuned module's link failed: {failure[0] if failure else 'no start'}")
        return took

    files = sorted(glob.glob(os.path.join(root, "*.ptx")))
    if not files:
        raise SystemExit(f"no .ptx files in {root}")
    # The first JIT of a process also starts the driver's compiler.
    first_image = open(files[0], "rb").read() + b"\0"
    print(f"first JIT of the process: {link(first_image):.1f} ms, again {link(first_image):.1f} ms")
    print(f"{'kernel':<40} {'first':>6} {'alone ms':>9} {'beside ms':>10} {'tuned ms':>9}")
    for f in files:
        tuned = open(f, "rb").read() + b"\0"
        quick_path = os.path.join(root, "quick", os.path.basename(f))
        has_quick = os.path.exists(quick_path)
        alone, by = [], []
        if has_quick:
            first = open(quick_path, "rb").read() + b"\0"
            for _ in range(reps):
                alone.append(link(first, QUICK_LEVEL))
                by.append(beside(first, tuned))
        tuned_ms = [link(tuned) for _ in range(reps if not has_quick else 3)]
        if not has_quick:
            alone = tuned_ms
        by_text = f"{statistics.median(by):>10.1f}" if by else f"{'-':>10}"
        print(
            f"{os.path.basename(f)[:-4]:<40} {'quick' if has_quick else 'tuned':>6} "
            f"{statistics.median(alone):>9.1f} {by_text} {statistics.median(tuned_ms):>9.1f}"
        )


if __name__ == "__main__":
    main()
