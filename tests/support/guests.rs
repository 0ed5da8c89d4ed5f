//! Test guests from `tests/guests/` for the host's own tests, which do not
//! depend on the `airlock-tests` crate (whose build script builds them):
//! one is built on first use by the same nested build the build scripts
//! run (`cargo build --profile guest --target wasm32-wasip2` into
//! `<target>/guests`), so a guest already built there is only checked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The component of the test guest `package` (e.g. `airlock-test-logger`),
/// built if it is not yet. Panics saying why when it cannot be built.
pub fn test_guest(package: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(wasm) = built.get_or_insert_default().get(package) {
        return wasm.clone();
    }
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory holds tmp/")
        .join("guests");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .expect("the package sits in the workspace");
    let out = Command::new(env!("CARGO"))
        .current_dir(workspace)
        .args(["build", "--profile", "guest", "--target", "wasm32-wasip2"])
        .args(["--package", package])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {package}: {e}"));
    assert!(
        out.status.success(),
        "building the test guest {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = target
        .join("wasm32-wasip2/guest")
        .join(format!("{}.wasm", package.replace('-', "_")));
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    built
        .get_or_insert_default()
        .insert(package.to_owned(), wasm.clone());
    wasm
}
