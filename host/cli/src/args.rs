//! The command line's arguments: the global flags ([`Cli`]), the
//! subcommands ([`Command`]) and their help, which `completions` and `man`
//! render for shells and `man`.

use crate::{author, render};
use airlock_host::PermissionMode;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// What `--version` says: the version, the commit and its date, the
/// wasmtime it runs on and the features built in (`-V` gives the first).
static LONG_VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let features: Vec<&str> = [
        (cfg!(feature = "mcp"), "mcp"),
        (cfg!(feature = "mcp-client"), "mcp-client"),
        (cfg!(feature = "bundled-tools"), "bundled-tools"),
        (cfg!(target_os = "linux"), "native-programs"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    format!(
        "{} ({})\nwasmtime {}\nfeatures: {}",
        env!("CARGO_PKG_VERSION"),
        env!("AIRLOCK_BUILD_COMMIT"),
        env!("AIRLOCK_BUILD_WASMTIME"),
        features.join(", ")
    )
});

/// Shown after the options in `--help`.
const EXAMPLES: &str = "Examples:
  airlock demo                                   a tour of the bundled tools
  airlock --workspace . list                     the tools, and what each asks for
  airlock --workspace . call read '{\"file_path\": \"README.md\"}'
  airlock --workspace . --allow-program git call bash '{\"command\": \"git status\"}'
  airlock --workspace . mcp                      serve them to an MCP client on stdio
  claude mcp add airlock -- airlock --workspace \"$PWD\" mcp
  airlock completions bash > ~/.local/share/bash-completion/completions/airlock

Exit codes: 0 success; 1 the call failed; 2 bad command line; 3 bad configuration;
4 no such tool, or it is unavailable; 128 + N stopped by signal N (130: Ctrl-C).
Configuration: ~/.config/airlock/airlock.toml (README.md has every key).";

/// Airlock runs the tools of AI agents sandboxed: each tool a WebAssembly
/// component confined to the directories, hosts and variables it is
/// granted; granted native programs and MCP servers confined by the same
/// grants.
#[derive(Debug, Parser)]
#[command(
    name = "airlock",
    version,
    long_version = LONG_VERSION.as_str(),
    about = "Runs the tools of AI agents sandboxed (WebAssembly components; granted native programs confined)",
    long_about = None,
    after_help = "Examples: airlock demo; airlock --workspace . list; airlock --workspace . mcp (more with --help)",
    after_long_help = EXAMPLES,
)]
pub(crate) struct Cli {
    /// The configuration file (default: $AIRLOCK_CONFIG, else ~/.config/airlock/airlock.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Merge the permission rules, mode and hooks of a Claude Code settings file (repeatable; later files win).
    #[arg(long = "settings", global = true, value_name = "FILE")]
    pub(crate) settings: Vec<PathBuf>,
    /// Also load the *.wasm tools in DIR (repeatable).
    #[arg(long = "tools", global = true, value_name = "DIR")]
    pub(crate) tool_dirs: Vec<PathBuf>,
    /// Do not offer the tools built into this binary.
    #[arg(long, global = true)]
    pub(crate) no_bundled: bool,
    /// Grant DIR as the workspace (read-write, unless --read-only).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Grant the workspace read-only.
    #[arg(long, global = true)]
    pub(crate) read_only: bool,
    /// Let tools that ask for it reach HOST over HTTP (`name`, `*.name`, `name:port`; repeatable).
    #[arg(long = "allow-host", global = true, value_name = "HOST", value_parser = host_pattern)]
    pub(crate) allow_hosts: Vec<String>,
    /// Let tools that ask for it read the environment variable NAME (repeatable).
    #[arg(long = "allow-env", global = true, value_name = "NAME", value_parser = env_name)]
    pub(crate) allow_env: Vec<String>,
    /// Let `bash` run the native program NAME (on PATH, or a path), confined
    /// by each call's grants (repeatable; Linux).
    #[arg(long = "allow-program", global = true, value_name = "NAME")]
    pub(crate) allow_programs: Vec<String>,
    /// Grant DIR read-only to tools that ask for file access (repeatable).
    #[arg(long = "mount", global = true, value_name = "DIR")]
    pub(crate) mounts: Vec<PathBuf>,
    /// Grant DIR read-write to tools that ask for it (repeatable).
    #[arg(long = "mount-rw", global = true, value_name = "DIR")]
    pub(crate) mounts_rw: Vec<PathBuf>,
    /// The time limit of a call, in milliseconds (at least 1).
    #[arg(long, global = true, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) timeout_ms: Option<u64>,
    /// The permission mode: default, acceptEdits, plan, bypassPermissions or dontAsk.
    #[arg(long, global = true, value_name = "MODE")]
    pub(crate) mode: Option<PermissionMode>,
    /// Answer yes to every permission prompt, and approve what `airlock install` shows a tool asks for.
    #[arg(long, global = true)]
    pub(crate) yes: bool,
    /// Log more of Airlock's own work (-v info, -vv debug; AIRLOCK_LOG for any library's); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How to reach an OCI registry.
#[derive(Debug, clap::Args)]
pub(crate) struct RegistryArgs {
    /// Reach the registry over plain HTTP: only for one on a loopback address (a local test registry).
    #[arg(long)]
    insecure_registry: bool,
    /// The most one registry operation may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    registry_timeout: u64,
}

impl RegistryArgs {
    pub(crate) fn options(&self) -> airlock_oci::Options {
        airlock_oci::Options {
            insecure: self.insecure_registry,
            timeout: Duration::from_secs(self.registry_timeout.max(1)),
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Lists the tools, their flags and what they ask for.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Print the tool definitions an API takes (a JSON array), and on stderr what each
        /// API would refuse or why a schema cannot be strict.
        #[arg(long, value_enum, conflicts_with = "json")]
        format: Option<render::Format>,
    },
    /// Shows one tool in full: prompt, schema, flags, grants.
    Describe {
        /// The tool's name or alias.
        tool: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approves the code now in place for a tool.
    ///
    /// A running `airlock mcp` serves a component that changed under it
    /// only once its new digest is approved. No grants need restating: a
    /// component that does not load under this command line's grants is
    /// approved all the same.
    Approve {
        /// The tool's name or alias.
        tool: String,
    },
    /// Calls a tool once, with INPUT as its JSON input ('-' reads it from stdin).
    Call {
        /// The tool's name or alias.
        tool: String,
        /// The input, a JSON object.
        input: String,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
        /// Start from a fresh context: forget the cwd, variables and reads
        /// that earlier calls in this workspace left (each workspace keeps
        /// one between calls, as an agent's loop does).
        #[arg(long)]
        fresh: bool,
    },
    /// Runs a file of tool uses, printing one JSON result per line.
    ///
    /// The input is JSON lines (`{"name": ..., "input": ...}`), or a
    /// recorded Anthropic event stream; the uses go through the streaming
    /// executor as a model's would, and the results come out in order.
    Run {
        /// The input file ('-' for stdin).
        #[arg(default_value = "-")]
        input: String,
        /// Feed each line at its `t_ms`, as the model streamed it.
        #[arg(long)]
        replay_timing: bool,
        /// Write queued/started/finished events, as JSON lines, to FILE.
        #[arg(long, value_name = "FILE")]
        timeline: Option<PathBuf>,
    },
    /// Runs a scripted tour of the bundled tools over a temporary copy of a sample workspace.
    Demo,
    /// Creates a tool project in ./NAME, outside any Airlock checkout.
    New {
        /// The tool's name (a-z, 0-9, '-' and '_', starting with a letter).
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: author::Lang,
        /// Create it in DIR instead of ./NAME.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Builds the tool project in DIR to DIR/NAME.wasm, checking that it loads.
    Build {
        /// The project's directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Runs the tool project's tests.jsonl against its built component.
    ///
    /// Each line is a call and what it must give, e.g. {"input": {"text":
    /// "a b"}, "expect": {"text": "2 words"}}; `expect` holds `text`,
    /// `contains`, `structured` or `error` (a class, e.g. invalid_input),
    /// and `files` fills the call's fresh workspace. Each call runs in the
    /// real sandbox, alone, with permissions answered yes.
    Test {
        /// The project's directory (its one *.wasm is the component).
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Installs a tool (a component file, or oci://...) in your tool directory.
    ///
    /// It is checked to load first, and goes in as NAME.wasm. From an OCI
    /// registry (oci://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST), its
    /// signature is checked against [[trust]] in airlock.toml; it is pulled
    /// by digest, reviewed (what it asks for, what it would be granted) and
    /// pinned in airlock.lock. A skill from a registry goes in your skills
    /// directory, reviewed (its scripts, what an update changes) and pinned
    /// the same way.
    Install {
        /// The component file, or an oci:// reference (none with --locked: every tool airlock.lock pins). Needs --yes when not on a terminal.
        #[arg(required_unless_present = "locked")]
        source: Option<String>,
        /// Change nothing in airlock.lock: install what it pins, exactly (a tag must still resolve to the pinned digest).
        #[arg(long)]
        locked: bool,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pushes a component or a skill's folder to an OCI registry, signed with --sign.
    ///
    /// The reference is oci://REGISTRY/REPOSITORY:TAG; the component is
    /// checked to load first (a skill, to be one). Credentials come from
    /// AIRLOCK_REGISTRY_USERNAME and AIRLOCK_REGISTRY_PASSWORD, or Docker's
    /// credential file.
    Publish {
        /// The component, or a skill's folder.
        file: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        reference: String,
        /// Sign it with this private key (PEM, P-256, as `airlock keygen` writes it, or as `cosign generate-key-pair` does, opened with COSIGN_PASSWORD or, unset, the password asked for at the terminal): a cosign signature beside it in the registry.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Makes a key pair for signing tools.
    ///
    /// PATH is the private key (readable only by you), PATH.pub the public
    /// one, for operators' [[trust]] keys.
    Keygen {
        /// Where to write the private key.
        path: PathBuf,
    },
    /// Lists the tools and skills installed from registries, and whether each is as pinned.
    ///
    /// For each: where from, at which digest, and whether its file is
    /// still as airlock.lock pins it.
    Tools,
    /// Removes an installed tool or skill, and its entry in airlock.lock.
    Remove {
        /// The tool's name.
        name: String,
    },
    /// Prints the configuration in effect, each key with where it comes from.
    ///
    /// The file read (and the settings files it merges), then every key as
    /// the host holds it, marked `command line`, the file's path, or
    /// `default`.
    Config,
    /// Checks what this machine and configuration give Airlock, a line each.
    ///
    /// The configuration read, the tool directories and the lock, the
    /// artifact cache, whether native programs can be confined here, and the
    /// toolchains `airlock build` uses; each line that is not `ok` says what
    /// to do.
    Doctor,
    /// Compiles every tool the configuration loads, ahead of their first start.
    ///
    /// Into DIR, else the configured `precompiled_dir`: a container image's
    /// build runs it, so its first start compiles nothing. A host reads the
    /// directory (its `precompiled_dir`) after its own cache and never
    /// writes it; an entry made for another CPU or configuration is
    /// compiled again, into the host's own cache.
    Precompile {
        /// Where to put the compiled tools (created private to you).
        dir: Option<PathBuf>,
    },
    /// Verifies or shows the audit trail ([audit] in airlock.toml).
    ///
    /// `verify` walks the hash chain and the signed checkpoints and names
    /// the first record that does not hold; `show` prints the records,
    /// filtered. Both read the configured trail (with the files it was
    /// rotated into) unless files are given.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Prints a completion script for SHELL (bash, zsh, fish, elvish, powershell).
    ///
    /// For bash: `airlock completions bash >
    /// ~/.local/share/bash-completion/completions/airlock`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Prints the manual page (roff): `airlock man | man -l -`.
    Man,
    /// Serves the tools over the Model Context Protocol (stdio, or --http).
    ///
    /// On stdin/stdout until stdin closes, or over Streamable HTTP with
    /// --http.
    #[cfg(feature = "mcp")]
    Mcp {
        /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio. ADDR is a port (on 127.0.0.1) or IP:PORT; port 0 picks one.
        #[arg(long, value_name = "ADDR", value_parser = http_addr)]
        http: Option<std::net::SocketAddr>,
        /// With --http: connections served at once once they have sent a request the server takes; more wait until one closes. As many (at most 256) may be open without having sent one; past that the oldest of those is closed.
        #[arg(long, value_name = "N", default_value_t = 1024, requires = "http",
              value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
        /// With --http: close a connection whose request head has not arrived within SECS of its start or of its last reply.
        #[arg(long, value_name = "SECS", default_value_t = 30, requires = "http",
              value_parser = clap::value_parser!(u64).range(1..))]
        header_timeout: u64,
        /// With --http: end a session after SECS without a request (0: never).
        #[arg(long, value_name = "SECS", default_value_t = 300, requires = "http")]
        idle_timeout: u64,
        /// With --http: on SIGTERM, stop taking requests (/ready answers 503) and give the calls in flight up to SECS to finish before exiting.
        #[arg(long, value_name = "SECS", default_value_t = 20, requires = "http")]
        drain_secs: u64,
        /// With --http: sessions open at once; a client that would open one more gets a 503 saying so.
        #[arg(long, value_name = "N", default_value_t = 1024, requires = "http",
              value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions: u32,
        /// With --http and access tokens: sessions one caller (a token's subject and client) may have open at once; one more gets a 503 saying so. Default: a quarter of --max-sessions.
        #[arg(long, value_name = "N", requires = "http",
              value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions_per_caller: Option<u32>,
        /// With --http: a name clients reach the server by (the Host header), beside 127.0.0.1, localhost and ::1: the name of a load balancer or Service. Repeat for more. Other Host headers get 403 (DNS rebinding).
        #[arg(long = "server-name", value_name = "NAME", requires = "http")]
        server_names: Vec<String>,
        /// With --http on an address other than loopback: serve without requiring access tokens ([auth] in airlock.toml), so anyone who reaches the address can call the tools.
        #[arg(long, requires = "http")]
        insecure_no_auth: bool,
    },
}

/// `--allow-host`: a host pattern; a URL is refused naming its host.
fn host_pattern(value: &str) -> Result<String, String> {
    use airlock_host::descriptor::is_host_pattern;
    if is_host_pattern(value) {
        return Ok(value.to_string());
    }
    let host = value
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(rest))
        .filter(|host| is_host_pattern(host));
    Err(match host {
        Some(host) => format!("give a host, not a URL: --allow-host {host}"),
        None => "not a host pattern (`name`, `*.name`, `name:port`, `*`)".into(),
    })
}

/// `--allow-env`: an environment variable's name.
fn env_name(value: &str) -> Result<String, String> {
    if airlock_host::descriptor::is_env_name(value) {
        Ok(value.to_string())
    } else {
        Err(
            "not an environment variable's name (letters, digits and `_`, not first a digit)"
                .into(),
        )
    }
}

/// `airlock completions SHELL`: the shell's completion script, on stdout.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<(), String> {
    let mut command = <Cli as clap::CommandFactory>::command();
    // Into memory first: the generator panics on a write that fails (a
    // reader gone), and `to_stdout` takes that quietly.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "airlock", &mut script);
    render::to_stdout(|out| out.write_all(&script))
}

/// `airlock man`: the manual page, as roff, on stdout.
pub(crate) fn man_page() -> Result<(), String> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .map_err(|e| format!("cannot render the manual page: {e}"))?;
    render::to_stdout(|out| out.write_all(&page))
}

/// `--http`: a port alone means loopback.
#[cfg(feature = "mcp")]
fn http_addr(value: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = value.parse::<u16>() {
        return Ok((std::net::Ipv4Addr::LOCALHOST, port).into());
    }
    value
        .parse()
        .map_err(|_| format!("{value:?} is neither a port nor IP:PORT"))
}

#[cfg(all(test, feature = "mcp"))]
mod tests {
    use super::http_addr;

    #[test]
    fn a_port_alone_serves_on_loopback() {
        assert_eq!(http_addr("8123").unwrap().to_string(), "127.0.0.1:8123");
        assert_eq!(http_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(http_addr("[::1]:9").unwrap().to_string(), "[::1]:9");
        assert!(http_addr("localhost:80").unwrap_err().contains("IP:PORT"));
        assert!(http_addr("70000").is_err());
    }
}

/// `airlock audit ACTION`.
#[derive(Debug, Subcommand)]
pub(crate) enum AuditAction {
    /// Verifies the trail: each record's hash, the chain, the checkpoints' signatures.
    ///
    /// Exits 1 naming the first record that does not hold (edited,
    /// missing, reordered or inserted, or a checkpoint no trusted key
    /// signed), and says how many records follow the last signed
    /// checkpoint.
    Verify {
        /// The trail's files, oldest first (default: the configured trail).
        files: Vec<PathBuf>,
        /// A public key to trust (repeatable; default: [audit] trusted, or key's .pub).
        #[arg(long = "key", value_name = "PUB")]
        keys: Vec<PathBuf>,
    },
    /// Shows the records, one a line (--json: as written), filtered.
    Show {
        /// The trail's files, oldest first (default: the configured trail).
        files: Vec<PathBuf>,
        /// Only calls of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only calls by this caller (a token's subject).
        #[arg(long)]
        caller: Option<String>,
        /// Only calls with this decision (allow or deny).
        #[arg(long)]
        decision: Option<String>,
        /// Only records of this kind (call, approval, install, remove, reload, checkpoint...).
        #[arg(long)]
        kind: Option<String>,
        /// Only records at or after this time (RFC 3339, as written: 2026-12-07T10:00).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Print each record as written (JSON).
        #[arg(long)]
        json: bool,
    },
}
