//! Shared helpers for Airlock's integration and security suites: the paths
//! of the test guests, one host with the bundled tools compiled once per
//! test binary, temporary workspaces, and a loopback HTTP server.

use airlock_host::config::ToolConfig;
use airlock_host::{Airlock, Config, ToolContext, ToolResult, ToolUse};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Paths of the test guests built from `tests/guests/`.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// The configuration every test starts from: the defaults, minus the
/// user's tool directory, so the suites never depend on what is installed,
/// and with results saved apart from the user's own.
pub fn config() -> Config {
    Config {
        tool_dirs: Some(Vec::new()),
        cache_dir: Some(test_cache_dir()),
        results_dir: Some(std::env::temp_dir().join("airlock-test-results")),
        ..Config::default()
    }
}

/// The artifact cache the tests share (across runs too, so only the first
/// run compiles the guests), apart from the user's own.
pub fn test_cache_dir() -> PathBuf {
    std::env::temp_dir().join("airlock-test-artifacts")
}

/// The `XDG_CACHE_HOME` of the tests that run the `airlock` binary: one
/// artifact cache they share (across runs too), so only the first compiles
/// the bundled tools. A test of what a first start does names a cache of
/// its own.
pub fn cache_home() -> PathBuf {
    std::env::temp_dir().join("airlock-test-cache-home")
}

/// The bundled tools, compiled once per test binary (on a runtime of its
/// own, so no test's runtime owns it).
pub fn base() -> &'static Airlock {
    static BASE: OnceLock<Airlock> = OnceLock::new();
    BASE.get_or_init(|| {
        std::thread::spawn(|| {
            tokio::runtime::Runtime::new()
                .expect("a runtime")
                .block_on(Airlock::new(config()))
                .expect("the bundled tools load")
        })
        .join()
        .expect("the loader thread")
    })
}

/// The bundled tools under `config`'s grants, without recompiling.
pub async fn airlock(config: Config) -> Airlock {
    base()
        .with_config(config)
        .await
        .expect("the grants are valid")
}

/// A configuration granting `workspace` read-write.
pub fn workspace_config(workspace: &Path) -> Config {
    Config {
        workspace: Some(workspace.to_path_buf()),
        ..config()
    }
}

/// Adds `grant` for `tool` to `config`.
pub fn grant(mut config: Config, tool: &str, grant: ToolConfig) -> Config {
    config.tools.insert(tool.to_string(), grant);
    config
}

/// A temporary workspace holding `files` (path, content).
pub fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("airlock-test-")
        .tempdir()
        .expect("a temp dir");
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// The canonical form of `path`, as tools see it.
pub fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().to_str().unwrap().to_string()
}

/// A host that loads only the component at `wasm` (copied into a tool
/// directory of its own), under `config`'s grants.
pub async fn with_component(wasm: &str, config: Config) -> (Airlock, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let name = Path::new(wasm).file_name().unwrap();
    std::fs::copy(wasm, dir.path().join(name)).expect("copy the component");
    let config = Config {
        bundled_tools: false,
        tool_dirs: Some(vec![dir.path().to_path_buf()]),
        ..config
    };
    let airlock = Airlock::new(config)
        .await
        .expect("the configuration is valid");
    (airlock, dir)
}

/// Runs one call and returns its result.
pub async fn call(airlock: &Airlock, cx: &mut ToolContext, tool: &str, input: Value) -> ToolResult {
    airlock.call(cx, ToolUse::new("test-1", tool, input)).await
}

/// The text of a successful result; panics with the error otherwise.
pub fn ok_text(result: &ToolResult) -> String {
    match &result.outcome {
        Ok(output) => output.text_content(),
        Err(e) => panic!("{} failed: {e}", result.name),
    }
}

/// The error of a failed result; panics if it succeeded.
pub fn err(result: &ToolResult) -> &airlock_host::CallError {
    match &result.outcome {
        Ok(output) => panic!("{} succeeded: {}", result.name, output.text_content()),
        Err(e) => e,
    }
}

/// Grants `tool` the network hosts `hosts`.
pub fn network(hosts: &[&str]) -> ToolConfig {
    ToolConfig {
        network: hosts.iter().map(|h| h.to_string()).collect(),
        ..ToolConfig::default()
    }
}

/// A loopback HTTP server answering every request with `body`; returns its
/// port. It runs until the test's runtime ends.
pub async fn http_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

/// A log writer for a test's `tracing` subscriber: what is written is
/// kept in the shared buffer.
pub struct LogCapture(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The path of `rel` inside `dir`, as a string.
pub fn path_in(dir: &Path, rel: &str) -> String {
    let p: PathBuf = Path::new(&canonical(dir)).join(rel);
    p.to_str().unwrap().to_string()
}

/// Native test tools for the executor: their calls sleep, record when they
/// ran and what context they saw, and can fail on demand.
pub mod fake {
    use airlock_host::CallError;
    use airlock_host::tool::Invocation;
    use airlock_host::{ContextChange, Tool, ToolOrigin, ToolOutput};
    use airlock_host::{Descriptor, InterruptBehavior, SafetyFlags};
    use async_trait::async_trait;
    use serde_json::{Value, json};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// One call, as the tool saw it.
    #[derive(Clone, Debug)]
    pub struct Run {
        /// The tool use's id.
        pub id: String,
        /// Whether the tool is concurrency-safe.
        pub concurrency_safe: bool,
        /// When it started and ended.
        pub start: Instant,
        /// When it ended.
        pub end: Instant,
        /// The `last` state key it saw: the last exclusive call before it.
        pub saw_last: Option<String>,
        /// Whether it was cancelled.
        pub cancelled: bool,
    }

    /// A native tool: `{"ms": N, "fail": bool, "exclusive": bool}`. Its
    /// exclusive calls set its state key `last` to their id.
    pub struct FakeTool {
        descriptor: Descriptor,
        origin: ToolOrigin,
        log: Arc<Mutex<Vec<Run>>>,
        by_input: bool,
    }

    impl FakeTool {
        /// A tool named `name` with `flags`, logging into `log`.
        pub fn new(
            name: &str,
            flags: SafetyFlags,
            interrupt: InterruptBehavior,
            log: Arc<Mutex<Vec<Run>>>,
        ) -> Self {
            let mut descriptor = Descriptor::new(name, "A test tool.");
            descriptor.input_schema = json!({"type": "object", "properties": {"ms": {"type": "integer"}, "fail": {"type": "boolean"}, "exclusive": {"type": "boolean"}}});
            descriptor.flags = flags;
            descriptor.interrupt = interrupt;
            FakeTool {
                descriptor,
                origin: ToolOrigin::Native,
                log,
                by_input: false,
            }
        }

        /// Classifies each input: concurrency-safe and read-only unless
        /// `"exclusive": true` (Claude Code's `isConcurrencySafe(input)`).
        pub fn classified_by_input(mut self) -> Self {
            self.by_input = true;
            self
        }
    }

    #[async_trait]
    impl Tool for FakeTool {
        fn descriptor(&self) -> &Descriptor {
            &self.descriptor
        }

        fn origin(&self) -> &ToolOrigin {
            &self.origin
        }

        async fn classify(
            &self,
            _inv: &mut Invocation,
            input: &Value,
        ) -> Result<Option<SafetyFlags>, CallError> {
            if !self.by_input {
                return Ok(None);
            }
            Ok(Some(if input["exclusive"].as_bool() == Some(true) {
                SafetyFlags::empty()
            } else {
                SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE
            }))
        }

        async fn call(&self, inv: &mut Invocation, input: &Value) -> Result<ToolOutput, CallError> {
            let start = Instant::now();
            let saw_last = inv
                .context
                .state
                .iter()
                .find(|(k, _)| k == "last")
                .map(|(_, v)| v.clone());
            let ms = input["ms"].as_u64().unwrap_or(0);
            let cancel_stops = self.descriptor.interrupt == InterruptBehavior::Cancel;
            let cancelled = tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => false,
                () = inv.cancel.cancelled(), if cancel_stops => true,
            };
            let concurrency_safe = if self.by_input {
                input["exclusive"].as_bool() != Some(true)
            } else {
                self.descriptor
                    .flags
                    .contains(SafetyFlags::CONCURRENCY_SAFE)
            };
            self.log.lock().unwrap().push(Run {
                id: inv.tool_use_id.clone(),
                concurrency_safe,
                start,
                end: Instant::now(),
                saw_last,
                cancelled,
            });
            if cancelled {
                return Err(CallError::cancelled("stopped"));
            }
            if input["fail"].as_bool() == Some(true) {
                return Err(CallError::new(
                    airlock_host::ErrorClass::ToolError,
                    "failed on purpose",
                ));
            }
            let mut out = ToolOutput::text(format!("done {}", inv.tool_use_id));
            if !concurrency_safe {
                out.changes.push(ContextChange::SetState {
                    key: "last".into(),
                    value: inv.tool_use_id.clone(),
                });
            }
            Ok(out)
        }
    }
}

/// A prompter that answers from a script and records the questions.
pub struct ScriptedPrompter {
    answers: std::sync::Mutex<std::collections::VecDeque<airlock_host::PermissionAnswer>>,
    /// The questions asked, in order.
    pub asked: std::sync::Mutex<Vec<airlock_host::PermissionRequest>>,
}

impl ScriptedPrompter {
    /// A prompter giving `answers` in order (then denying).
    pub fn new(answers: Vec<airlock_host::PermissionAnswer>) -> std::sync::Arc<Self> {
        std::sync::Arc::new(ScriptedPrompter {
            answers: std::sync::Mutex::new(answers.into()),
            asked: std::sync::Mutex::new(Vec::new()),
        })
    }
}

#[async_trait::async_trait]
impl airlock_host::PermissionPrompter for ScriptedPrompter {
    async fn ask(
        &self,
        request: &airlock_host::PermissionRequest,
    ) -> airlock_host::PermissionAnswer {
        self.asked.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(airlock_host::PermissionAnswer::Deny(Some(
                "no more scripted answers".into(),
            )))
    }
}

/// The host's health, read from `/proc/self`: open file descriptors,
/// resident memory and threads.
#[derive(Clone, Copy, Debug)]
pub struct Health {
    /// Open file descriptors.
    pub fds: usize,
    /// Resident set size, in KiB.
    pub rss_kib: u64,
    /// Threads.
    pub threads: u64,
}

/// The host's health now.
pub fn health() -> Health {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Health {
        fds,
        rss_kib: field("VmRSS:"),
        threads: field("Threads:"),
    }
}

/// Asserts the host is back near `before`: file descriptors within a few
/// (tests run in parallel), resident memory within `slack_mib`.
pub fn assert_recovered(before: Health, slack_mib: u64, what: &str) {
    let after = health();
    assert!(
        after.fds <= before.fds + 32,
        "{what}: fds {} -> {}",
        before.fds,
        after.fds
    );
    assert!(
        after.rss_kib <= before.rss_kib + slack_mib * 1024,
        "{what}: rss {} KiB -> {} KiB",
        before.rss_kib,
        after.rss_kib
    );
}

/// The test guests, compiled once per test binary into one host; use
/// [`hostile`] to grant them.
pub fn hostile_base() -> &'static (Airlock, PathBuf) {
    static BASE: OnceLock<(Airlock, PathBuf)> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("airlock-test-guests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for wasm in [
            guests::HOSTILE,
            guests::FSPROBE,
            guests::ABI_LIAR,
            guests::LIAR,
            guests::PATIENT,
        ] {
            let path = Path::new(wasm);
            std::fs::copy(path, dir.join(path.file_name().unwrap())).unwrap();
        }
        let config = Config {
            bundled_tools: false,
            tool_dirs: Some(vec![dir.clone()]),
            ..Config::default()
        };
        let airlock = std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .expect("a runtime")
                .block_on(Airlock::new(config))
                .expect("the test guests load")
        })
        .join()
        .expect("the loader thread");
        (airlock, dir)
    })
}

/// The test guests under `config`'s grants (its tool sources are replaced
/// by the test guests'), without recompiling.
pub async fn hostile(config: Config) -> Airlock {
    let (base, dir) = hostile_base();
    let config = Config {
        bundled_tools: false,
        tool_dirs: Some(vec![dir.clone()]),
        ..config
    };
    base.with_config(config)
        .await
        .expect("the grants are valid")
}

/// Serialises the tests that use a lot of memory or measure the host's
/// health, so one test's attack does not show in another's measurement.
pub async fn measured() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}
