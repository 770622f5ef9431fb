//! Snapshot tests of printed programs and one test per verifier check.

mod rejections;
mod snapshots;
