//! The sweep's cases on a GPU: checked against the CPU executor, timed
//! with CUDA events while the stream pool is held (the method of the
//! throughput report, `benches/common/gpu_measure.rs`).

use super::sweep_cases::reference;
use super::sweep_cases::Case;
use super::{check, check_shapes, fresh, gpu_measure, host_tensors, median, realize, record_plan, Failure, Measured};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilefuse::device::cuda::CudaCompiler;
use tilefuse::{Device, Result, Tensor};

/// Bytes of the copy that measures the bandwidth.
const COPY_BYTES: usize = 1 << 30;
/// Untimed calls before the timed ones.
const WARMUP: usize = 3;

/// An opened GPU.
pub struct Gpu {
    compiler: Arc<CudaCompiler>,
    device: Device,
}

impl Gpu {
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let compiler = CudaCompiler::open(ordinal)?;
        let l2 = compiler.device().info().l2_bytes as u64;
        let floor = super::sweep_cases::Scale::GPU.min_bytes;
        if 4 * l2 > floor {
            println!(
                "note: 4× this GPU's L2 ({} MiB) is more than the sweep's {} MiB floor",
                (4 * l2) >> 20,
                floor >> 20
            );
        }
        Ok(Gpu {
            compiler,
            device: Device::Cuda(ordinal),
        })
    }

    pub fn name(&self) -> String {
        self.compiler.device().info().to_string()
    }

    /// Device-to-device copy bandwidth, GB/s (r + w), of [`COPY_BYTES`].
    pub fn copy_gbps(&self) -> Result<f64> {
        self.compiler.device().copy_bandwidth(COPY_BYTES)
    }

    /// Runs, checks and times `case`, filling `m` as it goes.
    /// With `choose`, the kernels' codegen candidates are then measured
    /// ([`Tensor::measure_choices`]), and the case checked and timed again
    /// under what was chosen.
    pub fn measure(
        &self,
        case: &Case,
        reps: usize,
        choose: bool,
        m: &mut Measured,
    ) -> std::result::Result<(), Failure> {
        let dev = self.compiler.device();
        let host = host_tensors(case, reference::host_inputs(case));
        let inputs: Vec<Tensor> = host.iter().map(|t| t.to(self.device)).collect();
        realize(&inputs)?;
        dev.synchronize()?;
        let output_bytes: Vec<usize> = case
            .output_shapes()
            .iter()
            .zip(case.output_dtypes())
            .map(|(s, d)| s.iter().product::<usize>() * d.size_in_bytes())
            .collect();
        gpu_measure::poison(dev, &output_bytes)?;

        // The first call: nothing of this case is cached yet.
        let started = Instant::now();
        let outputs = fresh(case, &inputs)?;
        realize(&outputs)?;
        dev.synchronize()?;
        m.first_call = Some(started.elapsed());
        check_shapes(case, &outputs)?;

        // The CPU executor on the same (host) inputs.
        let want = fresh(case, &host)?;
        realize(&want)?;
        let want = want.iter().map(reference::values).collect::<Result<Vec<_>>>()?;
        drop(host);
        let quick = check(case, &outputs, &want, "CPU executor")?;
        drop(outputs);
        self.compiler.finish_compiles();
        gpu_measure::poison(dev, &output_bytes)?;
        record_plan(case, &inputs, m)?;
        let outputs = fresh(case, &inputs)?;
        let launches = gpu_measure::launches(|| realize(&outputs))?;
        let tuned = check(case, &outputs, &want, "CPU executor (tuned kernels)")?;
        m.rel_error = Some(quick.max(tuned));
        drop(outputs);

        let timed = |m: &mut Option<Duration>| -> std::result::Result<(), Failure> {
            for _ in 0..WARMUP {
                realize(&fresh(case, &inputs)?)?;
            }
            dev.synchronize()?;
            let samples =
                gpu_measure::timed_calls(dev, reps, launches, |_| realize(&fresh(case, &inputs)?).map(|_| ()))?;
            *m = Some(Duration::from_secs_f64(median(samples)));
            Ok(())
        };
        timed(&mut m.time)?;
        if choose {
            let outputs = fresh(case, &inputs)?;
            let choices = Tensor::measure_choices(&outputs.iter().collect::<Vec<_>>())?;
            let labels: Vec<&str> = choices.iter().map(|c| c.chosen).collect();
            m.choices = Some(labels.join(", "));
            realize(&outputs)?;
            check(case, &outputs, &want, "CPU executor (measured choices)")?;
            drop(outputs);
            timed(&mut m.measured_time)?;
        }
        Ok(())
    }
}
