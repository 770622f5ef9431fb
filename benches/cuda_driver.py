"""The CUDA driver through ctypes, for the measurement scripts in benches/:
the library with device 0's primary context current, and a result check."""
import ctypes


def check(r, what):
    """Exits with the driver call's name and result when `r` is not success."""
    if r != 0:
        raise SystemExit(f"{what} failed with CUresult {r}")


def open_device0():
    """`libcuda.so.1`, initialised, with device 0's primary context current on this thread."""
    cu = ctypes.CDLL("libcuda.so.1")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return cu
