//! `[mcp_servers.NAME]`: an external MCP server and how it is confined.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// An external MCP server, started as a child process speaking MCP on its
/// stdin and stdout (`[mcp_servers.NAME]`, with the `command`, `args` and
/// `env` of a `.mcp.json` stdio entry, in which `${VAR}` and
/// `${VAR:-default}` are expanded from Airlock's environment when it
/// starts, as Claude Code does). It runs confined as a native program
/// (`sandbox`): it sees the system's read-only runtime, the workspace
/// (read-only unless `workspace` says otherwise), the paths in `read`, and
/// a private `/tmp` that is also its `HOME`; it reaches only the `hosts`
/// granted, through a proxy (none by default). Its calls
/// are asked about unless a rule allows them (or the mode bypasses
/// permissions).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program (found on `PATH` when not a path); `${VAR}` expanded.
    pub command: String,
    /// Its arguments; `${VAR}` expanded.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment: only `PATH`, `HOME` and these are passed (the
    /// host's own environment is not, but a value may name a variable of
    /// it: `GITHUB_TOKEN = "${GITHUB_TOKEN}"`). Confined, `HOME` is its
    /// private `/tmp`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: the workspace, else Airlock's);
    /// confined, it is readable even when it lies outside the workspace.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Switches the server off (a runtime gate) when `false`.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Lists its tools by name only, until `tool_search` finds them
    /// (a tool's `_meta["anthropic/alwaysLoad"]` keeps it listed).
    #[serde(default)]
    pub defer_loading: bool,
    /// How long starting it and listing its tools may take (default 30 s).
    #[serde(default)]
    pub startup_timeout_ms: Option<u64>,
    /// Runs it confined (the default). `false` runs it with the user's
    /// rights, for a server that cannot run confined: a warning says so
    /// each time it starts. Where the system cannot confine programs, a
    /// confined server is refused, never started unconfined.
    #[serde(default = "super::yes")]
    pub sandbox: bool,
    /// What a confined server may do in the workspace (never more than
    /// `workspace_access` allows).
    #[serde(default)]
    pub workspace: ServerWorkspace,
    /// More paths a confined server may read and run from: what it is
    /// installed in (a virtual environment and its interpreter, a
    /// `node_modules`, a toolchain); `${VAR}` expanded.
    #[serde(default)]
    pub read: Vec<String>,
    /// The hosts a confined server may reach (`name`, `*.name`,
    /// `name:port`, or `*`), through a proxy named in its `HTTP_PROXY` and
    /// `HTTPS_PROXY`; none by default, and nothing connects any other way.
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl McpServerConfig {
    /// A server run as `command` with `args`, everything else as a
    /// configuration file that names only those would have it.
    pub fn new(command: impl Into<String>, args: Vec<String>) -> McpServerConfig {
        McpServerConfig {
            command: command.into(),
            args,
            env: BTreeMap::new(),
            cwd: None,
            enabled: None,
            defer_loading: false,
            startup_timeout_ms: None,
            sandbox: true,
            workspace: ServerWorkspace::default(),
            read: Vec::new(),
            hosts: Vec::new(),
        }
    }
}

/// What a confined MCP server may do in the workspace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerWorkspace {
    /// Read it (the default).
    #[default]
    ReadOnly,
    /// Read and write it.
    ReadWrite,
    /// Not see it at all.
    None,
}
