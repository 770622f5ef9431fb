//! Snapshot tests of printed programs and one test per verifier check.

mod last_point;
mod rejections;
mod snapshots;
