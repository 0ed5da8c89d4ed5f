//! The search benches' corpus: the Rust standard library's sources
//! (`rustup component add rust-src`), or the directory in
//! `AIRLOCK_BENCH_CORPUS`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The corpus directory, if there is one.
pub fn corpus() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AIRLOCK_BENCH_CORPUS") {
        return Some(PathBuf::from(dir));
    }
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(sysroot.stdout).ok()?;
    let library = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library");
    library.is_dir().then_some(library)
}
