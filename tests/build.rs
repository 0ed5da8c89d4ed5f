//! Builds the test guests in `tests/guests/` (see `host/build/guests.rs`)
//! and writes their paths as constants for the tests.

use std::fmt::Write;

include!("../host/bundled/build/guests.rs");

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf();
    let crates = guest_crates(&manifest_dir.join("guests"));
    let mut code = String::new();
    for guest in build_guests(&workspace, &crates) {
        let name = guest
            .package
            .trim_start_matches("airlock-test-")
            .replace('-', "_")
            .to_uppercase();
        writeln!(code, "/// The `{}` test guest.", guest.package).unwrap();
        writeln!(code, "pub const {name}: &str = {:?};", guest.wasm).unwrap();
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    std::fs::write(out_dir.join("guests.rs"), code).expect("cannot write guests.rs");
    println!("cargo:rerun-if-changed=../host/bundled/build/guests.rs");
}
