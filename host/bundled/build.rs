//! Builds the first-party tools in `guest-tools/` and embeds them, when the
//! `bundled-tools` feature is on (see `build/guests.rs`).

use std::fmt::Write;

include!("build/guests.rs");

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let mut code = String::from("/// The bundled tools: (package name, component bytes).\n");
    code.push_str("pub static BUNDLED: &[(&str, &[u8])] = &[\n");
    if std::env::var_os("CARGO_FEATURE_BUNDLED_TOOLS").is_some() {
        let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
        let workspace = manifest_dir
            .ancestors()
            .nth(2)
            .expect("host/bundled/ sits in the workspace")
            .to_path_buf();
        let crates = guest_crates(&workspace.join("guest-tools"));
        for guest in build_guests(&workspace, &crates) {
            writeln!(
                code,
                "    ({:?}, include_bytes!({:?})),",
                guest.package, guest.wasm
            )
            .unwrap();
        }
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("bundled.rs"), code).expect("cannot write bundled.rs");
    println!("cargo:rerun-if-changed=build/guests.rs");
}
