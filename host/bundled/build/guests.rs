// Builds guest crates to `wasm32-wasip2` from a build script: the pattern of
// wasmtime's test-programs artifacts. Shared by `host/build.rs` (the bundled
// first-party tools) and `tests/build.rs` (the test guests) through
// `include!`, so both build into one nested target directory.
//
// The nested `cargo` runs with its own target directory (the outer cargo
// holds the lock on the normal one), the guest profile from the workspace
// manifest, and the outer build's flags removed; every source file listed in
// the artifacts' dep-info is reported with `rerun-if-changed`.
//
// The components are byte-for-byte reproducible: the same on any checkout
// path (rustc is given workspace paths relative to the workspace root), for
// any user and whether or not the toolchain has its `rust-src` component
// (the paths of sources that panic locations embed are rewritten:
// `reproducible_flags`; `just build-guests` passes the same flags), and
// never built incrementally (`CARGO_INCREMENTAL` from the outer build is
// removed: an incremental build's bytes depend on its history), so the
// digests recorded in `host/bundled/bundled-descriptors.json` match the build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A guest crate built to a component.
pub struct Guest {
    /// The package name, e.g. `airlock-tool-read`.
    pub package: String,
    /// The built component.
    pub wasm: PathBuf,
}

/// The guest crates under `dir`: every subdirectory with a `Cargo.toml`.
pub fn guest_crates(dir: &Path) -> Vec<PathBuf> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Builds `crates` (in the workspace at `workspace`) with the `guest` profile.
pub fn build_guests(workspace: &Path, crates: &[PathBuf]) -> Vec<Guest> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    ensure_wasm_target(&rustc);
    let target_dir = nested_target_dir();
    let packages: Vec<String> = crates.iter().map(|dir| package_name(dir)).collect();

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--profile", "guest", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("RUSTC", &rustc)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_INCREMENTAL")
        .env_remove("CARGO_PRIMARY_PACKAGE");
    let flags = reproducible_flags(&rustc);
    if !flags.is_empty() {
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    }
    for package in &packages {
        cmd.args(["--package", package]);
    }
    let started = std::time::Instant::now();
    let output = cmd.output().expect("failed to run cargo for the guest crates");
    if !output.status.success() {
        panic!(
            "building the guest crates failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // Cargo shows a build script's output only when it has ended (or
    // failed), so the nested build cannot be followed as it runs; when it
    // took long enough to be a build rather than a check, say what it was.
    let took = started.elapsed();
    if took.as_secs() >= 10 {
        let compiled = String::from_utf8_lossy(&output.stderr)
            .lines()
            .filter(|l| l.trim_start().starts_with("Compiling "))
            .count();
        println!(
            "cargo:warning=built {} guest components to wasm32-wasip2 in {} s ({compiled} crates \
             compiled, in {}); later builds reuse them",
            packages.len(),
            took.as_secs(),
            target_dir.display()
        );
    }

    let artifacts = target_dir.join("wasm32-wasip2").join("guest");
    let mut guests = Vec::new();
    for package in packages {
        let stem = package.replace('-', "_");
        let wasm = artifacts.join(format!("{stem}.wasm"));
        assert!(wasm.is_file(), "{} was not built", wasm.display());
        rerun_if_sources_change(&artifacts.join(format!("{stem}.d")), workspace);
        guests.push(Guest { package, wasm });
    }
    println!("cargo:rerun-if-changed={}", workspace.join("Cargo.lock").display());
    println!("cargo:rerun-if-changed={}", workspace.join("Cargo.toml").display());
    guests
}

/// The guests' flags (`just build-guests` passes the same, in the same
/// order). They replace `.cargo/config.toml`'s for the target, so they
/// repeat its one:
/// - wasm SIMD (`simd128`), which memchr and the regex engine's literal
///   search use (without it, `grep` searched a byte at a time);
///
/// and keep the machine out of the components' bytes:
/// - the cargo home, in the paths of dependencies' sources, becomes
///   `/cargo`;
/// - the standard library's sources, which rustc names by their place in
///   the toolchain when the `rust-src` component is installed (and by
///   `/rustc/<commit>` when it is not), are `/rustc/<commit>` either way.
fn reproducible_flags(rustc: &str) -> Vec<String> {
    let mut flags = vec!["-Ctarget-feature=+simd128".to_string()];
    if let Some(home) = cargo_home() {
        flags.push(format!("--remap-path-prefix={}=/cargo", home.display()));
    }
    let printed = |args: &[&str]| {
        Command::new(rustc)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let sysroot = printed(&["--print", "sysroot"]).map(|s| s.trim().to_string());
    let commit = printed(&["-vV"]).and_then(|v| {
        v.lines()
            .find_map(|line| line.strip_prefix("commit-hash: "))
            .map(|hash| hash.trim().to_string())
    });
    if let (Some(sysroot), Some(commit)) = (sysroot, commit) {
        flags.push(format!(
            "--remap-path-prefix={sysroot}/lib/rustlib/src/rust=/rustc/{commit}"
        ));
    }
    flags
}

/// Where cargo keeps downloaded sources: `$CARGO_HOME`, else `~/.cargo`
/// (cargo's own rule).
fn cargo_home() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=CARGO_HOME");
    std::env::var_os("CARGO_HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
}

fn ensure_wasm_target(rustc: &str) {
    let libdir = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", "wasm32-wasip2"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if !libdir.is_some_and(|dir| dir.is_dir()) {
        panic!(
            "\n\nThe wasm32-wasip2 target is not installed, and Airlock's tools are built for it.\n\
             Install it with:\n\n    rustup target add wasm32-wasip2\n\n"
        );
    }
}

/// `<outer target dir>/guests`: found as the ancestor of `OUT_DIR` that holds
/// cargo's `CACHEDIR.TAG`, so every build script shares one nested build.
fn nested_target_dir() -> PathBuf {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(|target| target.join("guests"))
        .unwrap_or_else(|| out_dir.join("guests"))
}

fn package_name(dir: &Path) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("cannot read {}/Cargo.toml: {e}", dir.display()));
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[package]")
        .find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == "name").then(|| value.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("{}/Cargo.toml has no package name", dir.display()))
}

fn rerun_if_sources_change(dep_info: &Path, workspace: &Path) {
    let Ok(text) = std::fs::read_to_string(dep_info) else {
        return;
    };
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        for dep in deps.split_whitespace() {
            if Path::new(dep).starts_with(workspace) {
                println!("cargo:rerun-if-changed={dep}");
            }
        }
    }
}
