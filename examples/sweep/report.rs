//! The sweep's output: the case list, the table, the summary and the JSON.

use super::json::json_string;
use super::sweep_cases::{Case, Class, Scale};
use super::{median, Args, Row};
use std::collections::BTreeMap;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// `--list`: every case, then how many of each class and dtype.
pub fn print_list(cases: &[Case], scale: Scale) {
    println!(
        "{} cases at {:.0}–{:.0} MiB of minimal bytes",
        cases.len(),
        mib(scale.min_bytes),
        mib(scale.max_bytes)
    );
    for c in cases {
        println!(
            "{}  {:<17} {:<4} {:>8.1} MiB  {}",
            c.id(),
            c.class.name(),
            c.dtype,
            mib(c.bytes()),
            c.describe()
        );
    }
    let classes: Vec<String> = Class::every()
        .map(|k| format!("{} {}", k.name(), cases.iter().filter(|c| c.class == k).count()))
        .collect();
    println!("classes: {}", classes.join(", "));
    let mut dtypes = BTreeMap::new();
    for c in cases {
        *dtypes.entry(c.dtype.name()).or_insert(0) += 1;
    }
    let dtypes: Vec<String> = dtypes.iter().map(|(d, n)| format!("{d} {n}")).collect();
    println!("dtypes: {}", dtypes.join(", "));
}

/// The lines above the table.
pub fn header(device: &str, copy_gbps: f64) -> String {
    let settings: Vec<String> = tilefuse::config::active()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let settings = if settings.is_empty() {
        "none set (the defaults)".to_string()
    } else {
        settings.join(" ")
    };
    format!(
        "settings: {settings}\n\ntilefuse sweep on {device}; copy bandwidth {copy_gbps:.0} GB/s (r + w)\n\n\
         | case | class | dtype | expression | MiB | time (ms) | GB/s | % of copy | kernels | first call (ms) | result |\n\
         | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |v| format!("{v:.digits$}"))
}

/// The table line of one case.
pub fn line(r: &Row, copy_gbps: f64) -> String {
    let mut result = match (&r.m.error, r.m.rel_error) {
        (Some(e), _) => format!("FAILED: {e}"),
        (None, e) => format!("ok (error {})", e.map_or("—".into(), |e| format!("{e:.1e}"))),
    };
    if let (Some(t), Some(c)) = (r.m.measured_time, &r.m.choices) {
        let gain = r.m.time.map_or(f64::NAN, |d| d.as_secs_f64() / t.as_secs_f64());
        result.push_str(&format!(
            "; measured: {c}, {:.4} ms ({gain:.2}×)",
            t.as_secs_f64() * 1e3
        ));
    }
    format!(
        "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
        r.case.id(),
        r.case.class.name(),
        r.case.dtype,
        r.case.describe(),
        mib(r.case.bytes()),
        opt(r.m.time.map(|t| t.as_secs_f64() * 1e3), 4),
        opt(r.gbps(), 1),
        opt(r.gbps().map(|g| 100.0 * g / copy_gbps), 1),
        r.m.kernels.map_or("—".into(), |k| k.to_string()),
        opt(r.m.first_call.map(|t| t.as_secs_f64() * 1e3), 1),
        result
    )
}

/// The `q`-quantile of ascending `sorted` (the element at `q` of the way
/// from the first to the last, rounded down).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

/// The distribution of % of copy over the passed cases, per class, and the
/// failures.
pub fn summary(rows: &[Row], copy_gbps: f64) -> String {
    let pct = |r: &Row| r.gbps().map(|g| 100.0 * g / copy_gbps);
    let passed: Vec<&Row> = rows.iter().filter(|r| r.ok() && pct(r).is_some()).collect();
    let failed: Vec<&Row> = rows.iter().filter(|r| !r.ok()).collect();
    let mut out = vec![format!(
        "summary: {} cases, {} passed and timed, {} failed",
        rows.len(),
        passed.len(),
        failed.len()
    )];
    if let Some(slowest) = passed.iter().min_by(|a, b| pct(a).unwrap().total_cmp(&pct(b).unwrap())) {
        let mut all: Vec<f64> = passed.iter().filter_map(|r| pct(r)).collect();
        all.sort_by(f64::total_cmp);
        out.push(format!(
            "% of copy: median {:.1}, 10th percentile {:.1}, min {:.1} ({}, {})",
            median(all.clone()),
            quantile(&all, 0.1),
            all[0],
            slowest.case.id(),
            slowest.case.describe()
        ));
    }
    let mut classes = vec![];
    for class in Class::every() {
        let v: Vec<f64> = passed
            .iter()
            .filter(|r| r.case.class == class)
            .filter_map(|r| pct(r))
            .collect();
        let failures = failed.iter().filter(|r| r.case.class == class).count();
        if !v.is_empty() || failures > 0 {
            let m = if v.is_empty() {
                "—".into()
            } else {
                format!("{:.1}", median(v.clone()))
            };
            classes.push(format!("{} {m} ({} passed, {failures} failed)", class.name(), v.len()));
        }
    }
    out.push(format!("median % of copy per class: {}", classes.join("; ")));
    let gains: Vec<f64> = passed
        .iter()
        .filter_map(|r| Some(r.m.time?.as_secs_f64() / r.m.measured_time?.as_secs_f64()))
        .collect();
    if !gains.is_empty() {
        let geomean = (gains.iter().map(|g| g.ln()).sum::<f64>() / gains.len() as f64).exp();
        let faster = gains.iter().filter(|&&g| g > 1.03).count();
        let slower = gains.iter().filter(|&&g| g < 1.0 / 1.03).count();
        out.push(format!(
            "measured choices: {} cases, default time over measured: geometric mean {geomean:.3}, \
             max {:.2}, min {:.2}; {faster} faster and {slower} slower by more than 3 %",
            gains.len(),
            gains.iter().cloned().fold(f64::MIN, f64::max),
            gains.iter().cloned().fold(f64::MAX, f64::min),
        ));
    }
    for r in failed {
        out.push(format!(
            "failed {} ({}, {}): {}",
            r.case.id(),
            r.case.class.name(),
            r.case.describe(),
            r.m.error.as_deref().unwrap_or("")
        ));
    }
    out.join("\n")
}

fn num(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("null".into(), |v| format!("{v:.6}"))
}

/// The `--json` document (schema in the example's docs).
pub fn json(device: &str, copy_gbps: f64, args: &Args, reps: usize, scale: Scale, rows: &[Row]) -> String {
    let ms = |d: Option<std::time::Duration>| num(d.map(|d| d.as_secs_f64() * 1e3));
    let cases: Vec<String> = rows
        .iter()
        .map(|r| {
            let c = &r.case;
            format!(
                "    {{\"case\": {}, \"class\": {}, \"description\": {}, \"spec\": {}, \"bytes\": {}, \
                 \"time_ms\": {}, \"gbps\": {}, \"pct_copy\": {}, \"kernels\": {}, \"first_call_ms\": {}, \
                 \"strategy\": {}, \"rel_error\": {}, \"ok\": {}, \"error\": {}, \"measured_ms\": {}, \
                 \"choices\": {}}}",
                json_string(&c.id()),
                json_string(c.class.name()),
                json_string(&c.describe()),
                c.spec_json(),
                c.bytes(),
                ms(r.m.time),
                num(r.gbps()),
                num(r.gbps().map(|g| 100.0 * g / copy_gbps)),
                r.m.kernels.map_or("null".into(), |k| k.to_string()),
                ms(r.m.first_call),
                r.m.strategy.as_deref().map_or("null".into(), json_string),
                r.m.rel_error.map_or("null".into(), |e| format!("{e:e}")),
                r.ok(),
                r.m.error.as_deref().map_or("null".into(), json_string),
                ms(r.m.measured_time),
                r.m.choices.as_deref().map_or("null".into(), json_string),
            )
        })
        .collect();
    let settings: Vec<String> = tilefuse::config::active()
        .iter()
        .map(|(k, v)| format!("{}: {}", json_string(k), json_string(v)))
        .collect();
    format!(
        "{{\n  \"copy_gbps\": {copy_gbps:.3},\n  \"device\": {},\n  \"seed\": {},\n  \"start\": {},\n  \"reps\": {reps},\n  \
         \"scale\": {{\"min_bytes\": {}, \"max_bytes\": {}}},\n  \"settings\": {{{}}},\n  \"cases\": [\n{}\n  ]\n}}\n",
        json_string(device),
        args.seed,
        args.start,
        scale.min_bytes,
        scale.max_bytes,
        settings.join(", "),
        cases.join(",\n")
    )
}
