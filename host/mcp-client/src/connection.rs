//! One server's connection: its client handler (progress to the call that
//! asked), the running service and process, and starting it.

use crate::bounds::{BoundedLines, Stdout, list_tools};
use crate::process::{Process, Sandbox, Tail, drain_stderr};
use crate::startup_time;
use airlock_core::config::McpServerConfig;
use airlock_core::config::expand;
use airlock_core::error::LoadError;
use airlock_core::grants::{NetPolicy, proxied_port};
use airlock_core::programs::find;
use airlock_native::{Confinement, Helper, Proxy, Refused};
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{ClientCacheConfig, NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

/// The client side of one server connection: progress goes to the call
/// that asked for it.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    pub(crate) progress: ProgressDispatcher,
    pub(crate) server: Arc<str>,
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
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, Handler>,
    /// The server's process; taken when the connection is dropped.
    pub(crate) process: Option<Process>,
    /// What it was started from.
    pub(crate) started_from: Launch,
    /// The server's version, as its tools' descriptors give it.
    pub(crate) version: String,
    /// Its stdout's line bound, and what was refused of it.
    pub(crate) stdout: Arc<Stdout>,
}

impl Connection {
    /// Whether the server may still answer: its service loop runs and its
    /// transport is open (a server that exited, or sent a line past the
    /// bound, closes it, soon after).
    pub(crate) fn is_running(&self) -> bool {
        self.stdout.refused().is_none()
            && !self.service.is_closed()
            && !self.service.peer().is_transport_closed()
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

/// How long a server that did not start is given to finish its stderr.
const STDERR_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// What a server is started from: its configuration, its working
/// directory and the workspace it may see (and whether it may write it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Launch {
    pub(crate) config: McpServerConfig,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) workspace: Option<(PathBuf, bool)>,
    /// The sandbox helper (`sandbox_helper`; `None`: this binary).
    pub(crate) helper: Option<PathBuf>,
}

/// Starts one server, its stdout's lines bounded by `line_bound`, and
/// lists its tools.
pub(crate) async fn connect(
    name: &str,
    launch: Launch,
    line_bound: usize,
) -> Result<(Arc<Connection>, Vec<rmcp::model::Tool>), LoadError> {
    let Launch { config, cwd, .. } = &launch;
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
    let mut read = Vec::new();
    for (i, path) in config.read.iter().enumerate() {
        read.push(PathBuf::from(expanded(path, &format_args!("read[{i}]"))?));
    }
    let (mut command, sandbox) = if config.sandbox {
        let (command, sandbox) = confined(name, &launch, &program, &args, env, read)?;
        (command, Some(sandbox))
    } else if !config.hosts.is_empty() {
        return Err(LoadError::McpServer(
            "`hosts` grants a confined server its network; with `sandbox = false` it would \
             reach every host, so the two are refused together"
                .into(),
        ));
    } else {
        tracing::warn!(
            server = %name,
            "`sandbox = false`: this MCP server runs unconfined, with your rights"
        );
        (unconfined(cwd.as_deref(), &program, &args, env), None)
    };
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut process = command
        .spawn()
        .map(|child| Process::new(child, sandbox))
        .map_err(|e| LoadError::McpServer(format!("cannot start {program:?}: {e}")))?;
    let child = &mut process.child;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(LoadError::McpServer(
            "its standard streams were not piped".into(),
        ));
    };
    let tail = Tail::default();
    let mut drained = tokio::spawn(drain_stderr(name.to_string(), stderr, tail.clone()));
    let handler = Handler {
        progress: ProgressDispatcher::new(),
        server: name.into(),
    };
    let bounded = Arc::new(Stdout::new(line_bound));
    // The reader's bound is the one: rmcp's own would drop a long line and
    // leave its request waiting.
    let transport = AsyncRwTransport::new_client(BoundedLines::new(stdout, bounded.clone()), stdin)
        .with_max_line_length(usize::MAX);
    let startup = startup_time(config);
    let started = tokio::time::timeout(startup, async {
        let service = handler
            .serve(transport)
            .await
            .map_err(|e| bounded.explain("the MCP handshake failed", &e))?;
        // rmcp would keep pages a server marks cacheable, unbounded by
        // `list_tools`'s bounds, and answer a later listing from them.
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let tools = list_tools(service.peer(), &bounded).await?;
        Ok::<_, String>((service, tools))
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "it did not start and list its tools within {} ms (startup_timeout_ms)",
            startup.as_millis()
        ))
    });
    let (service, listed) = match started {
        Ok(started) => started,
        Err(why) => {
            // What it said last says why, once its stderr is read to the
            // end (or for a moment, if it is still running).
            let _ = tokio::time::timeout(STDERR_WAIT, &mut drained).await;
            return Err(LoadError::McpServer(match tail.shown() {
                Some(said) => format!("{why}; its stderr ended with: {said}"),
                None => why,
            }));
        }
    };
    let version = service
        .peer_info()
        .and_then(|i| i.server_info.as_ref().map(|s| s.version.clone()))
        .unwrap_or_default();
    let connection = Connection {
        service,
        process: Some(process),
        started_from: launch,
        version,
        stdout: bounded,
    };
    Ok((Arc::new(connection), listed))
}

/// The server's command, run with the user's rights (`sandbox = false`):
/// only `PATH`, `HOME` and its configured variables in its environment.
fn unconfined(
    cwd: Option<&Path>,
    program: &str,
    args: &[String],
    env: BTreeMap<&String, String>,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command.args(args).env_clear();
    for var in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(var) {
            command.env(var, value);
        }
    }
    command.envs(env);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command
}

/// The server's command, confined: the workspace as `launch` grants it,
/// `read` and its working directory readable, the host's `PATH` and its
/// configured variables in its environment, `HOME` private, its `hosts`
/// through a proxy.
fn confined(
    name: &str,
    launch: &Launch,
    program: &str,
    args: &[String],
    env: BTreeMap<&String, String>,
    read: Vec<PathBuf>,
) -> Result<(tokio::process::Command, Sandbox), LoadError> {
    let refused = |e: Refused| {
        LoadError::McpServer(format!(
            "{e} (`sandbox = false` runs a server unconfined, with your rights)"
        ))
    };
    let helper = Helper::at(launch.helper.as_deref()).map_err(refused)?;
    let path = std::env::var_os("PATH");
    let program = if program.contains('/') {
        PathBuf::from(program)
    } else {
        find(program, path.as_deref())
            .ok_or_else(|| LoadError::McpServer(format!("{program:?} is not on PATH")))?
    };
    let cwd = (launch.config.cwd.clone())
        .or_else(|| launch.workspace.as_ref().map(|(w, _)| w.clone()))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let mut confinement = Confinement::new(&cwd);
    for path in read {
        confinement.read(path);
    }
    if let Some((workspace, writable)) = &launch.workspace {
        confinement.bind(workspace.clone(), workspace.clone(), *writable);
    }
    if !confinement.reaches(&cwd) {
        confinement.read(cwd);
    }
    if let Some(path) = path.and_then(|p| p.into_string().ok()) {
        confinement.env.insert("PATH".into(), path);
    }
    confinement
        .env
        .extend(env.into_iter().map(|(k, v)| (k.clone(), v)));
    let proxy = match launch.config.hosts.as_slice() {
        [] => None,
        hosts => {
            let policy = NetPolicy {
                requested: hosts.to_vec(),
                granted: hosts.to_vec(),
                safe_methods_only: false,
            };
            let name = name.to_string();
            let proxy = Proxy::start(Arc::new(move |method: &str, host: &str, port| {
                policy.check(method, host, Some(port)).map_err(|_| {
                    format!(
                        "{host}:{port} is not among the hosts granted to the MCP server {name} \
                         (`hosts = [...]` under [mcp_servers.{name}])"
                    )
                })?;
                proxied_port(&policy.granted, method, host, port)
            }))
            .map_err(|e| LoadError::McpServer(format!("cannot start its network proxy: {e}")))?;
            confinement.proxy = Some(proxy.socket());
            Some(proxy)
        }
    };
    let (command, root) = helper
        .command(&confinement, &program, args)
        .map_err(refused)?;
    let sandbox = Sandbox {
        _root: root,
        _proxy: proxy,
    };
    Ok((tokio::process::Command::from(command), sandbox))
}
