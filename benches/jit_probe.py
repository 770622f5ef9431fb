#!/usr/bin/env python3
"""Times the CUDA driver's JIT of PTX files, the cost that dominates the
first call of a new pipeline.

    python3 benches/jit_probe.py DIR [DIR...]

For every `*.ptx` under the directories (e.g. written by
`cargo run --release --example throughput -- --ptx DIR`) it loads the module
with `cuModuleLoadDataEx` at JIT optimization levels 4 (the default), 1 and
0, three times each with the driver's JIT cache disabled, and prints the
median host time. With `ptxas` on the PATH it
also times loading the same kernel as a cubin, which costs no JIT.

Only the driver library is needed (ctypes); no PyTorch.
"""
import ctypes
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from cuda_driver import check, open_device0

os.environ["CUDA_CACHE_DISABLE"] = "1"

CU_JIT_OPTIMIZATION_LEVEL = 7


def main():
    cu = open_device0()

    def load(image, level):
        mod = ctypes.c_void_p()
        if level is None:
            t = time.perf_counter()
            check(cu.cuModuleLoadData(ctypes.byref(mod), image), "cuModuleLoadData")
            host = time.perf_counter() - t
        else:
            opts = (ctypes.c_int * 1)(CU_JIT_OPTIMIZATION_LEVEL)
            vals = (ctypes.c_void_p * 1)(level)
            t = time.perf_counter()
            check(cu.cuModuleLoadDataEx(ctypes.byref(mod), image, 1, opts, vals), "cuModuleLoadDataEx")
            host = time.perf_counter() - t
        check(cu.cuModuleUnload(mod), "cuModuleUnload")
        return host * 1e3

    files = sorted(f for d in sys.argv[1:] for f in glob.glob(os.path.join(d, "*.ptx")))
    if not files:
        raise SystemExit("no .ptx files under " + " ".join(sys.argv[1:]))
    # The first JIT of a process also starts the driver's compiler; time it
    # on its own, then the same module again.
    first = open(files[0], "rb").read() + b"\0"
    cold = load(first, 4)
    print(f"first JIT in this process ({os.path.relpath(files[0])}): {cold:.1f} ms, "
          f"the same module again: {load(first, 4):.1f} ms")
    ptxas = shutil.which("ptxas")
    print(f"{'module':<55} {'lines':>6} {'O4 ms':>7} {'O1 ms':>7} {'O0 ms':>7} {'cubin ms':>9}")
    for f in files:
        text = open(f, "rb").read()
        image = text + b"\0"
        row = []
        for level in (4, 1, 0):
            row.append(statistics.median(load(image, level) for _ in range(3)))
        cubin_ms = float("nan")
        if ptxas:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "k.cubin")
                subprocess.run([ptxas, "-arch=sm_90", f, "-o", out], check=True)
                blob = open(out, "rb").read()
                cubin_ms = statistics.median(load(blob, None) for _ in range(3))
        name = os.path.relpath(f)
        lines = text.count(b"\n")
        print(f"{name:<55} {lines:>6} {row[0]:>7.1f} {row[1]:>7.1f} {row[2]:>7.1f} {cubin_ms:>9.2f}")


if __name__ == "__main__":
    main()
