//! Prints the CUDA device tilefuse would use, or why there is none.

#[cfg(feature = "cuda")]
fn main() {
    match tilefuse::device::cuda::probe() {
        Ok(info) => println!("{info}"),
        Err(e) => println!("{e}"),
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    println!("built without the `cuda` feature");
}
