//! The linker, and the import allowlist in front of it.
//!
//! One [`Linker`] serves every tool: WASI's cli, clocks, filesystem, io and
//! random interfaces, `wasi:http`, `wasi:sockets`, `airlock:tool/host`, and
//! `airlock:tool/programs` (which runs nothing for a tool not granted
//! programs).
//! What a tool can reach through them is decided per call by the store's
//! context (no preopens, no env, no network unless granted). `wasi:sockets`
//! is linked deny-all: toolchains link it into every component
//! (componentize-py does), and then every socket (so every bind, connect
//! and send) fails `access-denied` and every name lookup
//! `permanent-resolver-failure`, whatever the grants. Before a component is
//! instantiated, [`check_imports`] compares its imports against the
//! allowlist, so a component importing anything else fails at load with a
//! message naming the import; imports that need a grant (`wasi:http`) are
//! reported so the registry can check the grant (a tool that asks for no
//! hosts gets none, and every request it makes is refused), and deny-all
//! ones so `airlock list` can say so.

use super::bindings::ToolComponent;
use super::bindings::programs_client::ProgramsClient;
use super::budget::Budgeted;
use super::state::HostState;
use airlock_core::error::LoadError;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};

/// What an allowed import needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Needs {
    /// Nothing: the capability, if any, comes from the call's context.
    Nothing,
    /// A network grant.
    Network,
    /// Nothing it can use: linked deny-all (`wasi:sockets`).
    Denied,
}

/// Interfaces a tool may import: (namespace:package, interfaces, needs).
pub(crate) const ALLOWED: &[(&str, &[&str], Needs)] = &[
    (
        "airlock:tool",
        &["host", "types", "programs"],
        Needs::Nothing,
    ),
    ("wasi:io", &["error", "poll", "streams"], Needs::Nothing),
    (
        "wasi:clocks",
        &["wall-clock", "monotonic-clock"],
        Needs::Nothing,
    ),
    (
        "wasi:random",
        &["random", "insecure", "insecure-seed"],
        Needs::Nothing,
    ),
    (
        "wasi:cli",
        &[
            "environment",
            "exit",
            "stdin",
            "stdout",
            "stderr",
            "terminal-input",
            "terminal-output",
            "terminal-stdin",
            "terminal-stdout",
            "terminal-stderr",
        ],
        Needs::Nothing,
    ),
    ("wasi:filesystem", &["types", "preopens"], Needs::Nothing),
    ("wasi:http", &["types", "outgoing-handler"], Needs::Network),
    (
        "wasi:sockets",
        &[
            "network",
            "instance-network",
            "tcp",
            "tcp-create-socket",
            "udp",
            "udp-create-socket",
            "ip-name-lookup",
        ],
        Needs::Denied,
    ),
];

/// Builds the linker every tool is instantiated against.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<HostState>> {
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sockets};
    let mut l = Linker::<HostState>::new(engine);
    wasmtime_wasi_io::add_to_linker_async(&mut l)?;
    clocks::wall_clock::add_to_linker::<_, WasiClocks>(&mut l, HostState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<_, WasiClocks>(&mut l, HostState::clocks)?;
    filesystem::types::add_to_linker::<_, Budgeted>(&mut l, HostState::budgeted_fs)?;
    filesystem::preopens::add_to_linker::<_, WasiFilesystem>(&mut l, HostState::filesystem)?;
    random::random::add_to_linker::<_, WasiRandom>(&mut l, HostState::random)?;
    random::insecure::add_to_linker::<_, WasiRandom>(&mut l, HostState::random)?;
    random::insecure_seed::add_to_linker::<_, WasiRandom>(&mut l, HostState::random)?;
    cli::exit::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::environment::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::stdin::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::stdout::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::stderr::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_input::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_output::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_stdin::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_stdout::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_stderr::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    // Deny-all: each store's sockets context allows no TCP, UDP or name
    // lookup and no address (`run::new_store`).
    sockets::network::add_to_linker::<_, WasiSockets>(
        &mut l,
        &Default::default(),
        HostState::sockets,
    )?;
    sockets::instance_network::add_to_linker::<_, WasiSockets>(&mut l, HostState::sockets)?;
    sockets::tcp::add_to_linker::<_, WasiSockets>(&mut l, HostState::sockets)?;
    sockets::tcp_create_socket::add_to_linker::<_, WasiSockets>(&mut l, HostState::sockets)?;
    sockets::udp::add_to_linker::<_, WasiSockets>(&mut l, HostState::sockets)?;
    sockets::udp_create_socket::add_to_linker::<_, WasiSockets>(&mut l, HostState::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<_, WasiSockets>(&mut l, HostState::sockets)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut l)?;
    ToolComponent::add_to_linker::<_, HasSelf<_>>(&mut l, |s| s)?;
    ProgramsClient::add_to_linker::<_, HasSelf<_>>(&mut l, |s| s)?;
    Ok(l)
}

/// Checks every import of `component` against the allowlist. Returns the
/// imports with what each needs; fails on the first import not allowed.
pub(crate) fn check_imports(
    component: &Component,
    engine: &wasmtime::Engine,
) -> Result<Vec<(String, Needs)>, LoadError> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| classify_import(name).map(|needs| (name.to_string(), needs)))
        .collect()
}

pub(crate) fn classify_import(name: &str) -> Result<Needs, LoadError> {
    let forbidden = |reason: &str| LoadError::ForbiddenImport {
        import: name.to_string(),
        reason: reason.to_string(),
    };
    let (path, version) = name.split_once('@').unwrap_or((name, ""));
    let Some((package, interface)) = path.split_once('/') else {
        return Err(forbidden(
            "a tool may import interfaces only, not loose functions",
        ));
    };
    let Some((_, interfaces, needs)) = ALLOWED.iter().find(|(p, _, _)| *p == package) else {
        return Err(forbidden(
            "it is not an interface Airlock provides to tools",
        ));
    };
    if !interfaces.contains(&interface) {
        return Err(forbidden(
            "it is not an interface Airlock provides to tools",
        ));
    }
    let expected = if package == "airlock:tool" {
        "0.1."
    } else {
        "0.2."
    };
    if package.starts_with("wasi:") && version.starts_with("0.3.") {
        return Err(forbidden(
            "it is WASI 0.3, which Airlock does not link yet (wasmtime 48's WASI 0.3 \
             support is experimental and incomplete); build the tool for WASI 0.2: \
             Rust `--target wasm32-wasip2`, and componentize-py and jco componentize by \
             default",
        ));
    }
    if !version.starts_with(expected) {
        return Err(forbidden(&format!(
            "Airlock provides version {expected}x of this package"
        )));
    }
    Ok(*needs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_what_airlock_provides() {
        assert_eq!(
            classify_import("wasi:io/streams@0.2.6").unwrap(),
            Needs::Nothing
        );
        assert_eq!(
            classify_import("wasi:filesystem/preopens@0.2.12").unwrap(),
            Needs::Nothing
        );
        assert_eq!(
            classify_import("airlock:tool/host@0.1.0").unwrap(),
            Needs::Nothing
        );
        assert_eq!(
            classify_import("wasi:http/outgoing-handler@0.2.6").unwrap(),
            Needs::Network
        );
        for socket in ["tcp", "udp-create-socket", "ip-name-lookup", "network"] {
            assert_eq!(
                classify_import(&format!("wasi:sockets/{socket}@0.2.9")).unwrap(),
                Needs::Denied
            );
        }
    }

    #[test]
    fn refuses_everything_else_by_name() {
        for (import, needle) in [
            ("wasi:sockets/tcp@0.3.0", "build the tool for WASI 0.2"),
            ("wasi:sockets/raw@0.2.6", "not an interface"),
            ("wasix:posix/proc@0.1.0", "not an interface"),
            ("my:host/admin@1.0.0", "not an interface"),
            ("wasi:filesystem/secrets@0.2.0", "not an interface"),
            ("wasi:cli/environment@0.3.0-rc-2026-01-06", "it is WASI 0.3"),
            ("wasi:io/streams@0.4.0", "version 0.2.x"),
            ("airlock:tool/host@0.2.0", "version 0.1.x"),
            ("do-evil", "loose functions"),
        ] {
            let err = classify_import(import).unwrap_err().to_string();
            assert!(err.contains(import), "{err}");
            assert!(err.contains(needle), "{import}: {err}");
        }
    }
}
