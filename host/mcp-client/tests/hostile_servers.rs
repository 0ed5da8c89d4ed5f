//! Hostile external MCP servers (`hostile_server.py`, JSON-RPC by hand)
//! that try to exhaust the host's memory while it mounts them: endless
//! `tools/list` pages, too many tools, too many bytes of tools, schemas
//! too large or too deep, a line that never ends. Each is refused while it is read, and the server
//! is a load failure naming the bound it ran past; for the page flood and
//! the endless line, the host's peak RSS stays bounded.

use airlock_core::config::{Config, McpServerConfig};
use airlock_mcp_client::{Servers, mount};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// One test at a time: the peak RSS is the process's, so no other test
/// may allocate while one is measured.
static ALONE: Mutex<()> = Mutex::const_new(());

/// Bytes in a MiB.
const MIB: u64 = 1 << 20;

/// How far the host's peak RSS may rise while it mounts a hostile server.
const MAX_GROWTH: u64 = 200 * MIB;

/// What mounting the server in `mode` gave: how many tools, what failed,
/// how long it took and how far the peak RSS rose above the RSS before.
struct Mounted {
    tools: usize,
    failures: Vec<String>,
    took: Duration,
    growth: u64,
}

async fn mount_hostile(mode: &str) -> Mounted {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile_server.py");
    let mut config = Config::default();
    config.mcp_servers.insert(
        "hostile".into(),
        McpServerConfig {
            startup_timeout_ms: Some(10_000),
            // The test binary cannot be the sandbox helper (the `airlock`
            // binary is; host/cli/tests/mcp.rs runs servers confined).
            sandbox: false,
            ..McpServerConfig::new("python3", vec![script.into(), mode.into()])
        },
    );
    let before = reset_peak();
    let started = Instant::now();
    let (tools, failures, _servers) = mount(&config, &Servers::default()).await;
    let took = started.elapsed();
    let growth = status("VmHWM:").saturating_sub(before);
    Mounted {
        tools: tools.len(),
        failures: failures.iter().map(|(_, e)| e.to_string()).collect(),
        took,
        growth,
    }
}

/// Resets the peak RSS to the RSS now (Linux's `clear_refs`, value 5) and
/// returns it, in bytes.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("cannot reset the peak RSS");
    status("VmRSS:")
}

/// A `/proc/self/status` field given in kB, in bytes.
fn status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("no /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kb: u64 = line[field.len()..]
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    kb * 1024
}

/// Asserts the server mounted no tool and failed naming `bound`.
fn refused(mounted: &Mounted, bound: &str) {
    assert_eq!(mounted.tools, 0, "{:?}", mounted.failures);
    assert_eq!(mounted.failures.len(), 1, "{:?}", mounted.failures);
    assert!(
        mounted.failures[0].contains(bound),
        "expected {bound:?} in {:?}",
        mounted.failures[0]
    );
    assert!(
        mounted.took < Duration::from_secs(5),
        "refused only after {:?}",
        mounted.took
    );
}

#[tokio::test]
async fn endless_pages_stop_at_the_page_bound_in_bounded_memory() {
    let _alone = ALONE.lock().await;
    let mounted = mount_hostile("pages").await;
    eprintln!("pages: peak RSS grew {} MiB", mounted.growth / MIB);
    refused(&mounted, "its tools/list ran past 100 pages");
    assert!(
        mounted.growth < MAX_GROWTH,
        "the peak RSS grew {} MiB",
        mounted.growth / MIB
    );
}

#[tokio::test]
async fn a_page_of_too_many_tools_stops_at_the_tool_bound() {
    let _alone = ALONE.lock().await;
    let mounted = mount_hostile("many-tools").await;
    refused(&mounted, "its tools/list ran past 10000 tools");
}

#[tokio::test]
async fn a_listing_too_large_stops_at_the_byte_bound() {
    let _alone = ALONE.lock().await;
    let mounted = mount_hostile("big-listing").await;
    refused(
        &mounted,
        "its tools/list ran past 16777216 bytes of tools as JSON",
    );
}

#[tokio::test]
async fn schemas_too_deep_or_too_large_stop_at_the_schema_bounds() {
    let _alone = ALONE.lock().await;
    let deep = mount_hostile("deep-schema").await;
    refused(
        &deep,
        "the input schema of its tool \"deep\" nests 51 levels deep; the bound is 32",
    );
    let big = mount_hostile("big-schema").await;
    refused(&big, "the input schema of its tool \"big\" is ");
    refused(&big, " bytes of JSON; the bound is 65536");
}

#[tokio::test]
async fn a_line_without_end_stops_at_the_line_bound_in_bounded_memory() {
    let _alone = ALONE.lock().await;
    let mounted = mount_hostile("long-line").await;
    eprintln!("long-line: peak RSS grew {} MiB", mounted.growth / MIB);
    refused(
        &mounted,
        "it sent a message (one line on its stdout) of more than 17825792 bytes",
    );
    assert!(
        mounted.growth < MAX_GROWTH,
        "the peak RSS grew {} MiB",
        mounted.growth / MIB
    );
}
