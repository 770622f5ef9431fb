//! Reading or copying a tensor that no longer fits in host memory is an
//! error, not an abort: with the process's data limit (`RLIMIT_DATA`) set
//! just above what it uses, `to_vec` of a 64 MiB tensor, and realizations
//! that need a buffer of its size, return [`Error::HostOutOfMemory`], and
//! everything works again once the limit is back.
//!
//! The tests are alone in their own binary and take turns (`ONE_AT_A_TIME`),
//! since the limit holds for every thread of the process. The GPU one
//! downloads a device tensor under the limit; like every GPU test it is
//! ignored unless run with `--include-ignored` on a machine with a GPU.

#![cfg(target_os = "linux")]

use std::sync::{Mutex, PoisonError};
use tilefuse::{DType, Error, Tensor};

/// Held by each test for its whole run, so that one's limit never meets
/// the other's allocations.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `struct rlimit` of Linux on 64-bit targets.
#[repr(C)]
#[derive(Clone, Copy)]
struct RLimit {
    cur: u64,
    max: u64,
}

/// `RLIMIT_DATA`: the private writable memory of the process, where
/// `malloc` and `mmap` allocations count.
const RLIMIT_DATA: i32 = 2;

extern "C" {
    fn getrlimit(resource: i32, rlim: *mut RLimit) -> i32;
    fn setrlimit(resource: i32, rlim: *const RLimit) -> i32;
}

/// Sets the soft data limit, returning the previous limits.
fn set_data_limit(cur: u64) -> RLimit {
    let mut old = RLimit { cur: 0, max: 0 };
    // SAFETY: `old` is a valid `struct rlimit` to write.
    assert_eq!(unsafe { getrlimit(RLIMIT_DATA, &mut old) }, 0);
    let new = RLimit {
        cur: cur.min(old.max),
        max: old.max,
    };
    // SAFETY: `new` is a valid `struct rlimit`; lowering the soft limit is
    // always allowed.
    assert_eq!(unsafe { setrlimit(RLIMIT_DATA, &new) }, 0);
    old
}

/// Puts the previous data limit back when dropped, even if the test fails.
struct Restore(RLimit);

impl Drop for Restore {
    fn drop(&mut self) {
        // SAFETY: a valid `struct rlimit`; the soft limit goes back up to at
        // most the unchanged hard limit.
        unsafe { setrlimit(RLIMIT_DATA, &self.0) };
    }
}

/// The process's private writable memory in bytes (`VmData`).
fn data_in_use() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmData:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// Checks that `r` is a host out-of-memory error of `op` for the 64 MiB
/// tensor.
fn check_out_of_memory<T: std::fmt::Debug>(r: tilefuse::Result<T>, op: &str) {
    match r {
        Err(Error::HostOutOfMemory {
            op: got,
            bytes,
            shape,
            dtype,
        }) => {
            assert_eq!(
                (got, bytes, shape.as_slice(), dtype),
                (op, 64 << 20, &[1 << 24][..], DType::F32)
            );
        }
        other => panic!("expected HostOutOfMemory from {op}, got {other:?}"),
    }
}

#[test]
fn reads_and_copies_that_do_not_fit_in_host_memory_are_errors() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    // Start the thread pool and warm the executor before the limit.
    assert!(rayon::current_num_threads() >= 1);
    let small = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    assert_eq!((&small + 1.0f32).to_vec::<f32>().unwrap(), [2.0, 3.0, 4.0]);
    let x = Tensor::from_vec(vec![1.5f32; 1 << 24], &[1 << 24]);
    let y = x.exp();
    let flat = x.reshape([1 << 12, 1 << 12]);
    {
        let _restore = Restore(set_data_limit(data_in_use() + (16 << 20)));
        check_out_of_memory(x.to_vec::<f32>(), "to_vec");
        check_out_of_memory(y.realize(), "realize");
        let e = flat.realize().unwrap_err();
        assert!(matches!(e, Error::HostOutOfMemory { op: "realize", .. }), "{e:?}");
        // Small work still runs under the limit.
        assert_eq!((&small * 2.0f32).to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    }
    let v = x.to_vec::<f32>().unwrap();
    assert!(v.len() == 1 << 24 && v.iter().all(|&e| e == 1.5));
    drop(v);
    let e = y.narrow(0, 7, 2).to_vec::<f32>().unwrap();
    assert_eq!(e, [1.5f32.exp(); 2]);
    assert_eq!(flat.dims(), &[1 << 12, 1 << 12]);
    flat.realize().unwrap();
}

#[test]
#[cfg(feature = "cuda")]
#[ignore = "needs a CUDA GPU"]
fn a_download_that_does_not_fit_in_host_memory_is_an_error() {
    use tilefuse::Device;
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let gpu = Device::Cuda(0);
    // Open the device, load the kernels and make the staging buffers first.
    let small = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).to(gpu);
    assert_eq!((&small + 1.0f32).to_vec::<f32>().unwrap(), [2.0, 3.0, 4.0]);
    let y = Tensor::full(&[1 << 24], 1.5f32).to(gpu).exp();
    y.realize().unwrap();
    let z = (&y + 1.0f32).sum_all();
    z.realize().unwrap();
    {
        let _restore = Restore(set_data_limit(data_in_use() + (16 << 20)));
        // The device result stays; its download does not fit.
        check_out_of_memory(y.to_vec::<f32>(), "to_vec");
        let e = y.with_bytes(|b| b.len()).unwrap_err();
        assert!(matches!(e, Error::HostOutOfMemory { op: "with_bytes", .. }), "{e:?}");
    }
    // The next read downloads it.
    let v = y.to_vec::<f32>().unwrap();
    assert!(v.len() == 1 << 24 && v.iter().all(|&e| (e - 1.5f32.exp()).abs() <= 1e-5));
    let want = (1.5f64.exp() + 1.0) * (1 << 24) as f64;
    let got = z.to_scalar::<f32>().unwrap() as f64;
    assert!((got - want).abs() <= 1e-4 * want, "{got} against {want}");
}
