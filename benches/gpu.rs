//! GPU throughput of the suite's pipelines (BENCHMARKS.md, "GPU pipelines")
//! as criterion benches, so regressions show in the usual reports.
//!
//! Each iteration records the pipeline's expression over inputs already on
//! the device, realizes it and waits for the device: the figure is the
//! device time plus the host's cost of one call (the result is dropped
//! outside the timed region). Throughput is the
//! pipeline's minimal bytes, so criterion reports GB/s. Before timing, each
//! pipeline's result is checked against the CPU executor on the same inputs.
//! For event-timed medians as a share of the copy bandwidth, run the
//! `throughput` example instead.
//!
//! Without a usable CUDA device the benches print why and do nothing.
//!
//! Run with `cargo bench --bench gpu`; add `-- --quick` for a short check.

#[path = "common/suite.rs"]
mod suite;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use suite::{relative_error, tolerance, values};
use tilefuse::device::cuda::CudaCompiler;
use tilefuse::{Device, Tensor};

fn gpu_pipelines(c: &mut Criterion) {
    let device = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("benches/gpu: skipped, no CUDA device: {e}");
            return;
        }
    };
    let compiler = CudaCompiler::open(0).expect("an open device");
    for p in suite::gpu_suite() {
        let host = p.host_inputs(1);
        let inputs: Vec<Tensor> = host.iter().map(|t| t.to(device)).collect();
        Tensor::realize_all(&inputs.iter().collect::<Vec<_>>()).expect("uploading the inputs");
        // The first call compiles the quick tier; benchmark (and check) the
        // tuned kernels.
        p.build(&inputs).realize().expect("the first call");
        compiler.finish_compiles();
        let got = p.build(&inputs);
        let want = p.build(&host);
        let err = relative_error(
            &values(&got).expect("the GPU result"),
            &values(&want).expect("the CPU result"),
        );
        assert!(
            err <= tolerance(p.dtype),
            "{}: the GPU result differs from the CPU executor's by {err:.3e}",
            p.id
        );
        drop((got, want));
        let mut g = c.benchmark_group(p.id);
        g.sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Bytes(p.bytes()));
        g.bench_function(p.shape_text(), |b| {
            b.iter_with_large_drop(|| {
                let y = p.build(&inputs);
                assert!(!y.is_realized(), "the benchmarked expression was already computed");
                y.realize().expect("realizing the pipeline");
                compiler.device().synchronize().expect("waiting for the device");
                y
            })
        });
        g.finish();
    }
}

criterion_group!(benches, gpu_pipelines);
criterion_main!(benches);
