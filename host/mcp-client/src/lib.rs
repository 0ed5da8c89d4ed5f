//! External MCP servers mounted as tools (feature `mcp-client`): Claude
//! Code's MCP tools. Each `[mcp_servers.NAME]` is started as a child
//! process speaking MCP over stdio (rmcp's client), its tools are listed,
//! and each becomes an [`McpTool`] named `mcp__NAME__TOOL` behind the same
//! [`Tool`] trait as a component: the pipeline validates its input against
//! the server's schema, runs the hooks and the permission check, and maps
//! its result.
//!
//! Invariants:
//! - a server's tools have the origin [`ToolOrigin::Mcp`], which is not
//!   sandboxed: in the default mode every call asks (a server's
//!   `readOnlyHint` schedules its calls in parallel, but cannot let them
//!   through unasked, since nothing enforces it);
//! - the child gets only `PATH`, `HOME` and the configured variables, never
//!   the host's whole environment; on Unix it leads a process group of its
//!   own, and when the last of its tools is dropped (the `Airlock`
//!   dropped, or a load that did not reuse it), or it failed to start, the
//!   whole group is killed, so what the server started (`npx`'s node, a
//!   shell's children) goes with it; elsewhere only the child is
//!   (`kill_on_drop`);
//! - a load reuses a server of the previous one ([`Servers`]) only when
//!   its configuration and working directory are the same and it still
//!   runs; its tools are then listed again;
//! - a call is bounded by the tool's time limit and by
//!   `limits.output_bytes`; a call that ends without the server's answer
//!   (cancelled, timed out, or its future dropped) is cancelled at the
//!   server (`notifications/cancelled`); text from the server is
//!   sanitised like a guest's; its stderr is drained and logged;
//! - a server that fails to start, or a tool whose name or schema is not
//!   usable, is a load failure with its reason, never silently dropped.

#![deny(missing_docs)]

use airlock_core::config::{Config, McpServerConfig};
use airlock_core::descriptor::{
    DEFAULT_MAX_RESULT_SIZE, Descriptor, MAX_RESULT_SIZE_CEILING, SafetyFlags,
};
use airlock_core::error::{CallError, ErrorClass, LoadError};
use airlock_core::sanitize::{self, Sink};
use airlock_core::tool::{ContentBlock, Invocation, ProgressEvent, Tool, ToolOrigin, ToolOutput};
use async_trait::async_trait;
use futures::StreamExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, ContentBlock as McpContent, Implementation,
    ProgressNotificationParam, ProtocolVersion, ResourceContents, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How long a server may take to start and list its tools, by default.
const DEFAULT_STARTUP: Duration = Duration::from_secs(30);
/// How long a running server may take to list its tools again.
const RELIST: Duration = Duration::from_secs(5);
/// Cap, in characters, on a server's error text in a message.
const SERVER_ERROR_CHARS: usize = 4096;

/// The client side of one server connection: progress goes to the call
/// that asked for it.
#[derive(Clone, Default)]
struct Handler {
    progress: ProgressDispatcher,
    server: Arc<str>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("airlock", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(
            server = %self.server,
            "the MCP server's tools changed; they are read again when Airlock reloads its tools"
        );
    }
}

/// A running server, shared by its tools (and by the next load's, when
/// it is reused).
struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// The server's process; taken when the connection is dropped.
    process: Option<Process>,
    /// What it was started from: its configuration and working directory.
    started_from: (McpServerConfig, Option<PathBuf>),
    /// The server's version, as its tools' descriptors give it.
    version: String,
}

impl Connection {
    /// Whether the server may still answer: its service loop runs and its
    /// transport is open (a server that exited closes it, soon after).
    fn is_running(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

impl Drop for Connection {
    /// Stops the server as MCP asks a client to stop a stdio server: the
    /// service, dropped next, closes its stdin; then SIGTERM, then
    /// SIGKILL ([`Process::stop`]). Without a runtime to wait in (or when
    /// the runtime shuts down first), at once.
    fn drop(&mut self) {
        if let Some(process) = self.process.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(process.stop());
        }
    }
}

/// How long a server gets to exit after its stdin closed, then after
/// SIGTERM.
const GRACE: Duration = Duration::from_secs(2);

/// A server's child process. On Unix it leads a process group of its own,
/// and dropping this kills the group (SIGKILL), so what the server started
/// goes with it; elsewhere, only the child. The group's id cannot be taken
/// by another group while its leader is unreaped, and on Linux the leader
/// is not reaped before that kill (its exit is observed with `WNOWAIT`).
struct Process {
    child: tokio::process::Child,
    #[cfg(unix)]
    leader: Option<nix::unistd::Pid>,
}

impl Process {
    fn new(child: tokio::process::Child) -> Process {
        Process {
            #[cfg(unix)]
            leader: child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(nix::unistd::Pid::from_raw),
            child,
        }
    }

    /// Waits for the server to exit after its stdin closed, sends its
    /// group SIGTERM if it has not within [`GRACE`] and waits again; then
    /// drops it, which kills whatever is left of the group.
    async fn stop(mut self) {
        if !self.exits_within(GRACE).await {
            #[cfg(unix)]
            self.signal(nix::sys::signal::Signal::SIGTERM);
            self.exits_within(GRACE).await;
        }
    }

    /// Whether the server exits within `time`.
    #[cfg(target_os = "linux")]
    async fn exits_within(&mut self, time: Duration) -> bool {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        let (Some(leader), Some(_)) = (self.leader, self.child.id()) else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + time;
        loop {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            if !matches!(waitid(Id::Pid(leader), flags), Ok(WaitStatus::StillAlive)) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the server exits within `time` (reaping it).
    #[cfg(not(target_os = "linux"))]
    async fn exits_within(&mut self, time: Duration) -> bool {
        tokio::time::timeout(time, self.child.wait()).await.is_ok()
    }

    /// Sends the server's process group `signal`.
    #[cfg(unix)]
    fn signal(&self, signal: nix::sys::signal::Signal) {
        if let Some(leader) = self.leader {
            match nix::sys::signal::killpg(leader, signal) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(e) => tracing::warn!("cannot signal an MCP server's process group: {e}"),
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        #[cfg(unix)]
        self.signal(nix::sys::signal::Signal::SIGKILL);
        // Then the child is dropped: `kill_on_drop` kills it (elsewhere
        // than Unix, the only kill) and tokio reaps it.
    }
}

/// The servers one load started or reused, by name. The next load (a
/// reload, or another configuration) reuses those whose configuration and
/// working directory are unchanged and that still run, listing their tools
/// again, so a reload neither restarts a server nor loses its state.
/// Shared: every view of a registry holds its servers.
#[derive(Clone, Default)]
pub struct Servers(Arc<BTreeMap<String, Arc<Connection>>>);

/// One tool of an external MCP server.
pub struct McpTool {
    descriptor: Descriptor,
    origin: ToolOrigin,
    /// The tool's name at the server.
    remote: String,
    connection: Arc<Connection>,
    max_output: usize,
}

/// What [`mount`] did: the tools, what failed with why, and the servers
/// behind the tools.
pub type Mounted = (Vec<McpTool>, Vec<(ToolOrigin, LoadError)>, Servers);

/// Starts every enabled server in `config` (in parallel), or reuses the
/// one `previous` holds under its name when it was started from the same
/// configuration and still runs, and returns their tools, what failed with
/// why, and the servers. Servers switched off are skipped.
pub async fn mount(config: &Config, previous: &Servers) -> Mounted {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (name, server)) in config.mcp_servers.iter().enumerate() {
        if server.enabled == Some(false) {
            tracing::info!(server = %name, "switched off in the configuration");
            continue;
        }
        let (name, server) = (name.clone(), server.clone());
        let cwd = server.cwd.clone().or_else(|| config.workspace.clone());
        let from = (server, cwd);
        let running = previous
            .0
            .get(&name)
            .filter(|c| c.started_from == from && c.is_running())
            .cloned();
        let max_output = config.limits.output_bytes;
        tasks.spawn(async move {
            let connected = match running {
                Some(connection) => match relist(&connection).await {
                    Ok(listed) => Ok((connection, listed)),
                    Err(e) => {
                        tracing::warn!(server = %name, "{e}; starting it again");
                        connect(&name, from).await
                    }
                },
                None => connect(&name, from).await,
            };
            let result = connected.map(|(connection, listed)| {
                let (tools, failed) = tools_of(&name, &connection, listed, max_output);
                (connection, tools, failed)
            });
            (i, name, result)
        });
    }
    let mut started = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(r) => started.push(r),
            Err(e) => tracing::error!("an MCP server task failed: {e}"),
        }
    }
    started.sort_by_key(|(i, _, _)| *i);
    let mut tools = Vec::new();
    let mut failures = Vec::new();
    let mut servers = BTreeMap::new();
    for (_, name, result) in started {
        match result {
            Ok((connection, mounted, failed)) => {
                tools.extend(mounted);
                failures.extend(
                    failed
                        .into_iter()
                        .map(|e| (ToolOrigin::Mcp(name.clone()), e)),
                );
                servers.insert(name, connection);
            }
            Err(e) => failures.push((ToolOrigin::Mcp(name), e)),
        }
    }
    (tools, failures, Servers(Arc::new(servers)))
}

/// How long a server may take to start and list its tools.
fn startup_time(config: &McpServerConfig) -> Duration {
    config
        .startup_timeout_ms
        .map_or(DEFAULT_STARTUP, Duration::from_millis)
}

/// Lists a running server's tools again, within its startup time but at
/// most [`RELIST`] (a server that hangs is started afresh).
async fn relist(connection: &Connection) -> Result<Vec<rmcp::model::Tool>, String> {
    let within = startup_time(&connection.started_from.0).min(RELIST);
    match tokio::time::timeout(within, connection.service.list_all_tools()).await {
        Ok(Ok(listed)) => Ok(listed),
        Ok(Err(e)) => Err(server_error("tools/list failed", &e)),
        Err(_) => Err(format!(
            "tools/list got no answer within {} ms",
            within.as_millis()
        )),
    }
}

/// Starts one server, and lists its tools.
async fn connect(
    name: &str,
    (config, cwd): (McpServerConfig, Option<PathBuf>),
) -> Result<(Arc<Connection>, Vec<rmcp::model::Tool>), LoadError> {
    if name.is_empty()
        || name.contains("__")
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(LoadError::McpServer(format!(
            "the server name {name:?} may use only letters, digits, `_` and `-`, and no `__` \
             (which separates the server from the tool in `mcp__SERVER__TOOL`)"
        )));
    }
    let expanded = |text: &str, field: &dyn std::fmt::Display| {
        expand(text, |name| std::env::var(name).ok())
            .map_err(|e| LoadError::McpServer(format!("in {field}: {e}")))
    };
    let program = expanded(&config.command, &"command")?;
    let mut args = Vec::new();
    for (i, arg) in config.args.iter().enumerate() {
        args.push(expanded(arg, &format_args!("args[{i}]"))?);
    }
    let mut env = BTreeMap::new();
    for (key, value) in &config.env {
        env.insert(key, expanded(value, &format_args!("env.{key}"))?);
    }
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    for var in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(var) {
            command.env(var, value);
        }
    }
    command.envs(env);
    if let Some(cwd) = &cwd {
        command.current_dir(cwd);
    }
    let mut process = command
        .spawn()
        .map(Process::new)
        .map_err(|e| LoadError::McpServer(format!("cannot start {program:?}: {e}")))?;
    let child = &mut process.child;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(LoadError::McpServer(
            "its standard streams were not piped".into(),
        ));
    };
    tokio::spawn(drain_stderr(name.to_string(), stderr));
    let handler = Handler {
        progress: ProgressDispatcher::new(),
        server: name.into(),
    };
    let startup = startup_time(&config);
    let started = tokio::time::timeout(startup, async {
        let service = handler
            .serve((stdout, stdin))
            .await
            .map_err(|e| server_error("the MCP handshake failed", &e))?;
        let tools = service
            .list_all_tools()
            .await
            .map_err(|e| server_error("tools/list failed", &e))?;
        Ok::<_, String>((service, tools))
    })
    .await
    .map_err(|_| {
        LoadError::McpServer(format!(
            "it did not start and list its tools within {} ms (startup_timeout_ms)",
            startup.as_millis()
        ))
    })?
    .map_err(LoadError::McpServer)?;
    let (service, listed) = started;
    let version = service
        .peer_info()
        .and_then(|i| i.server_info.as_ref().map(|s| s.version.clone()))
        .unwrap_or_default();
    let connection = Connection {
        service,
        process: Some(process),
        started_from: (config, cwd),
        version,
    };
    Ok((Arc::new(connection), listed))
}

/// `text` with `${VAR}` replaced by the variable's value (`lookup`), and
/// `${VAR:-default}` by the default when the variable is unset, as Claude
/// Code expands `.mcp.json`. An unset variable without a default, or a
/// malformed reference (which Claude Code would pass on as it is), is an
/// error that names the reference but never quotes the text (which may
/// hold a secret).
fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err("a `${` is not closed".into());
        };
        let reference = &after[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "`${{{reference}}}` does not name a variable (letters, digits and `_`)"
            ));
        }
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "the environment variable {name} is not set, or not UTF-8 (`${{{name}}}`); \
                     set it, or give a default: `${{{name}:-...}}`"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A server's listed tools as [`McpTool`]s, and the ones that cannot be.
fn tools_of(
    name: &str,
    connection: &Arc<Connection>,
    listed: Vec<rmcp::model::Tool>,
    max_output: usize,
) -> (Vec<McpTool>, Vec<LoadError>) {
    let defer = connection.started_from.0.defer_loading;
    let mut tools = Vec::new();
    let mut failures = Vec::new();
    for tool in listed {
        match descriptor(name, &tool, &connection.version, defer) {
            Ok(d) => tools.push(McpTool {
                origin: ToolOrigin::Mcp(name.to_string()),
                remote: tool.name.to_string(),
                connection: connection.clone(),
                descriptor: d,
                max_output,
            }),
            Err(e) => failures.push(e),
        }
    }
    (tools, failures)
}

/// A server's tool as a descriptor: `mcp__SERVER__TOOL` (characters a
/// model API refuses become `_`), its description as the prompt (the
/// first line as the description), its schemas, and flags from its
/// annotations as MCP defines their defaults.
fn descriptor(
    server: &str,
    tool: &rmcp::model::Tool,
    version: &str,
    defer: bool,
) -> Result<Descriptor, LoadError> {
    let safe: String = tool
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("mcp__{server}__{safe}");
    let text = |t: &str, max: usize| sanitize::clean_capped(t, Sink::Model, max);
    let prompt = text(tool.description.as_deref().unwrap_or_default(), 10_000);
    let first = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let description = if first.is_empty() {
        format!("The tool {} of the MCP server {server}.", tool.name)
    } else {
        text(first, 500)
    };
    let mut d = Descriptor::new(&name, &description);
    d.title = sanitize::clean_capped(
        tool.title
            .as_deref()
            .or(tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or(&tool.name),
        Sink::Line,
        200,
    );
    if !prompt.is_empty() {
        d.prompt = prompt;
    }
    d.input_schema = Value::Object((*tool.input_schema).clone());
    d.output_schema = tool
        .output_schema
        .as_ref()
        .map(|s| Value::Object((**s).clone()));
    d.flags = flags(tool);
    let meta = |key: &str| tool.meta.as_ref().and_then(|m| m.get(key));
    d.defer_loading = defer && meta("anthropic/alwaysLoad") != Some(&Value::Bool(true));
    d.max_result_size = meta("anthropic/maxResultSizeChars")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MAX_RESULT_SIZE, |n| {
            n.clamp(1, u64::from(MAX_RESULT_SIZE_CEILING)) as u32
        });
    d.version = version_of(version);
    sanitize::clean_descriptor(&mut d);
    let problems = d.problems();
    if !problems.is_empty() {
        return Err(LoadError::InvalidDescriptor {
            tool: name,
            problems,
        });
    }
    Ok(d)
}

/// An error a server caused, for a load failure: `what`, then the error
/// as one cleaned line (its text may come from the server).
fn server_error(what: &str, e: &dyn std::fmt::Display) -> String {
    let e = sanitize::clean_capped(&e.to_string(), Sink::Line, SERVER_ERROR_CHARS);
    format!("{what}: {e}")
}

/// A server's version as a descriptor's: one line, at most 64 bytes
/// (cut at a character boundary), `unknown` when empty.
fn version_of(version: &str) -> String {
    let line = sanitize::clean(version, Sink::Line).text;
    let mut end = line.len().min(64);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    match line[..end].trim() {
        "" => "unknown".into(),
        v => v.to_string(),
    }
}

/// Reads a server's stderr to its end (so the server never blocks on a
/// full pipe or dies of a closed one), logging each line, cleaned and cut
/// at 500 characters; bytes past 4 KiB of one line are dropped.
async fn drain_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    const LINE: usize = 4096;
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    let log = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let text = sanitize::clean_capped(&text, Sink::Line, 500);
        tracing::debug!(%server, "stderr: {text}");
    };
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            let room = LINE.saturating_sub(line.len());
            line.extend_from_slice(&piece[..piece.len().min(room)]);
            if piece.ends_with(b"\n") {
                log(&line);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        log(&line);
    }
}

/// The flags MCP's annotations hint at: `readOnlyHint` (default false)
/// makes a call read-only and concurrency-safe; otherwise
/// `destructiveHint` (default true) and `idempotentHint` (default false);
/// `openWorldHint` (default true); `_meta["anthropic/requiresUserInteraction"]`.
fn flags(tool: &rmcp::model::Tool) -> SafetyFlags {
    let a = tool.annotations.clone().unwrap_or_default();
    let mut flags = SafetyFlags::empty();
    if a.read_only_hint == Some(true) {
        flags |= SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE;
    } else {
        if a.destructive_hint != Some(false) {
            flags |= SafetyFlags::DESTRUCTIVE;
        }
        if a.idempotent_hint == Some(true) {
            flags |= SafetyFlags::IDEMPOTENT;
        }
    }
    if a.open_world_hint != Some(false) {
        flags |= SafetyFlags::OPEN_WORLD;
    }
    let interactive = tool
        .meta
        .as_ref()
        .and_then(|m| m.get("anthropic/requiresUserInteraction"));
    if interactive == Some(&Value::Bool(true)) {
        flags |= SafetyFlags::REQUIRES_USER_INTERACTION;
    }
    flags
}

/// A request the server has not answered: when the call ends without the
/// answer (cancelled, timed out, or its future dropped by the caller), the
/// server is sent `notifications/cancelled`, so it stops the work and the
/// client forgets the request.
struct Pending {
    /// The connection, until the answer arrived.
    peer: Option<rmcp::Peer<RoleClient>>,
    id: rmcp::model::RequestId,
    reason: &'static str,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let (Some(peer), Ok(runtime)) = (self.peer.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let param =
            CancelledNotificationParam::new(Some(self.id.clone()), Some(self.reason.into()));
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(param).await;
        });
    }
}

#[async_trait]
impl Tool for McpTool {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    async fn call(
        &self,
        invocation: &mut Invocation,
        input: &Value,
    ) -> Result<ToolOutput, CallError> {
        let arguments: Map<String, Value> = input.as_object().cloned().unwrap_or_default();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments),
        ));
        let peer = self.connection.service.peer().clone();
        let server = self.connection.service.service();
        let lost = |e: rmcp::service::ServiceError| {
            CallError::new(
                ErrorClass::ToolError,
                sanitize::clean_capped(
                    &format!("the MCP server of {} failed: {e}", self.descriptor.name),
                    Sink::Model,
                    SERVER_ERROR_CHARS,
                ),
            )
        };
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(lost)?;
        let mut pending = Pending {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
            reason: "abandoned by the caller",
        };
        let mut progress = server
            .progress
            .subscribe(handle.progress_token.clone())
            .await;
        let response = handle.await_response();
        tokio::pin!(response);
        let deadline = tokio::time::sleep(invocation.grants.timeout);
        tokio::pin!(deadline);
        let cancel = invocation.cancel.clone();
        let result = loop {
            tokio::select! {
                r = &mut response => {
                    pending.peer = None;
                    break r.map_err(lost)?;
                }
                Some(p) = progress.next() => invocation.progress.send(ProgressEvent {
                    tool_use_id: invocation.tool_use_id.clone(),
                    message: sanitize::clean_capped(p.message.as_deref().unwrap_or("working"), Sink::Line, 200),
                    fraction: p.total.filter(|t| *t > 0.0).map(|t| (p.progress / t).clamp(0.0, 1.0) as f32),
                }),
                () = cancel.cancelled() => {
                    pending.reason = "cancelled by the user";
                    return Err(CallError::cancelled("the call was cancelled"));
                }
                () = &mut deadline => {
                    pending.reason = "timed out";
                    return Err(CallError::new(
                        ErrorClass::Timeout,
                        format!("the MCP server did not answer within {} ms", invocation.grants.timeout.as_millis()),
                    ));
                }
            }
        };
        match result {
            ServerResult::CallToolResult(r) => output(r, self.max_output),
            _ => Err(CallError::new(
                ErrorClass::ToolError,
                "the MCP server answered tools/call with something other than a tool result",
            )),
        }
    }
}

/// A server's result as a tool output: text sanitised, images decoded,
/// embedded resources as their text (or a placeholder for binary ones);
/// `isError` as a tool error; more than `max_output` bytes an output limit.
fn output(result: CallToolResult, max_output: usize) -> Result<ToolOutput, CallError> {
    let size: usize = result
        .content
        .iter()
        .map(|c| match c {
            McpContent::Text(t) => t.text.len(),
            McpContent::Image(i) => i.data.len(),
            McpContent::Audio(a) => a.data.len(),
            McpContent::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => text.len(),
                ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
                _ => 0,
            },
            _ => 0,
        })
        .sum::<usize>()
        + result
            .structured_content
            .as_ref()
            .map_or(0, |s| s.to_string().len());
    if size > max_output {
        return Err(CallError::new(
            ErrorClass::OutputLimit,
            format!(
                "the MCP server returned {size} bytes; the limit is {max_output} (limits.output_bytes)"
            ),
        ));
    }
    let text = |t: &str| sanitize::clean(t, Sink::Model).text.into_owned();
    let line = |t: &str| sanitize::clean(t, Sink::Line).text.into_owned();
    let content: Vec<ContentBlock> = result
        .content
        .iter()
        .map(|c| match c {
            McpContent::Text(t) => ContentBlock::Text(text(&t.text)),
            McpContent::Image(i) => {
                use base64::Engine as _;
                match base64::engine::general_purpose::STANDARD.decode(&i.data) {
                    Ok(data) => ContentBlock::Image {
                        mime_type: line(&i.mime_type),
                        data,
                    },
                    Err(_) => ContentBlock::Text("[an image that was not valid base64]".into()),
                }
            }
            McpContent::Audio(a) => ContentBlock::Text(format!("[audio: {}]", line(&a.mime_type))),
            McpContent::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text: t, .. } => {
                    ContentBlock::Text(text(t))
                }
                ResourceContents::BlobResourceContents { uri, blob, .. } => ContentBlock::Text(
                    format!("[resource {}: {} bytes of base64]", line(uri), blob.len()),
                ),
                _ => ContentBlock::Text("[a resource of a kind Airlock does not know]".into()),
            },
            McpContent::ResourceLink(link) => ContentBlock::ResourceLink {
                uri: line(&link.uri),
                name: line(&link.name),
                description: link.description.as_deref().map(text),
                mime_type: link.mime_type.as_deref().map(line),
            },
            _ => ContentBlock::Text("[content of a kind Airlock does not know]".into()),
        })
        .collect();
    if result.is_error == Some(true) {
        let message = content
            .iter()
            .map(ContentBlock::to_text)
            .collect::<Vec<_>>()
            .join("\n");
        return Err(CallError::new(ErrorClass::ToolError, message));
    }
    let mut structured = result.structured_content;
    if let Some(value) = &mut structured {
        sanitize::clean_json(value);
    }
    Ok(ToolOutput {
        content,
        structured,
        ..ToolOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(value: Value) -> rmcp::model::Tool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn variables_expand_as_claude_code_expands_them() {
        let env = |name: &str| match name {
            "TOKEN" => Some("s3cret".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let ok = |text: &str| expand(text, env).unwrap();
        assert_eq!(ok("plain $TOKEN {TOKEN}"), "plain $TOKEN {TOKEN}");
        assert_eq!(ok("${TOKEN}"), "s3cret");
        assert_eq!(ok("Bearer ${TOKEN}!${TOKEN}"), "Bearer s3cret!s3cret");
        assert_eq!(ok("${TOKEN:-other}"), "s3cret");
        assert_eq!(ok("${MISSING:-https://x.test/a}"), "https://x.test/a");
        assert_eq!(ok("${EMPTY:-fallback}"), "", "set, though empty");
        assert_eq!(ok("${EMPTY}"), "");
        assert_eq!(ok("${MISSING:-}"), "");
        let err = |text: &str| expand(text, env).unwrap_err();
        let missing = err("--key=s3cret-${MISSING}");
        assert!(
            missing.contains("MISSING is not set") && missing.contains("${MISSING:-...}"),
            "{missing}"
        );
        assert!(
            !missing.contains("s3cret"),
            "the text is not quoted: {missing}"
        );
        assert!(err("${TOKEN").contains("not closed"));
        assert!(err("${}").contains("does not name a variable"));
        assert!(err("${1X}").contains("does not name a variable"));
        assert!(err("${A-B}").contains("does not name a variable"));
    }

    #[test]
    fn names_flags_and_meta_follow_the_mcp_defaults() {
        let t = tool(
            json!({"name": "get.file", "description": "Reads a file.\nMore.",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        );
        let d = descriptor("fs", &t, "1.0", true).unwrap();
        assert_eq!(d.name, "mcp__fs__get_file");
        assert_eq!(d.description, "Reads a file.");
        assert_eq!(d.prompt, "Reads a file.\nMore.");
        assert_eq!(
            d.flags,
            SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE
        );
        assert!(d.defer_loading);

        let t = tool(json!({"name": "rm", "inputSchema": {"type": "object"},
            "_meta": {"anthropic/alwaysLoad": true, "anthropic/requiresUserInteraction": true,
                      "anthropic/maxResultSizeChars": 9}}));
        let d = descriptor("fs", &t, "1.0", true).unwrap();
        assert_eq!(
            d.flags,
            SafetyFlags::DESTRUCTIVE
                | SafetyFlags::OPEN_WORLD
                | SafetyFlags::REQUIRES_USER_INTERACTION
        );
        assert!(!d.defer_loading, "alwaysLoad keeps it listed");
        assert_eq!(d.max_result_size, 9);
        assert!(d.description.contains("rm"));

        assert_eq!(version_of(&"é".repeat(40)), "é".repeat(32));
        assert_eq!(version_of(" \n"), "unknown");
        let t = tool(json!({"name": "big", "inputSchema": {"type": "object"},
            "_meta": {"anthropic/maxResultSizeChars": 9_000_000}}));
        let d = descriptor("fs", &t, "1", false).unwrap();
        assert_eq!(d.max_result_size, MAX_RESULT_SIZE_CEILING);

        let long = "x".repeat(70);
        let t = tool(json!({"name": long, "inputSchema": {"type": "object"}}));
        assert!(matches!(
            descriptor("fs", &t, "1", false),
            Err(LoadError::InvalidDescriptor { .. })
        ));
    }

    #[test]
    fn results_are_mapped_bounded_and_errors_kept() {
        let r: CallToolResult = serde_json::from_value(json!({"content": [
            {"type": "text", "text": "a\u{1b}[31mb"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///x", "name": "x"}],
            "structuredContent": {"n": 1}}))
        .unwrap();
        let out = output(r.clone(), 1 << 20).unwrap();
        assert_eq!(
            out.content[0],
            ContentBlock::Text("ab".into()),
            "the escape sequence is gone"
        );
        assert_eq!(
            out.content[1],
            ContentBlock::Image {
                mime_type: "image/png".into(),
                data: b"hi".to_vec()
            }
        );
        assert_eq!(out.structured, Some(json!({"n": 1})));
        assert_eq!(output(r, 8).unwrap_err().class, ErrorClass::OutputLimit);

        let r: CallToolResult = serde_json::from_value(
            json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
        )
        .unwrap();
        let e = output(r, 100).unwrap_err();
        assert_eq!((e.class, e.message.as_str()), (ErrorClass::ToolError, "no"));
    }

    #[test]
    fn server_text_is_cleaned_in_schemas_and_structured_output() {
        let dirt = "\u{1b}[2J\u{7}\u{202E}\u{E0069}\u{2060}\u{AD}\u{2028}\u{FE0F}";
        let d = |t: &str| format!("{t}{dirt}");
        let t = tool(json!({"name": d("look"), "title": d("Look\nnow"),
            "inputSchema": {"type": "object", "properties": {d("path"): {
                "type": "string", "description": d("Where.")}}},
            "outputSchema": {"type": "object", "description": d("What.")}}));
        let desc = descriptor("fs", &t, &d("2"), false).unwrap();
        assert_eq!(
            desc.input_schema,
            json!({"type": "object", "properties": {"path": {"type": "string", "description": "Where."}}})
        );
        assert_eq!(
            desc.output_schema,
            Some(json!({"type": "object", "description": "What."}))
        );
        assert_eq!(desc.title, "Looknow");
        assert_eq!(desc.description, "The tool look of the MCP server fs.");
        assert_eq!(desc.version, "2");

        let r: CallToolResult = serde_json::from_value(json!({"content": [
            {"type": "resource_link", "uri": d("file:///x\n"), "name": d("x")}],
            "structuredContent": {d("n"): [d("one\ntwo")]}}))
        .unwrap();
        let out = output(r, 1 << 20).unwrap();
        assert_eq!(out.structured, Some(json!({"n": ["one\ntwo"]})));
        assert_eq!(
            out.content[0],
            ContentBlock::ResourceLink {
                uri: "file:///x".into(),
                name: "x".into(),
                description: None,
                mime_type: None
            }
        );
    }
}
