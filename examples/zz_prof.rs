use tilefuse::Tensor;
fn main() {
    let n = 1 << 24;
    let a = Tensor::from_vec((0..n).map(|i| (i % 977) as f32 * 0.01).collect::<Vec<_>>(), &[n]);
    let b = Tensor::from_vec((0..n).map(|i| (i % 619) as f32 * 0.02).collect::<Vec<_>>(), &[n]);
    a.realize().unwrap(); b.realize().unwrap();
    println!("{}", { let d = &a - &b; (&d * &d).mean_all().explain().unwrap().lines().take(40).collect::<Vec<_>>().join("\n") });
    let t = std::time::Instant::now();
    for _ in 0..100 { let d = &a - &b; let m = (&d * &d).mean_all(); m.realize().unwrap(); }
    println!("per call {:.3} ms", t.elapsed().as_secs_f64() * 10.0);
}
