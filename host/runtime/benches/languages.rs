//! Tools in each language through the full pipeline, side by side in one
//! run: the stock Python (componentize-py) and JavaScript (jco, with
//! StarlingMonkey and with QuickJS) components of `tests/stock/`, built on
//! first use by the languages' own toolchains (`tests/support/stock.rs`),
//! against the bundled Rust `sleep`.
//!
//! - `language_warm_call/*` (criterion): one call with a trivial input
//!   (`upper` of "hi"; Rust: `sleep {"ms": 0}`), the component compiled and
//!   pre-instantiated before the first sample.
//! - `language_first_compile` (a `RESULT` line): `Airlock::new` with that
//!   component alone and an empty artifact cache, which compiles it; the
//!   median of three.
//! - `language_live_calls` (a `RESULT` line): 100 calls of each at once,
//!   every one running (each has reported progress; Python and JavaScript
//!   spin until cancelled, Rust's `sleep` waits), and the process's
//!   resident memory (RSS, and PSS, which counts a page shared by several
//!   mappings once) against the same process idle.
//! - `language_components` (a `RESULT` line): where the components are,
//!   for `just bench`'s whole-process cold starts (hyperfine).
//!
//! Run with `cargo bench -p airlock-host --bench languages`.

#[path = "../../../tests/support/python.rs"]
mod python;

#[path = "../../../tests/support/node.rs"]
mod node;

#[path = "../../../tests/support/componentize_py.rs"]
mod componentize_py;

#[path = "support/live_calls.rs"]
mod live_calls;

#[path = "../../../tests/support/stock.rs"]
#[allow(
    dead_code,
    reason = "shared with the tests; the bench uses the stock components only"
)]
mod stock;

use airlock_host::{Airlock, Config, ToolContext, ToolUse};
use criterion::Criterion;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Calls kept live at once for the memory figure.
const LIVE_CALLS: usize = 100;

/// One language's tool: a name for the figures, the component (`None`:
/// the bundled `sleep`), the tool's name, its trivial input, and an input
/// that stays live until cancelled.
struct Subject {
    label: &'static str,
    component: Option<PathBuf>,
    tool: &'static str,
    trivial: Value,
    live: Value,
}

fn subjects() -> Vec<Subject> {
    let stock = |label, component: &Path, tool| Subject {
        label,
        component: Some(component.to_path_buf()),
        tool,
        trivial: json!({"mode": "upper", "text": "hi"}),
        live: json!({"mode": "hold"}),
    };
    vec![
        Subject {
            label: "rust",
            component: None,
            tool: "sleep",
            trivial: json!({"ms": 0}),
            live: json!({"ms": 60_000}),
        },
        stock("python", stock::python_tool(), "pystock"),
        stock(
            "js_starlingmonkey",
            stock::js_tool(stock::Engine::StarlingMonkey),
            "jsstock",
        ),
        stock(
            "js_quickjs",
            stock::js_tool(stock::Engine::QuickJs),
            "jsstock",
        ),
    ]
}

/// The bundled `sleep` component's bytes.
fn bundled_sleep() -> Vec<u8> {
    airlock_host::bundled::BUNDLED
        .iter()
        .find(|(name, _)| *name == "airlock-tool-sleep")
        .map(|(_, bytes)| bytes.to_vec())
        .expect("sleep is bundled")
}

/// A host with only `subject`'s tool (`None`: the bundled `sleep`), a
/// workspace, and the artifact cache at `cache`.
async fn host(subject: &Subject, workspace: &Path, cache: &Path) -> (Airlock, tempfile::TempDir) {
    let tools = tempfile::tempdir().expect("a temp dir");
    let bytes = match &subject.component {
        Some(component) => std::fs::read(component).expect("the component is readable"),
        None => bundled_sleep(),
    };
    std::fs::write(tools.path().join("tool.wasm"), bytes).expect("write the component");
    let config = Config {
        workspace: Some(workspace.to_path_buf()),
        tool_dirs: Some(vec![tools.path().to_path_buf()]),
        bundled_tools: false,
        cache_dir: Some(cache.to_path_buf()),
        ..Config::default()
    };
    let airlock = Airlock::new(config)
        .await
        .expect("the configuration is valid");
    let failures: Vec<String> = airlock
        .registry()
        .failures()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(failures.is_empty(), "{}: {failures:?}", subject.label);
    (airlock, tools)
}

/// One trivial call; panics if it fails.
async fn trivial(airlock: &Airlock, cx: &mut ToolContext, subject: &Subject) {
    let tool_use = ToolUse::new("toolu_bench", subject.tool, subject.trivial.clone());
    let result = airlock.call(cx, tool_use).await;
    assert!(!result.is_error(), "{}: {}", subject.label, result.text());
}

fn warm_calls(c: &mut Criterion, runtime: &tokio::runtime::Runtime, subjects: &[Subject]) {
    let workspace = tempfile::tempdir().expect("a temp dir");
    let cache = tempfile::tempdir().expect("a temp dir");
    let mut group = c.benchmark_group("language_warm_call");
    group.measurement_time(Duration::from_secs(10));
    for subject in subjects {
        let (airlock, _tools) = runtime.block_on(host(subject, workspace.path(), cache.path()));
        let mut cx = airlock.context();
        runtime.block_on(trivial(&airlock, &mut cx, subject));
        group.bench_function(subject.label, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        trivial(&airlock, &mut cx, subject).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

fn first_compile(runtime: &tokio::runtime::Runtime, subjects: &[Subject]) {
    let workspace = tempfile::tempdir().expect("a temp dir");
    let mut figures = serde_json::Map::new();
    for subject in subjects {
        let mut times: Vec<f64> = (0..3)
            .map(|_| {
                let cache = tempfile::tempdir().expect("a temp dir");
                let started = Instant::now();
                drop(runtime.block_on(host(subject, workspace.path(), cache.path())));
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        figures.insert(format!("{}_ms", subject.label), json!(times[1]));
    }
    figures.insert("figure".into(), json!("language_first_compile"));
    report(Value::Object(figures));
}

/// The process's resident memory, and its proportional share, in MiB.
fn memory_mib() -> (f64, f64) {
    let field = |file: &str, name: &str| {
        std::fs::read_to_string(file)
            .expect("/proc/self is readable")
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .expect("a memory field")
    };
    (
        field("/proc/self/status", "VmRSS:"),
        field("/proc/self/smaps_rollup", "Pss:"),
    )
}

async fn live_calls(subject: &Subject) -> Value {
    let workspace = tempfile::tempdir().expect("a temp dir");
    let cache = tempfile::tempdir().expect("a temp dir");
    let (airlock, _tools) = host(subject, workspace.path(), cache.path()).await;
    let mut cx = airlock.context();
    trivial(&airlock, &mut cx, subject).await;
    let (idle_rss, idle_pss) = memory_mib();

    let (all_running, (live_rss, live_pss)) = live_calls::while_live(
        &airlock,
        LIVE_CALLS,
        subject.tool,
        &subject.live,
        memory_mib,
    )
    .await;
    json!({
        "idle_rss_mib": idle_rss,
        "live_rss_mib": live_rss,
        "per_call_rss_kib": (live_rss - idle_rss) * 1024.0 / LIVE_CALLS as f64,
        "per_call_pss_kib": (live_pss - idle_pss) * 1024.0 / LIVE_CALLS as f64,
        "all_running_after_ms": all_running.as_secs_f64() * 1000.0,
    })
}

fn report(value: Value) {
    println!("RESULT {value}");
    std::io::stdout().flush().expect("stdout");
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects figures.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let subjects = subjects();
    report(json!({
        "figure": "language_components",
        "components": subjects
            .iter()
            .filter_map(|s| s.component.as_ref().map(|c| json!({"label": s.label, "tool": s.tool, "path": c})))
            .collect::<Vec<_>>(),
    }));
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    if wanted("language_warm_call") {
        let mut criterion = Criterion::default().configure_from_args();
        warm_calls(&mut criterion, &runtime, &subjects);
        criterion.final_summary();
    }
    if wanted("language_first_compile") {
        first_compile(&runtime, &subjects);
    }
    if wanted("language_live_calls") {
        let mut figures = serde_json::Map::new();
        for subject in &subjects {
            figures.insert(subject.label.into(), runtime.block_on(live_calls(subject)));
        }
        figures.insert("figure".into(), json!("language_live_calls"));
        figures.insert("calls".into(), json!(LIVE_CALLS));
        report(Value::Object(figures));
    }
}
