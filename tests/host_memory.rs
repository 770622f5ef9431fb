//! Host memory that runs out is an error, not an abort: a constructor, a
//! realization, a kernel's tiles or a read that the allocator refuses
//! returns [`Error::HostOutOfMemory`] naming the op, the bytes and the
//! shape, and the process goes on computing.
//!
//! The sizes are terabytes (2^40 elements), which the allocator refuses at
//! once on any machine this suite runs on, so nothing is ever touched.

use tilefuse::{DType, Error, Tensor};

/// Elements of a tensor no host memory holds.
const HUGE: usize = 1 << 40;

/// A small pipeline still runs, and right, after a refused allocation.
fn still_computes() {
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5], &[2, 2]);
    let y: Vec<f32> = (&x * 2.0f32 + 1.0f32).sum(&[1], false).to_vec().unwrap();
    assert_eq!(y, [0.0, 9.0]);
}

/// Checks that `r` is a host out-of-memory error of `op` for `bytes` of a
/// `dtype` buffer of `shape`.
fn check_out_of_memory<T: std::fmt::Debug>(
    r: tilefuse::Result<T>,
    op: &str,
    bytes: usize,
    shape: &[usize],
    dtype: DType,
) {
    match r {
        Err(e @ Error::HostOutOfMemory { .. }) => {
            let want = format!("{op}: out of host memory allocating {bytes} bytes (shape {shape:?}, {dtype})");
            assert_eq!(e.to_string(), want);
        }
        other => panic!("expected HostOutOfMemory from {op}, got {other:?}"),
    }
}

#[test]
fn realizing_a_tensor_larger_than_memory_is_an_error() {
    // Recording is lazy: the constant takes no memory.
    let y = Tensor::try_zeros(&[HUGE], DType::F32).unwrap().exp();
    check_out_of_memory(y.realize(), "realize", HUGE * 4, &[HUGE], DType::F32);
    check_out_of_memory(y.to_vec::<f32>(), "realize", HUGE * 4, &[HUGE], DType::F32);
    still_computes();
    // The node is unchanged: a slice of it small enough still computes.
    let head: Vec<f32> = y.narrow(0, 5, 3).to_vec().unwrap();
    assert_eq!(head, [1.0; 3]);
}

#[test]
fn generated_tensors_larger_than_memory_are_errors() {
    check_out_of_memory(
        Tensor::try_randn(&[HUGE], DType::F32, 7),
        "randn",
        HUGE * 4,
        &[HUGE],
        DType::F32,
    );
    // `rand` is generated where it is read: storing it is what fails.
    check_out_of_memory(
        Tensor::rand(&[1 << 20, 1 << 20], DType::BF16, 7).realize(),
        "realize",
        HUGE * 2,
        &[1 << 20, 1 << 20],
        DType::BF16,
    );
    check_out_of_memory(
        Tensor::try_arange(0.0f64, 1e12, 1.0),
        "arange",
        8_000_000_000_000,
        &[1_000_000_000_000],
        DType::F64,
    );
    still_computes();
    assert_eq!(Tensor::arange(0i64, 3, 1).to_vec::<i64>().unwrap(), [0, 1, 2]);
}

#[test]
fn a_kernel_whose_tiles_do_not_fit_is_an_error() {
    use tilefuse::kernels::cpu::execute;
    use tilefuse::kernels::ir::Builder;
    use tilefuse::Scalar;
    // A hand-written program with a 2^40-element constant tile: the frame
    // that would hold it cannot be allocated.
    let mut b = Builder::new("huge_tile", &[1]);
    b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[1 << 20, 1 << 20]);
    let program = b.finish().unwrap();
    check_out_of_memory(execute(&program, &mut []), "execute", HUGE * 4, &[HUGE], DType::F32);
    still_computes();
}

#[test]
fn host_buffers_larger_than_memory_are_errors() {
    use tilefuse::storage::HostBuffer;
    let r = HostBuffer::try_zeros(DType::I64, HUGE);
    check_out_of_memory(r, "HostBuffer::try_zeros", HUGE * 8, &[HUGE], DType::I64);
    assert_eq!(HostBuffer::try_zeros(DType::I64, 3).unwrap().to_vec::<i64>(), [0, 0, 0]);
}
