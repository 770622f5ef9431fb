//! The host overhead of a cached small pipeline, phase by phase, on the CPU.
//!
//! ```text
//! cargo run --release --example host_overhead -- [CALLS]
//! ```
//!
//! The chain of the throughput suite (`tanh(a·b + c)·sigmoid(a) − exp(−b²)`)
//! on 4096-element f32 tensors is recorded and realized `CALLS` times
//! (default 20000) after a warm-up, and the medians per call are printed:
//! recording the expression, the realize phases that do not depend on the
//! device (collect, fuse: the plan-cache lookup, write back), the kernels
//! themselves (launch: on the CPU they run inside realize), and dropping the
//! output. `host` is the sum of record, collect, fuse, write back and drop:
//! the part of a call that runs the same code on every device.

#[path = "../benches/common/suite.rs"]
mod suite;

use std::time::Instant;
use tilefuse::Result;

fn main() -> Result<()> {
    let calls: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let p = suite::small_chain();
    let inputs = p.host_inputs(3);
    for _ in 0..1000 {
        p.build(&inputs).realize()?;
    }
    let names = [
        "record",
        "collect",
        "fuse",
        "launch",
        "write back",
        "drop",
        "host",
        "total",
    ];
    let mut samples: [Vec<f64>; 8] = Default::default();
    for _ in 0..calls {
        let t0 = Instant::now();
        let y = p.build(&inputs);
        let t1 = Instant::now();
        let stats = y.realize_with_stats()?;
        let t2 = Instant::now();
        drop(y);
        let t3 = Instant::now();
        assert!(stats.plan_cache_hit, "a repeated call finds its plan in the cache");
        let record = (t1 - t0).as_secs_f64();
        let drop_time = (t3 - t2).as_secs_f64();
        let collect = stats.collect_time.as_secs_f64();
        let fuse = stats.fuse_time.as_secs_f64();
        let write_back = stats.write_back_time.as_secs_f64();
        let host = record + collect + fuse + write_back + drop_time;
        for (v, x) in samples.iter_mut().zip([
            record,
            collect,
            fuse,
            stats.launch_time.as_secs_f64(),
            write_back,
            drop_time,
            host,
            (t3 - t0).as_secs_f64(),
        ]) {
            v.push(x);
        }
    }
    let parts: Vec<String> = names
        .iter()
        .zip(samples)
        .map(|(n, v)| format!("{n} {:.2}", suite::median(v) * 1e6))
        .collect();
    println!("{calls} calls, medians in µs: {}", parts.join(", "));
    Ok(())
}
