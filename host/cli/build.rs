//! Records what `airlock --version` says of this build: the commit and its
//! date (from git, when the source is a checkout; "unknown" otherwise) and
//! the wasmtime version the workspace's lock file pins.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
    };
    let commit = git(&["log", "-1", "--format=%h, %cs"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=AIRLOCK_BUILD_COMMIT={commit}");
    // Run again when HEAD moves (files that are not there are left out:
    // cargo would take a missing one as changed on every build).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
        let head = git(&["symbolic-ref", "-q", "HEAD"]);
        for file in [Some("HEAD".to_string()), head, Some("packed-refs".into())]
            .into_iter()
            .flatten()
        {
            let path = dir.join(file);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let lock_file = root.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_file.display());
    let lock = std::fs::read_to_string(&lock_file).unwrap_or_default();
    let wasmtime = lock
        .split("[[package]]")
        .find(|package| package.contains("\nname = \"wasmtime\"\n"))
        .and_then(|package| {
            package
                .lines()
                .find_map(|line| line.strip_prefix("version = \""))
                .map(|v| v.trim_end_matches('"').to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=AIRLOCK_BUILD_WASMTIME={wasmtime}");
}
