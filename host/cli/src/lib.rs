//! The `airlock` command line: a thin front end over [`airlock_host::Airlock`].
//!
//! It turns flags into a [`Config`], loads the host, and prints. It owns no
//! policy: every grant and limit it applies is one a configuration file
//! could set too.
//!
//! Exit codes: 0 success; 1 the call failed; 2 bad command line; 3 bad
//! configuration; 4 no such tool, or the tool is unavailable; 128 + the
//! signal's number when stopped by SIGTERM, SIGHUP or SIGINT (which `call`
//! and `run`, once started, take to cancel the call).

/// `println!` for what a command prints on stdout, through
/// [`render::say`]: a reader that went away (`airlock approve NAME | head
/// -1`) ends the output quietly instead of a panic.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::render::say(format_args!($($arg)*))
    };
}

mod approval;
mod args;
mod audit_cmd;
mod author;
mod config_cmd;
mod demo;
mod distribution;
mod doctor;
mod precompile;
mod progress;
mod project_tests;
mod prompt;
mod render;
mod run;
mod signals;
mod skill_distribution;

use airlock_host::Airlock;
use airlock_host::Config;
use airlock_host::ToolContext;
use airlock_host::WorkspaceAccess;
use airlock_host::config::{MountConfig, ToolConfig, default_contexts_dir, nearest_name};
use airlock_host::context_store::{Contexts, Files, Loaded};
use airlock_host::tool::{CancellationToken, ProgressSink};
use airlock_host::{AllowPrompter, DenyPrompter, PermissionPrompter};
use airlock_host::{CallControl, ToolUse};
use args::{Cli, Command};
use clap::Parser;
use signals::{handle_interrupt_here, interrupted_or, note_interrupt, stop_signal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit code: the call failed.
pub const EXIT_CALL_FAILED: u8 = 1;
/// Exit code: the configuration is unusable.
pub const EXIT_CONFIG: u8 = 3;
/// Exit code: no such tool, or it is unavailable.
pub const EXIT_NO_TOOL: u8 = 4;

/// Runs the command line; the binary's `main`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("airlock: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let code = runtime.block_on(async {
        tokio::select! {
            code = dispatch(cli) => code,
            (name, number) = stop_signal() => {
                eprintln!("airlock: {name}; stopping");
                ExitCode::from(128 + number)
            }
        }
    });
    // Drops what tasks still hold (an `airlock mcp` session's tools, and
    // with them the MCP servers started for them) without waiting on a
    // read of stdin that cannot be cancelled.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    code
}

/// How long the runtime's threads get to finish at exit.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Records the digest of the component now named `tool` as approved, after
/// showing what it is and asks for. Approval is about code, not grants: a
/// component that does not load under this command line's grants (an
/// update that asks for more than it gives) is approved by its file's
/// digest all the same, with the reason it is unavailable here.
fn approve(airlock: &Airlock, tool: &str) -> ExitCode {
    let Some(file) = airlock.config().effective_approvals_file() else {
        eprintln!(
            "airlock: there is no configuration directory (set HOME or XDG_CONFIG_HOME) to record approvals in"
        );
        return ExitCode::from(EXIT_CONFIG);
    };
    let (name, origin, digest) = match airlock.registry().get(tool) {
        Some(entry) => {
            let Some(digest) = entry.tool.digest() else {
                eprintln!(
                    "airlock: {} ({}) is not a component: there is no code to approve",
                    entry.descriptor().name,
                    entry.tool.origin()
                );
                return ExitCode::from(EXIT_NO_TOOL);
            };
            if let Err(e) = render::to_stdout(|out| render::describe(entry, false, out)) {
                return printed(Err(e));
            }
            (
                entry.descriptor().name.clone(),
                entry.tool.origin().to_string(),
                digest.to_string(),
            )
        }
        None => match unavailable_component(airlock, tool) {
            Ok(found) => found,
            Err(code) => return code,
        },
    };
    match airlock_host::approvals::Approvals::record(&file, &name, &digest) {
        Ok(()) => {
            say!(
                "approved {name} from {origin}: BLAKE3 {digest}, recorded in {}",
                file.display()
            );
            let fields = audit_cmd::fields([
                ("tool", name.into()),
                ("origin", origin.into()),
                ("digest", digest.into()),
                ("decided_by", "airlock approve".into()),
            ]);
            if let Err(e) = airlock.audit("approval", fields) {
                return author::fail(format!("the approval is not in the audit trail: {e:#}"));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "airlock: cannot record the approval in {}: {e}",
                file.display()
            );
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// The name, origin and digest of the component file that says it is
/// `tool` but does not load here, after saying why; or the exit code when
/// there is none.
fn unavailable_component(
    airlock: &Airlock,
    tool: &str,
) -> Result<(String, String, String), ExitCode> {
    let named: Vec<_> = airlock
        .registry()
        .failures()
        .iter()
        .filter(|f| f.tool.as_deref() == Some(tool))
        .collect();
    if let [_, _, ..] = named.as_slice() {
        let origins: Vec<String> = named.iter().map(|f| f.origin.to_string()).collect();
        eprintln!(
            "airlock: several components say they are {tool} and none loads here ({}): keep \
             one, or name its file ([tools.{tool}] source = \"...\"), then approve it",
            origins.join(", ")
        );
        return Err(ExitCode::from(EXIT_NO_TOOL));
    }
    let Some((failure, path)) = named.first().and_then(|f| match &f.origin {
        airlock_host::ToolOrigin::File(path) => Some((f, path)),
        _ => None,
    }) else {
        return Err(no_such_tool(airlock, tool));
    };
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("airlock: cannot read {}: {e}", path.display());
        ExitCode::from(EXIT_NO_TOOL)
    })?;
    say!(
        "{tool} ({}) does not load here: {}\n\
         its code is approved all the same; a host where it loads serves it",
        failure.origin,
        failure.error
    );
    Ok((
        tool.to_string(),
        failure.origin.to_string(),
        blake3::hash(&bytes).to_hex().to_string(),
    ))
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::prelude::*;
    // `-v` and `-vv` raise Airlock's own crates (every target that starts
    // with `airlock`); the libraries beneath stay at warnings (a first
    // compile's cranelift debug lines alone run to 900,000), unless
    // AIRLOCK_LOG names them. Compiling a tool is said even without `-v`:
    // a first start compiles each for seconds.
    let default = match verbose {
        0 => format!("warn,{}=info", airlock_host::COMPILE_LOG),
        1 => "warn,airlock=info".into(),
        _ => "warn,airlock=debug".into(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    // Colours only for a terminal: a log written to a file or a pipe gets
    // no escape codes.
    let ansi = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // A log line that cannot be written (stderr a closed pipe: a client
    // that read the first line and went) is dropped: the subscriber's
    // own report of it would panic, and in a compiler thread that failed
    // every compile.
    let lines = tracing_subscriber::fmt::layer()
        .log_internal_errors(false)
        .with_ansi(ansi)
        .with_target(false);
    let _ = if terminal {
        // A spinner per compile, and the other lines above the spinners.
        let bars = indicatif::MultiProgress::new();
        let not_compiles = tracing_subscriber::filter::filter_fn(|meta| {
            meta.target() != airlock_host::COMPILE_LOG
        });
        tracing_subscriber::registry()
            .with(filter)
            .with(
                lines
                    .with_writer(progress::AboveBars(bars.clone()))
                    .with_filter(not_compiles),
            )
            .with(progress::CompileBars::new(bars))
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(filter)
            .with(lines.with_writer(std::io::stderr))
            .try_init()
    };
}

async fn dispatch(cli: Cli) -> ExitCode {
    match &cli.command {
        Command::Demo => return demo::play().await,
        Command::New { name, lang, dir } => return author::new(*lang, name, dir.as_deref()),
        Command::Keygen { path } => return distribution::keygen(path),
        Command::Completions { shell } => return printed(args::completions(*shell)),
        Command::Man => return printed(args::man_page()),
        _ => {}
    }
    let config = match config_from(&cli) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("airlock: {message}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match &cli.command {
        Command::Build { dir } => return author::build(dir, config).await,
        Command::Doctor => return doctor::doctor(&config),
        Command::Precompile { dir } => return precompile::precompile(dir.as_deref(), config).await,
        Command::Audit { action } => return audit_cmd::run(action, &config),
        Command::Config => {
            let file = match &cli.config {
                Some(path) => Config::from_file(path),
                None => Config::discover(),
            };
            return match file {
                Ok(file) => config_cmd::show(&config, &file),
                Err(e) => author::fail(e),
            };
        }
        Command::Test { dir } => return project_tests::test(dir, config).await,
        Command::Install {
            source,
            locked,
            registry,
        } => {
            return match source.as_deref() {
                Some(file) if !file.starts_with("oci://") && !locked => {
                    distribution::install_file(Path::new(file), config).await
                }
                reference => {
                    let args = distribution::InstallArgs {
                        reference,
                        yes: cli.yes,
                        locked: *locked,
                        options: registry.options(),
                    };
                    distribution::install(args, config).await
                }
            };
        }
        Command::Publish {
            file,
            reference,
            sign,
            registry,
        } => {
            let options = registry.options();
            return distribution::publish(file, reference, sign.as_deref(), options, config).await;
        }
        Command::Tools => return distribution::tools(&config),
        Command::Remove { name } => return distribution::remove(&config, name),
        _ => {}
    }
    #[cfg(feature = "mcp")]
    let serves_mcp = matches!(cli.command, Command::Mcp { .. });
    #[cfg(feature = "mcp")]
    if matches!(cli.command, Command::Mcp { http: None, .. })
        && config.audit.enabled
        && config.audit.path == Some(airlock_host::config::AuditSink::Stdout)
    {
        eprintln!(
            "airlock: [audit] path = \"-\" writes the trail to standard output, which `airlock \
             mcp` speaks MCP on: give it a file or a collector's socket (unix:PATH), or serve \
             with --http"
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    #[cfg(feature = "mcp")]
    let auth = config.auth.clone();
    #[cfg(not(feature = "mcp"))]
    let serves_mcp = false;
    // A server answers its client at once: the bundled tools are listed
    // from this build's record of them and compiled in the background, and
    // a component never compiled before is listed once it is.
    let opened = if serves_mcp {
        Airlock::open(config).await
    } else {
        Airlock::new(config).await
    };
    let airlock = match opened {
        Ok(a) => a,
        Err(e) => {
            eprintln!("airlock: {e:#}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    warn_of_unknown_tools(&airlock);
    let prompter: Arc<dyn PermissionPrompter> = if cli.yes {
        Arc::new(AllowPrompter)
    } else if serves_mcp {
        // The MCP client owns the terminal: it is asked by elicitation.
        Arc::new(DenyPrompter)
    } else {
        Arc::new(prompt::TerminalPrompter::default())
    };
    let airlock = airlock.with_prompter(prompter);
    match cli.command {
        Command::List {
            format: Some(format),
            ..
        } => printed(render::to_stdout(|out| {
            render::definitions(&airlock, format, out)
        })),
        Command::List { json, .. } => {
            printed(render::to_stdout(|out| render::list(&airlock, json, out)))
        }
        Command::Describe { tool, json } => describe(&airlock, &tool, json),
        Command::Approve { tool } => approve(&airlock, &tool),
        Command::Call {
            tool,
            input,
            json,
            fresh,
        } => call(&airlock, &tool, &input, json, fresh).await,
        Command::Run {
            input,
            replay_timing,
            timeline,
        } => match run::uses_from(&airlock, &input, replay_timing, timeline.as_deref()).await {
            Ok(true) => interrupted_or(ExitCode::SUCCESS),
            Ok(false) => interrupted_or(ExitCode::from(EXIT_CALL_FAILED)),
            Err(message) => {
                eprintln!("airlock: {message}");
                ExitCode::from(2)
            }
        },
        #[cfg(feature = "mcp")]
        Command::Mcp {
            http,
            max_connections,
            header_timeout,
            idle_timeout,
            drain_secs,
            max_sessions,
            max_sessions_per_caller,
            server_names,
            insecure_no_auth,
        } => {
            if http.is_some() && server_names.is_empty() && !cli.allow_hosts.is_empty() {
                // After `mcp` it once named the Host header.
                eprintln!(
                    "airlock: note: --allow-host {} grants the tools the network; the names \
                     clients reach this server by (the Host header) are --server-name NAME",
                    cli.allow_hosts.join(" --allow-host ")
                );
            }
            let auth = match (&auth, http) {
                (Some(auth), Some(_)) => match airlock_mcp::auth::Authenticator::new(auth).await {
                    Ok(auth) => {
                        let auth = Arc::new(auth);
                        let warming = auth.clone();
                        tokio::spawn(async move { warming.warm().await });
                        Some(auth)
                    }
                    Err(e) => {
                        eprintln!("airlock: {e:#}");
                        return ExitCode::from(EXIT_CONFIG);
                    }
                },
                (None, Some(addr)) if !addr.ip().is_loopback() && !insecure_no_auth => {
                    eprintln!(
                        "airlock: {addr} is not a loopback address, and no [auth] is configured: \
                         anyone who reaches it could call the tools. Configure [auth] in \
                         airlock.toml (OAuth access tokens), or pass --insecure-no-auth if \
                         something in front of it authenticates"
                    );
                    return ExitCode::from(EXIT_CONFIG);
                }
                _ => None,
            };
            let host = airlock_mcp::McpHost::new(airlock);
            let served = match http {
                None => host.serve_stdio().await,
                Some(addr) => match tokio::net::TcpListener::bind(addr).await {
                    Ok(listener) => {
                        if !addr.ip().is_loopback() && auth.is_none() {
                            eprintln!(
                                "airlock: warning: {addr} is not a loopback address and \
                                 --insecure-no-auth is given: anyone who can reach it can call \
                                 the tools"
                            );
                        }
                        if let Ok(bound) = listener.local_addr() {
                            eprintln!("airlock: serving MCP on http://{bound}/mcp");
                        }
                        let options = airlock_mcp::HttpOptions {
                            max_connections: max_connections as usize,
                            header_timeout: Duration::from_secs(header_timeout),
                            session_idle: (idle_timeout > 0)
                                .then(|| Duration::from_secs(idle_timeout)),
                            max_sessions: max_sessions as usize,
                            max_caller_sessions: max_sessions_per_caller.map(|n| n as usize),
                            allowed_hosts: server_names,
                            auth,
                            shutdown: signals::drain_on_terminate(),
                            drain_grace: Duration::from_secs(drain_secs),
                        };
                        let served = host.serve_http(listener, &options).await;
                        if served.is_ok() && options.shutdown.is_cancelled() {
                            return ExitCode::from(128 + 15);
                        }
                        served
                    }
                    Err(e) => {
                        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                            " (another program uses the port: pick another, or 0 for any)"
                        } else {
                            ""
                        };
                        eprintln!("airlock: cannot listen on {addr}: {e}{hint}");
                        return ExitCode::from(EXIT_CONFIG);
                    }
                },
            };
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("airlock: the MCP server failed: {e:#}");
                    ExitCode::from(EXIT_CALL_FAILED)
                }
            }
        }
        Command::Demo
        | Command::New { .. }
        | Command::Build { .. }
        | Command::Install { .. }
        | Command::Publish { .. }
        | Command::Keygen { .. }
        | Command::Doctor
        | Command::Config
        | Command::Precompile { .. }
        | Command::Audit { .. }
        | Command::Test { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Tools
        | Command::Remove { .. } => {
            unreachable!("handled above")
        }
    }
}

/// Warns of each `[tools.NAME]` that names no tool (`[tools.fecth]`): its
/// grants would apply to nothing, silently. Not while components are still
/// to be listed (a server's first moments), when a name may yet appear.
fn warn_of_unknown_tools(airlock: &Airlock) {
    let registry = airlock.registry();
    if !registry.unlisted().is_empty() {
        return;
    }
    let known = registry.known_names();
    let file = airlock.config().source.as_ref().map_or_else(
        || "the configuration".to_string(),
        |p| p.display().to_string(),
    );
    for name in airlock.config().tools.keys() {
        if name == "*" || known.contains(name) {
            continue;
        }
        let near = nearest_name(name, known.iter().map(String::as_str))
            .map(|k| format!(" (did you mean [tools.{k}]?)"))
            .unwrap_or_default();
        eprintln!(
            "airlock: warning: [tools.{name}] in {file} names no tool{near}; its settings apply \
             to nothing"
        );
    }
}

/// `dir`'s `airlock.toml` when there is one and it is not the file
/// `config` was read from (a project's own is never read implicitly).
fn unread_project_config(config: &Config, dir: &Path) -> Option<PathBuf> {
    let here = dir.join("airlock.toml");
    let read = |p: &Path| p.canonicalize().ok();
    (here.is_file() && config.source.as_deref().and_then(read) != read(&here)).then_some(here)
}

/// The configuration: the file, then the flags on top.
fn config_from(cli: &Cli) -> Result<Config, String> {
    let mut config = match &cli.config {
        Some(path) => Config::from_file(path),
        None => Config::discover(),
    }
    .map_err(|e| e.to_string())?;
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    if let Some(here) = unread_project_config(&config, &cwd) {
        eprintln!(
            "airlock: warning: {} is not read (a project's own configuration never grants \
             itself anything); to use it, pass --config {}",
            here.display(),
            here.display()
        );
    }
    let absolute = |p: &PathBuf| {
        if p.is_absolute() {
            p.clone()
        } else {
            cwd.join(p)
        }
    };
    if !cli.tool_dirs.is_empty() {
        // A directory named on the command line must be there: a typo
        // would otherwise load nothing from it, and say so only as an
        // unavailable "tool".
        if let Some(missing) = cli.tool_dirs.iter().find(|d| !d.is_dir()) {
            return Err(format!(
                "--tools {}: there is no such directory",
                missing.display()
            ));
        }
        let mut dirs = config.effective_tool_dirs();
        dirs.extend(cli.tool_dirs.iter().map(absolute));
        config.tool_dirs = Some(dirs);
    }
    if cli.no_bundled {
        config.bundled_tools = false;
    }
    if let Some(ws) = &cli.workspace {
        config.workspace = Some(absolute(ws));
    }
    if cli.read_only {
        config.workspace_access = WorkspaceAccess::Read;
    }
    if let Some(ms) = cli.timeout_ms {
        config.limits.timeout_ms = ms;
    }
    for file in &cli.settings {
        let notes = airlock_host::config::settings::merge(&mut config, &absolute(file))
            .map_err(|e| e.to_string())?;
        for note in notes {
            tracing::info!("{note}");
        }
    }
    if let Some(mode) = cli.mode {
        config.permissions.default_mode = mode;
    }
    let all: &mut ToolConfig = config.tools.entry("*".into()).or_default();
    all.network.extend(cli.allow_hosts.iter().cloned());
    all.env.extend(cli.allow_env.iter().cloned());
    for (dirs, access) in [
        (&cli.mounts, WorkspaceAccess::Read),
        (&cli.mounts_rw, WorkspaceAccess::ReadWrite),
    ] {
        all.mounts.extend(dirs.iter().map(|d| MountConfig {
            host: absolute(d),
            path: None,
            access,
        }));
    }
    if !cli.allow_programs.is_empty() {
        let shell = config.tools.entry("bash".into()).or_default();
        shell.programs.extend(cli.allow_programs.iter().cloned());
    }
    Ok(config)
}

/// The exit code of a command whose work was printing: 0, or 1 when the
/// output could not be written (a closed pipe is fine: see
/// [`render::to_stdout`]).
fn printed(written: Result<(), String>) -> ExitCode {
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("airlock: {message}");
            ExitCode::from(EXIT_CALL_FAILED)
        }
    }
}

/// `airlock describe`: a tool offered, or one refused its grants (what it
/// asks for, then why it is unavailable, exiting as for no tool).
fn describe(airlock: &Airlock, name: &str, json: bool) -> ExitCode {
    let registry = airlock.registry();
    if let Some(entry) = registry.get(name) {
        return printed(render::to_stdout(|out| render::describe(entry, json, out)));
    }
    let Some((tool, failure)) = registry.refused(name) else {
        return no_such_tool(airlock, name);
    };
    let why = failure.error.to_string();
    match render::to_stdout(|out| render::describe_refused(tool.as_ref(), &why, json, out)) {
        Ok(()) => ExitCode::from(EXIT_NO_TOOL),
        failed => printed(failed),
    }
}

fn no_such_tool(airlock: &Airlock, name: &str) -> ExitCode {
    let failure = airlock
        .registry()
        .failures()
        .iter()
        .find(|f| f.tool.as_deref() == Some(name));
    match failure {
        Some(f) => eprintln!("airlock: {name} is unavailable: {}", f.error),
        None if name == "tool_search" => eprintln!(
            "airlock: tool_search is offered only when some tools are deferred (listed by name \
             until searched for: defer_loading, or many tools), or with tool_search = \"on\" in \
             airlock.toml"
        ),
        None => {
            let known: Vec<_> = airlock
                .registry()
                .entries()
                .iter()
                .map(|e| e.descriptor().name.clone())
                .collect();
            eprintln!(
                "airlock: no tool is named {name:?}; the tools are: {}",
                known.join(", ")
            );
        }
    }
    ExitCode::from(EXIT_NO_TOOL)
}

async fn call(airlock: &Airlock, tool: &str, input: &str, json: bool, fresh: bool) -> ExitCode {
    if airlock.registry().get(tool).is_none() {
        return no_such_tool(airlock, tool);
    }
    let text = if input == "-" {
        let mut buf = String::new();
        let mut stdin = tokio::io::stdin();
        let read = tokio::io::AsyncReadExt::read_to_string(&mut stdin, &mut buf);
        if let Err(e) = read.await {
            eprintln!("airlock: cannot read the input from stdin: {e}");
            return ExitCode::from(2);
        }
        buf
    } else {
        input.to_string()
    };
    let bounds = airlock_host::json::JsonBounds {
        max_bytes: airlock.grants().limits().input_bytes,
        max_depth: airlock.grants().limits().json_depth,
    };
    let input = match airlock_host::json::parse(&text, bounds) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("airlock: the input is not usable JSON: {e}");
            return ExitCode::from(2);
        }
    };

    let (progress, mut events) = ProgressSink::channel(64);
    let printer = tokio::spawn(async move {
        let mut shown = render::Throttle::for_stderr();
        while let Some(event) = events.recv().await {
            if shown.admits() {
                eprintln!("{}", render::progress_line(&event));
            }
        }
    });
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    handle_interrupt_here();
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("airlock: interrupted; cancelling the call");
            note_interrupt();
            on_interrupt.cancel();
        }
    });
    let mut cx = airlock.context();
    let kept = match kept_context(airlock, &mut cx, fresh).await {
        Ok(kept) => kept,
        Err(e) => {
            eprintln!(
                "airlock: the workspace's context cannot be kept ({e}); this call starts from a fresh one"
            );
            None
        }
    };
    let result = airlock
        .call_with(
            &mut cx,
            ToolUse::new("cli-1", tool, input),
            CallControl { progress, cancel },
        )
        .await;
    interrupt.abort();
    let _ = printer.await;
    if let Some((contexts, loaded)) = kept
        && let Err(e) = contexts.save(loaded, &cx).await
    {
        eprintln!("airlock: the context was not kept for the next call: {e}");
    }

    let written = render::to_stdout(|out| render::result(&result, json, out));
    if written.is_err() {
        return printed(written);
    }
    let no_directories = result
        .outcome
        .as_ref()
        .is_err_and(|e| e.message.contains("granted no directories"));
    if no_directories && !json && airlock.config().workspace.is_none() {
        eprintln!("hint: give the tool a directory with --workspace DIR (or --mount DIR)");
    }
    interrupted_or(if result.is_error() {
        ExitCode::from(EXIT_CALL_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The workspace's context, kept between `airlock call`s (as an MCP
/// client's default context is between its calls), restored into `cx`: the
/// cwd, the variables tools set and the reads `edit` checks. `fresh`
/// forgets it first. `None` without a place to keep it (no `HOME`).
async fn kept_context(
    airlock: &Airlock,
    cx: &mut ToolContext,
    fresh: bool,
) -> Result<Option<(Contexts, Loaded)>, String> {
    let Some(dir) = default_contexts_dir() else {
        return Ok(None);
    };
    let ttl = Duration::from_secs(airlock.config().contexts.ttl_secs.max(1));
    let contexts = Contexts::new(
        Arc::new(Files::new(dir)),
        ttl,
        "the command line's contexts",
    );
    let workspace = airlock.config().workspace.as_ref();
    let owner = workspace.map_or_else(|| "no workspace".to_string(), |w| w.display().to_string());
    if fresh {
        contexts
            .forget_default(Some(&owner))
            .await
            .map_err(|e| e.to_string())?;
    }
    let loaded = contexts
        .load_default(cx, Some(&owner))
        .await
        .map_err(|e| e.to_string())?;
    Ok(Some((contexts, loaded)))
}
