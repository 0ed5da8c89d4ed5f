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
    // Run again when HEAD moves: HEAD, the branch it names and the packed
    // refs, where git keeps each (a worktree's HEAD is its own, its refs
    // the main checkout's). Files that are not there are left out: cargo
    // would take a missing one as changed on every build.
    let head = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in [Some("HEAD".to_string()), head, Some("packed-refs".into())]
        .into_iter()
        .flatten()
    {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name])
            .map(PathBuf::from)
            .filter(|path| path.exists())
        {
            println!("cargo:rerun-if-changed={}", path.display());
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
