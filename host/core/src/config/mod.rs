//! `airlock.toml`: where tools come from, what each may touch, and the
//! limits every call runs under. Parsing only: paths are resolved and
//! checked by [`crate::grants`], limits applied by the engine.
//!
//! Every key has a safe default: no workspace, no network, no environment,
//! a 60 s time limit and 256 MiB of memory per call. Unknown keys are
//! errors, so a typo cannot silently leave a limit at its default.
//!
//! ```
//! let config = airlock_core::config::Config::from_toml(r#"
//!     workspace = "/tmp"
//!     [limits]
//!     timeout_ms = 5000
//!     [tools.fetch]
//!     network = ["example.com"]
//! "#, None).unwrap();
//! assert_eq!(config.limits.timeout_ms, 5000);
//! assert_eq!(config.tools["fetch"].network, ["example.com"]);
//! ```

mod contexts;
mod expand;
pub mod hooks;
mod load;
pub use load::nearest_name;
mod mcp_server;
mod paths;
pub mod settings;

use crate::descriptor::WorkspaceAccess;
use crate::permissions::PermissionsConfig;
pub use contexts::{ContextStoreUrl, ContextsConfig};
pub use expand::expand;
use hooks::HooksConfig;
pub use mcp_server::{McpServerConfig, ServerWorkspace};
pub(crate) use paths::user_dir;
pub use paths::{
    HostPath, approvals_file, default_audit_file, default_cache_dir, default_contexts_dir,
    default_results_dir, default_sdk_dir, default_skills_dir, default_tool_dir,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The whole configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Directories to load `*.wasm` tools from, in order. Defaults to the
    /// user's tool directory ([`default_tool_dir`]) when it exists.
    #[serde(default)]
    pub tool_dirs: Option<Vec<PathBuf>>,
    /// Whether to offer the first-party tools built into this binary.
    #[serde(default = "yes")]
    pub bundled_tools: bool,
    /// The agent's workspace: mounted at the same path inside the sandbox.
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// The most access any tool gets to the workspace.
    #[serde(default = "read_write")]
    pub workspace_access: WorkspaceAccess,
    /// Limits on every call.
    #[serde(default)]
    pub limits: Limits,
    /// Grants per tool name; `"*"` applies to every tool.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// Where results too large to return are saved, each caller's and
    /// context's in a directory of its own (default:
    /// `$XDG_STATE_HOME/airlock/results`, or `~/.local/state/airlock/results`).
    /// No grant may reach it, not even read-only.
    #[serde(default)]
    pub results_dir: Option<PathBuf>,
    /// Permission rules and the starting mode (Claude Code's `permissions`).
    #[serde(default)]
    pub permissions: PermissionsConfig,
    /// Pre- and post-tool hooks (Claude Code's `hooks`).
    #[serde(default)]
    pub hooks: HooksConfig,
    /// Whether compiled tools are cached on disk, so a tool is compiled
    /// once and later starts list it without compiling.
    #[serde(default = "yes")]
    pub artifact_cache: bool,
    /// Where compiled tools are cached (default [`default_cache_dir`]). It
    /// must belong to the user and be writable only by them.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// A read-only directory of tools compiled ahead of time (`airlock
    /// precompile`, run when a container image is built): read after
    /// `cache_dir`, never written. Like the cache, it must belong to the
    /// user and be writable only by them; an entry compiled for another
    /// CPU or configuration is not used (the tool is compiled instead).
    #[serde(default)]
    pub precompiled_dir: Option<PathBuf>,
    /// When the built-in `tool_search` is offered: `auto` (the default:
    /// when some tool is deferred), `on`, or `off` (deferred tools are then
    /// listed in full).
    #[serde(default)]
    pub tool_search: ToolSearchMode,
    /// Claude Code settings files (`.claude/settings.json`) whose
    /// permission rules, mode and hooks are merged in, in order (see
    /// [`settings`]). They are read when the configuration is parsed
    /// (and moved to `merged_settings`); a configuration built in code
    /// merges one with [`settings::merge`]. One left here is refused
    /// by [`crate::grants::Grants::from_config`], never silently skipped.
    #[serde(default)]
    pub settings: Vec<PathBuf>,
    /// The settings files merged in, in order.
    #[serde(skip)]
    pub merged_settings: Vec<PathBuf>,
    /// Where `airlock approve` records approved tool code (default
    /// [`approvals_file`]).
    #[serde(default)]
    pub approvals: Option<PathBuf>,
    /// The file this configuration was read from, if any
    /// ([`Config::from_file`]): no writable grant may contain it.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// External MCP servers (stdio) whose tools are mounted as
    /// `mcp__NAME__TOOL` (see [`McpServerConfig`]). They run confined as
    /// native programs, not as components, so their calls ask in the
    /// default mode.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// The binary that confines native programs (MCP servers, and the
    /// programs granted to `bash`): one whose `main` first calls
    /// `airlock_native::serve_if_asked`, as `airlock`'s does. Default: the
    /// running binary, so an embedder either calls it or names an
    /// installed `airlock` here.
    #[serde(default)]
    pub sandbox_helper: Option<PathBuf>,
    /// Whose signatures `airlock install` accepts for tools from which
    /// registries (`[[trust]]`, see [`TrustRule`]). A registry no rule
    /// covers is not installed from.
    #[serde(default)]
    pub trust: Vec<TrustRule>,
    /// Where agent contexts that outlive one request are kept, and for how
    /// long (`[contexts]`, see [`ContextsConfig`]).
    #[serde(default)]
    pub contexts: ContextsConfig,
    /// `[secrets.NAME]`: credentials the host adds to tools' outgoing
    /// requests ([`crate::secrets`]).
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretConfig>,
    /// `[auth]`: OAuth 2.1 bearer tokens `airlock mcp --http` requires
    /// (see [`AuthConfig`]); none when absent.
    pub auth: Option<AuthConfig>,
    /// `[skills]`: where skills are read from (see [`SkillsConfig`]).
    #[serde(default)]
    pub skills: SkillsConfig,
    /// `[audit]`: the audit trail (see [`AuditConfig`]).
    #[serde(default)]
    pub audit: AuditConfig,
}

/// `[audit]`: a record of every call and of every approval, install,
/// removal and reload, hash-chained, with checkpoints signed by `key`
/// (`airlock audit verify` checks it). Off unless `enabled`.
///
/// ```
/// use airlock_core::config::{AuditFailure, Config};
/// let config: Config = toml::from_str(
///     "[audit]\nenabled = true\nkey = \"/etc/airlock/audit.key\"\non_failure = \"drop\"\n",
/// )
/// .unwrap();
/// assert!(config.audit.enabled);
/// assert_eq!(config.audit.on_failure, AuditFailure::Drop);
/// assert!(config.audit.sink_path().is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Whether the trail is written.
    pub enabled: bool,
    /// Where: a file (default `$XDG_STATE_HOME/airlock/audit.jsonl`), `-`
    /// for standard output, or `unix:PATH` for a collector's socket.
    pub path: Option<AuditSink>,
    /// The private key (`airlock keygen`) checkpoints are signed with;
    /// none: unsigned checkpoints, which `verify` reports.
    pub key: Option<PathBuf>,
    /// The public keys `airlock audit verify` trusts (default: `key`'s
    /// `.pub`).
    pub trusted: Vec<PathBuf>,
    /// A signed checkpoint after this many records...
    pub checkpoint_every: u64,
    /// ...or this many seconds after the first record since the last.
    pub checkpoint_seconds: u64,
    /// Whether each call's input is recorded (secrets redacted), besides
    /// its digest.
    pub inputs: bool,
    /// When the trail cannot be written: refuse calls (`fail`), or go on
    /// and count the records lost (`drop`).
    pub on_failure: AuditFailure,
    /// This process's name in every record (default: the host's name and
    /// the process id).
    pub replica: Option<String>,
    /// A file past this many MiB is rotated.
    pub max_file_mib: u64,
    /// An OTLP/HTTP logs endpoint (`http://collector:4318/v1/logs`) each
    /// record is also exported to, as a log record (needs the `otel`
    /// feature).
    pub otlp: Option<String>,
}

/// `[audit] path`: where the trail goes, as written there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditSink {
    /// `-`: standard output.
    Stdout,
    /// `unix:PATH`: a collector's Unix socket.
    Unix(PathBuf),
    /// Any other text: a file.
    File(PathBuf),
}

impl From<&str> for AuditSink {
    fn from(text: &str) -> AuditSink {
        match text {
            "-" => AuditSink::Stdout,
            _ => match text.strip_prefix("unix:") {
                Some(socket) => AuditSink::Unix(socket.into()),
                None => AuditSink::File(text.into()),
            },
        }
    }
}

impl<'de> Deserialize<'de> for AuditSink {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AuditSink, D::Error> {
        Ok(AuditSink::from(String::deserialize(d)?.as_str()))
    }
}

/// `[audit] on_failure`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditFailure {
    /// Refuse calls until the trail can be written (nothing is lost).
    #[default]
    Fail,
    /// Let calls go on; drop what does not fit, and record how much.
    Drop,
}

impl Default for AuditConfig {
    fn default() -> AuditConfig {
        AuditConfig {
            enabled: false,
            path: None,
            key: None,
            trusted: Vec::new(),
            checkpoint_every: 1000,
            checkpoint_seconds: 60,
            inputs: false,
            on_failure: AuditFailure::Fail,
            replica: None,
            max_file_mib: 64,
            otlp: None,
        }
    }
}

impl AuditConfig {
    /// The trail's file when it goes to one: `path`, or the default under
    /// the XDG state directory.
    pub fn sink_path(&self) -> Option<PathBuf> {
        match &self.path {
            Some(AuditSink::File(file)) => Some(file.clone()),
            Some(AuditSink::Stdout | AuditSink::Unix(_)) => None,
            None => default_audit_file(),
        }
    }

    /// The keys `airlock audit verify` trusts: `trusted`, or `key`'s
    /// `.pub`.
    pub fn trusted_keys(&self) -> Vec<PathBuf> {
        if !self.trusted.is_empty() {
            return self.trusted.clone();
        }
        self.key
            .iter()
            .map(|k| PathBuf::from(format!("{}.pub", k.display())))
            .collect()
    }
}

/// `[skills]`: the directories whose folders are skills
/// ([`crate::skills`]).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// Directories of skill folders, in order (the first of two skills
    /// with one name wins). Default: `~/.local/share/airlock/skills`
    /// ([`default_skills_dir`]).
    pub dirs: Option<Vec<PathBuf>>,
    /// Whether the folders Claude Code reads skills from are read too,
    /// after `dirs`: `~/.claude/skills`, then the workspace's
    /// `.claude/skills` (as trusted as what is written in the workspace).
    pub claude: bool,
}

impl Default for SkillsConfig {
    fn default() -> SkillsConfig {
        SkillsConfig {
            dirs: None,
            claude: true,
        }
    }
}

/// `[auth]`: `airlock mcp --http` as an OAuth 2.1 resource server. Every
/// request to `/mcp` needs a JWT access token (`Authorization: Bearer`)
/// signed by a key of the JWKS, issued by one of `issuers`, for this
/// server (`aud` is `resource`), unexpired, carrying every scope of
/// `scopes`; `/.well-known/oauth-protected-resource` tells clients where
/// to get one.
///
/// ```
/// use airlock_core::config::Config;
/// let config = Config::from_toml(r#"
///     [auth]
///     resource = "https://mcp.example.com/mcp"
///     issuers = ["https://auth.example.com"]
///     jwks_url = "https://auth.example.com/.well-known/jwks.json"
///     scopes = ["mcp:tools"]
/// "#, None).unwrap();
/// let auth = config.auth.unwrap();
/// assert_eq!(auth.algorithms, ["RS256", "ES256"]);
/// assert_eq!((auth.leeway_secs, auth.jwks_refresh_secs), (30, 30));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// This server's URI as its clients reach it, such as
    /// `https://mcp.example.com/mcp`: every token's audience (RFC 8707).
    pub resource: String,
    /// The authorization servers whose tokens are taken: a token's `iss`
    /// must be one of them.
    pub issuers: Vec<String>,
    /// Where the signing keys are: a JWKS URL (HTTPS, or HTTP to a
    /// loopback host), fetched at start and again for an unknown key id.
    pub jwks_url: Option<String>,
    /// Or a JWKS file, read at start.
    pub jwks_file: Option<PathBuf>,
    /// The signature algorithms taken (RS256, RS384, RS512, PS256, PS384,
    /// PS512, ES256, ES384, EdDSA; never `none` or an HMAC).
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// Scopes every token must carry (all of them).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `[auth.tool_scopes."SCOPE"]`: which tools a token with that scope
    /// sees and may call. With none, every token sees every tool; with
    /// some, a token sees the union of its scopes' tools, and one with none
    /// of them is refused.
    #[serde(default)]
    pub tool_scopes: BTreeMap<String, ScopeTools>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
    /// The least time between two fetches of `jwks_url` for a token whose
    /// key id is not held (a rotated key), in seconds.
    #[serde(default = "default_jwks_refresh")]
    pub jwks_refresh_secs: u64,
}

fn default_jwks_refresh() -> u64 {
    30
}

/// The tools one scope gives (`[auth.tool_scopes."SCOPE"]`).
///
/// ```
/// use airlock_core::config::Config;
/// let config = Config::from_toml(r#"
///     [auth]
///     resource = "https://mcp.example.com/mcp"
///     issuers = ["https://auth.example.com"]
///     jwks_file = "/etc/airlock/jwks.json"
///     [auth.tool_scopes."tools:read"]
///     read_only = true
///     [auth.tool_scopes."tools:write"]
///     tools = ["edit", "write", "bash"]
/// "#, None).unwrap();
/// let scopes = &config.auth.unwrap().tool_scopes;
/// assert_eq!(scopes["tools:read"].tools, ["*"]);
/// assert!(scopes["tools:read"].read_only && !scopes["tools:write"].read_only);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeTools {
    /// Tool names (`*`: every tool).
    #[serde(default = "every_tool")]
    pub tools: Vec<String>,
    /// Only the tools declared read-only (whose every call runs with
    /// read-only grants); a tool that decides per call (such as `bash`)
    /// needs a scope without this.
    #[serde(default)]
    pub read_only: bool,
}

fn every_tool() -> Vec<String> {
    vec!["*".into()]
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".into(), "ES256".into()]
}

fn default_leeway() -> u64 {
    30
}

/// `[secrets.NAME]`: a credential the host adds to the outgoing requests a
/// tool makes to the hosts named, so that the tool never sees it; it is
/// also taken out of everything a tool hands back ([`crate::secrets`]).
///
/// ```
/// use airlock_core::config::Config;
/// let config = Config::from_toml(r#"
///     [secrets.github]
///     file = "/run/secrets/github"
///     hosts = ["api.github.com"]
///     header = "Authorization"
///     format = "token {value}"
///     tools = ["fetch"]
/// "#, None).unwrap();
/// assert_eq!(config.secrets["github"].hosts, ["api.github.com"]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretConfig {
    /// The environment variable (of the host) holding the value.
    pub env: Option<String>,
    /// The file holding the value (a trailing line break is dropped).
    pub file: Option<PathBuf>,
    /// The hosts it is sent to: `name` or `name:port`, no wildcards.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The header it goes in (default `Authorization`).
    pub header: Option<String>,
    /// The header's value, `{value}` standing for the secret (default
    /// `Bearer {value}`).
    pub format: Option<String>,
    /// A query parameter to put it in instead of a header.
    pub query: Option<String>,
    /// Only these tools' requests get it (default: every tool granted one
    /// of its hosts).
    pub tools: Option<Vec<String>>,
}

/// `[[trust]]`: the keys whose cosign signatures `airlock install` accepts
/// for tools under `source`, or that tools from there may be unsigned.
///
/// ```
/// let config = airlock_core::config::Config::from_toml(r#"
///     [[trust]]
///     source = "oci://ghcr.io/acme"
///     keys = ["/etc/airlock/acme.pub"]
///     [[trust]]
///     source = "oci://127.0.0.1:5000/scratch"
///     unsigned = true
/// "#, None).unwrap();
/// let rule = airlock_core::config::TrustRule::for_reference(&config.trust, "ghcr.io/acme/wc");
/// assert_eq!(rule.unwrap().keys.len(), 1);
/// assert!(airlock_core::config::TrustRule::for_reference(&config.trust, "ghcr.io/other/wc").is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRule {
    /// `oci://REGISTRY` or `oci://REGISTRY/REPOSITORY-PREFIX`: the rule
    /// covers that registry's repositories, or those at or under the prefix
    /// (whole path segments). The longest rule that covers a reference
    /// applies.
    pub source: String,
    /// PEM public keys (P-256, as `cosign.pub` or `airlock keygen` write
    /// them); a tool must be signed by one of them.
    #[serde(default)]
    pub keys: Vec<PathBuf>,
    /// Tools from here may be unsigned (a signature by one of `keys` is
    /// still checked and recorded when there is one).
    #[serde(default)]
    pub unsigned: bool,
}

impl TrustRule {
    /// The rule for `registry_and_repository` (`ghcr.io/acme/wc`): the
    /// longest whose source covers it.
    pub fn for_reference<'r>(
        rules: &'r [TrustRule],
        registry_and_repository: &str,
    ) -> Option<&'r TrustRule> {
        rules
            .iter()
            .filter(|r| {
                let prefix = r.source.trim_start_matches("oci://").trim_end_matches('/');
                registry_and_repository == prefix
                    || registry_and_repository
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .max_by_key(|r| r.source.trim_end_matches('/').len())
    }

    /// What is wrong with the rule, if anything.
    pub fn problem(&self) -> Option<String> {
        let rest = self.source.strip_prefix("oci://");
        if rest.is_none_or(|r| r.trim_end_matches('/').is_empty()) {
            return Some(format!(
                "[[trust]] source {:?}: write oci://REGISTRY or oci://REGISTRY/REPOSITORY",
                self.source
            ));
        }
        if self.keys.is_empty() && !self.unsigned {
            return Some(format!(
                "[[trust]] {}: give `keys` (the publishers' public keys) or `unsigned = true`",
                self.source
            ));
        }
        None
    }
}

/// When the built-in `tool_search` tool is offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSearchMode {
    /// When at least one tool in the registry is deferred.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never: deferred tools are listed in full.
    Off,
}

fn yes() -> bool {
    true
}

fn read_write() -> WorkspaceAccess {
    WorkspaceAccess::ReadWrite
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tool_dirs: None,
            bundled_tools: true,
            workspace: None,
            workspace_access: WorkspaceAccess::ReadWrite,
            limits: Limits::default(),
            tools: BTreeMap::new(),
            results_dir: None,
            permissions: PermissionsConfig::default(),
            hooks: HooksConfig::default(),
            artifact_cache: true,
            cache_dir: None,
            precompiled_dir: None,
            tool_search: ToolSearchMode::Auto,
            settings: Vec::new(),
            merged_settings: Vec::new(),
            source: None,
            approvals: None,
            mcp_servers: BTreeMap::new(),
            sandbox_helper: None,
            trust: Vec::new(),
            contexts: ContextsConfig::default(),
            skills: SkillsConfig::default(),
            audit: AuditConfig::default(),
            secrets: BTreeMap::new(),
            auth: None,
        }
    }
}

/// What the operator grants one tool (or every tool, under `"*"`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// Turns the tool off (a runtime gate) when `false`.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// The most access this tool gets to the workspace.
    #[serde(default)]
    pub workspace: Option<WorkspaceAccess>,
    /// Host patterns it may reach over HTTP (`example.com`, `*.example.com`, `*`).
    #[serde(default)]
    pub network: Vec<String>,
    /// Environment variables it may read (their values come from Airlock's
    /// own environment, or from the agent's context when a tool set them).
    #[serde(default)]
    pub env: Vec<String>,
    /// Directories besides the workspace.
    #[serde(default)]
    pub mounts: Vec<MountConfig>,
    /// Native programs it may run (`bash` only): names found on Airlock's
    /// `PATH` when the configuration loads, or absolute paths; each runs
    /// confined by the call's grants (see `crate::programs`).
    #[serde(default)]
    pub programs: Vec<String>,
    /// Overrides `limits.timeout_ms` for this tool.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Overrides `limits.memory_mib` for this tool.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// Overrides `limits.write_mib` for this tool.
    #[serde(default)]
    pub write_mib: Option<u64>,
    /// Overrides the tool's own `defer_loading`: a deferred tool is listed
    /// by name only until `tool_search` finds it.
    #[serde(default)]
    pub defer_loading: Option<bool>,
    /// The component file that may take this name when another tool has
    /// it too (a directory tool in place of a bundled one, or one of two
    /// directories' tools). Without it, a name already in use is refused.
    #[serde(default)]
    pub source: Option<PathBuf>,
}

impl ToolConfig {
    /// The grants of `tool` in `tools` (the `[tools]` table): the `"*"`
    /// entry merged with its own (lists concatenate; the tool's own
    /// settings win).
    pub fn of(tools: &BTreeMap<String, ToolConfig>, tool: &str) -> ToolConfig {
        let mut merged = tools.get("*").cloned().unwrap_or_default();
        if let Some(own) = tools.get(tool) {
            merged.enabled = own.enabled.or(merged.enabled);
            merged.workspace = own.workspace.or(merged.workspace);
            merged.network.extend(own.network.iter().cloned());
            merged.env.extend(own.env.iter().cloned());
            merged.mounts.extend(own.mounts.iter().cloned());
            merged.programs.extend(own.programs.iter().cloned());
            merged.timeout_ms = own.timeout_ms.or(merged.timeout_ms);
            merged.memory_mib = own.memory_mib.or(merged.memory_mib);
            merged.write_mib = own.write_mib.or(merged.write_mib);
            merged.defer_loading = own.defer_loading.or(merged.defer_loading);
            merged.source = own.source.clone();
        }
        merged
    }
}

/// A directory besides the workspace.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountConfig {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the tool sees it (absolute); defaults to the host path.
    #[serde(default)]
    pub path: Option<String>,
    /// `read` (the default) or `read-write`.
    #[serde(default = "read")]
    pub access: WorkspaceAccess,
}

fn read() -> WorkspaceAccess {
    WorkspaceAccess::Read
}

/// Limits on every call, and on loading tools.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock time a call may take.
    pub timeout_ms: u64,
    /// Wall-clock time `classify`, `validate` and `check-permissions` may take.
    pub preflight_timeout_ms: u64,
    /// Linear memory a call may use, across all its memories.
    pub memory_mib: u64,
    /// Elements a table may grow to.
    pub table_elements: u32,
    /// Core instances a call may create (default 64: componentize-py's
    /// output has 14, 38 with `--stub-wasi`; a Rust tool has 3).
    pub instances: u32,
    /// Tables a call may create.
    pub tables: u32,
    /// Linear memories a call may create.
    pub memories: u32,
    /// Bytes of stdout kept; writing more ends the call (`output_limit`).
    pub stdout_bytes: usize,
    /// Bytes of stderr kept; writing more ends the call (`output_limit`).
    pub stderr_bytes: usize,
    /// The wasm stack, in KiB.
    pub wasm_stack_kib: usize,
    /// Bytes of JSON input a call accepts.
    pub input_bytes: usize,
    /// Bytes of JSON a tool may return in one value.
    pub output_bytes: usize,
    /// The deepest JSON nesting accepted either way.
    pub json_depth: usize,
    /// The largest component file loaded.
    pub component_bytes: u64,
    /// The most components loaded from one tool directory (by file name;
    /// the rest are not read, and the directory reports it once).
    pub tool_dir_components: usize,
    /// The most bytes of components read from one tool directory (by file
    /// name, each file whole or not at all; reported once like
    /// `tool_dir_components`).
    pub tool_dir_bytes: u64,
    /// How often the epoch ticks, in ms: the granularity of time limits
    /// and of cancellation.
    pub epoch_tick_ms: u64,
    /// Resource handles (files, streams, ...) a call may hold at once.
    pub resource_handles: usize,
    /// Random bytes a guest may ask for in one call to `wasi:random`.
    pub random_bytes: u64,
    /// Bytes a guest may pass to the host in one host call ("hostcall fuel").
    pub hostcall_bytes: usize,
    /// Connect and first-byte timeout of an outgoing HTTP request.
    pub http_timeout_ms: u64,
    /// Bytes a call may write to writable mounts, in MiB (sparse growth
    /// counts its apparent size; each new file or directory costs 4 KiB).
    pub write_mib: u64,
    /// Wall-clock time compiling one component may take.
    pub compile_timeout_ms: u64,
    /// Tool stores that can be live at once, preallocated by the pooling
    /// allocator (plus an eighth, at most 64, for hooks); calls beyond it
    /// queue. `0` allocates each store on demand instead, with no queue.
    pub pool_slots: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 60_000,
            preflight_timeout_ms: 5_000,
            memory_mib: 256,
            table_elements: 100_000,
            instances: 64,
            tables: 32,
            memories: 8,
            stdout_bytes: 1 << 20,
            stderr_bytes: 256 << 10,
            wasm_stack_kib: 512,
            input_bytes: 1 << 20,
            output_bytes: 16 << 20,
            json_depth: 64,
            component_bytes: 64 << 20,
            tool_dir_components: 256,
            tool_dir_bytes: 1 << 30,
            epoch_tick_ms: 10,
            resource_handles: 4096,
            random_bytes: 1 << 20,
            hostcall_bytes: 64 << 20,
            http_timeout_ms: 30_000,
            write_mib: 128,
            compile_timeout_ms: 120_000,
            pool_slots: 1000,
        }
    }
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl Config {
    /// The tool directories in effect: the configured ones, or the user's
    /// tool directory when none are configured and it exists.
    pub fn effective_tool_dirs(&self) -> Vec<PathBuf> {
        match &self.tool_dirs {
            Some(dirs) => dirs.clone(),
            None => default_tool_dir()
                .filter(|d| d.is_dir())
                .into_iter()
                .collect(),
        }
    }

    /// The grants of `tool`: the `"*"` entry merged with its own (lists
    /// concatenate; the tool's own settings win).
    pub fn tool_config(&self, tool: &str) -> ToolConfig {
        ToolConfig::of(&self.tools, tool)
    }

    /// Airlock's own state on disk, which no writable grant may reach: the
    /// configuration directory and file, the tool directories (the
    /// configured ones and the user's default one), the artifact cache and
    /// the results directory (the configured ones and the defaults, which
    /// no grant may read either), and the settings files.
    pub fn host_paths(&self) -> Vec<HostPath> {
        let dir = |what: &'static str, path: PathBuf| HostPath {
            what,
            path,
            is_dir: true,
            unreadable: false,
        };
        let mut paths = Vec::new();
        if let Some(d) = user_dir("XDG_CONFIG_HOME", ".config") {
            paths.push(dir("Airlock's configuration directory", d.join("airlock")));
        }
        if let Some(file) = self.effective_approvals_file() {
            paths.push(HostPath {
                what: "the approvals file",
                path: file,
                is_dir: false,
                unreadable: false,
            });
        }
        if let Some(file) = &self.source {
            paths.push(HostPath {
                what: "the configuration file",
                path: file.clone(),
                is_dir: false,
                unreadable: false,
            });
        }
        if let Some(file) = self.lock_path() {
            paths.push(HostPath {
                what: "the lock file (airlock.lock)",
                path: file,
                is_dir: false,
                unreadable: false,
            });
        }
        let mut tool_dirs = self.tool_dirs.clone().unwrap_or_default();
        tool_dirs.extend(default_tool_dir());
        paths.extend(tool_dirs.into_iter().map(|d| dir("a tool directory", d)));
        // Skills are instructions to a model, and their scripts run: a
        // tool that could write them could steer the agent (the
        // workspace's own `.claude/skills` excepted: it is the workspace's).
        let workspace_skills = self.workspace.as_ref().map(|w| w.join(".claude/skills"));
        paths.extend(
            self.skill_dirs()
                .into_iter()
                .filter(|d| Some(d) != workspace_skills.as_ref())
                .map(|d| dir("a skills directory", d)),
        );
        // What `airlock build` compiles into tools (a build script added
        // there would run on the host).
        paths.extend(default_sdk_dir().map(|d| dir("the SDKs `airlock build` uses", d)));
        paths.extend(
            self.effective_cache_dir()
                .into_iter()
                .chain(default_cache_dir())
                .chain(self.precompiled_dir.clone())
                .map(|path| HostPath {
                    what: "the artifact cache",
                    path,
                    is_dir: true,
                    unreadable: true,
                }),
        );
        // Saved results are their callers' alone: a tool reading them
        // would read another caller's.
        paths.extend(
            self.results_dir
                .clone()
                .into_iter()
                .chain(default_results_dir())
                .map(|path| HostPath {
                    what: "the results directory",
                    path,
                    is_dir: true,
                    unreadable: true,
                }),
        );
        // The audit trail: a tool that could write it could forge or cut
        // it; one that could read the key could sign a forgery.
        if self.audit.enabled {
            paths.extend(self.audit.sink_path().map(|path| HostPath {
                what: "the audit trail",
                path,
                is_dir: false,
                unreadable: true,
            }));
            paths.extend(self.audit.key.clone().map(|path| HostPath {
                what: "the audit key",
                path,
                is_dir: false,
                unreadable: true,
            }));
        }
        // The command line's contexts: what `edit` trusts a read by.
        paths.extend(default_contexts_dir().map(|path| HostPath {
            what: "the command line's contexts",
            path,
            is_dir: true,
            unreadable: true,
        }));
        paths.extend(
            self.secrets
                .values()
                .filter_map(|s| s.file.clone())
                .map(|path| HostPath {
                    what: "a secret's file",
                    path,
                    is_dir: false,
                    unreadable: true,
                }),
        );
        paths.extend(self.merged_settings.iter().map(|f| HostPath {
            what: "a settings file",
            path: f.clone(),
            is_dir: false,
            unreadable: false,
        }));
        paths
    }

    /// The approvals file in effect, if any.
    pub fn effective_approvals_file(&self) -> Option<PathBuf> {
        self.approvals.clone().or_else(approvals_file)
    }

    /// The results directory in effect: `results_dir`, else
    /// [`default_results_dir`]; `None` when neither is known (no `HOME`).
    pub fn effective_results_dir(&self) -> Option<PathBuf> {
        self.results_dir.clone().or_else(default_results_dir)
    }

    /// The compiled-tool cache in effect, if any.
    pub fn effective_cache_dir(&self) -> Option<PathBuf> {
        if !self.artifact_cache {
            return None;
        }
        self.cache_dir.clone().or_else(default_cache_dir)
    }

    /// The directories skills are read from, in order: `[skills] dirs`
    /// (else [`default_skills_dir`]), then, unless `claude = false`,
    /// `~/.claude/skills` and the workspace's `.claude/skills`.
    pub fn skill_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = match &self.skills.dirs {
            Some(dirs) => dirs.clone(),
            None => default_skills_dir().into_iter().collect(),
        };
        if self.skills.claude {
            dirs.extend(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude/skills")));
            dirs.extend(self.workspace.as_ref().map(|w| w.join(".claude/skills")));
        }
        dirs
    }

    /// The directory of tools compiled ahead of time in effect, if any
    /// (none when `artifact_cache = false`).
    pub fn effective_precompiled_dir(&self) -> Option<PathBuf> {
        self.precompiled_dir.clone().filter(|_| self.artifact_cache)
    }
}

#[cfg(test)]
mod tests {
    use super::hooks::HookSpec;
    use super::*;
    use std::path::Path;

    #[test]
    fn a_bad_key_is_placed_by_line_and_column_with_the_nearest_good_one() {
        let message = |text: &str| Config::from_toml(text, None).unwrap_err().message;
        let typo = message("bundled_tools = true\n\n[limits]\nmemory_mb = 3\n");
        assert!(
            typo == "line 4, column 1: unknown field `memory_mb`; did you mean `memory_mib`?",
            "{typo}"
        );
        let mode = message("[permissions]\ndefault_mode = \"acceptEdit\"\n");
        assert!(
            mode == "line 2, column 16: unknown variant `acceptEdit`; did you mean `acceptEdits`?",
            "{mode}"
        );
        // Columns count characters, not bytes.
        let wide = message("tools = { \"\u{e9}\" = { zzz = 1 } }\n");
        assert!(
            wide.starts_with("line 1, column 19: unknown field `zzz`"),
            "{wide}"
        );
        // Nothing near enough: no guess.
        let far = message("[limits]\nzzz = 3\n");
        assert!(
            far.contains("unknown field `zzz`, expected one of `timeout_ms`")
                && !far.contains("did you mean"),
            "{far}"
        );
    }

    #[test]
    fn an_audit_count_of_zero_is_refused_by_name() {
        for key in ["checkpoint_every", "checkpoint_seconds", "max_file_mib"] {
            let error = Config::from_toml(&format!("[audit]\n{key} = 0\n"), None).unwrap_err();
            assert_eq!(error.message, format!("audit.{key} must be at least 1"));
        }
        assert!(Config::from_toml("[audit]\ncheckpoint_every = 1\n", None).is_ok());
    }

    #[test]
    fn the_audit_path_names_a_file_a_socket_or_standard_output() {
        let base = Path::new("/etc/airlock");
        let sink = |path: &str| {
            Config::from_toml(&format!("[audit]\npath = \"{path}\"\n"), Some(base))
                .unwrap()
                .audit
        };
        assert_eq!(sink("-").path, Some(AuditSink::Stdout));
        assert_eq!(sink("-").sink_path(), None);
        let socket = sink("unix:run/audit.sock");
        assert_eq!(
            socket.path,
            Some(AuditSink::Unix(base.join("run/audit.sock")))
        );
        assert_eq!(socket.sink_path(), None);
        let file = sink("logs/audit.jsonl");
        assert_eq!(file.sink_path(), Some(base.join("logs/audit.jsonl")));
    }

    #[test]
    fn the_sdks_airlock_build_compiles_are_airlocks_own_state() {
        let sdks = default_sdk_dir().expect("tests run with HOME set");
        let paths = Config::default().host_paths();
        assert!(
            paths.iter().any(|p| p.path == sdks && p.is_dir),
            "{paths:?}"
        );
    }

    #[test]
    fn skills_directories_but_the_workspaces_are_airlocks_own_state() {
        let config = Config {
            workspace: Some("/srv/project".into()),
            skills: SkillsConfig {
                dirs: Some(vec!["/srv/skills".into()]),
                claude: true,
            },
            ..Config::default()
        };
        let dirs = config.skill_dirs();
        let home = PathBuf::from(std::env::var_os("HOME").expect("tests run with HOME set"));
        assert_eq!(
            dirs,
            [
                PathBuf::from("/srv/skills"),
                home.join(".claude/skills"),
                PathBuf::from("/srv/project/.claude/skills")
            ]
        );
        let paths = config.host_paths();
        let own = |dir: &Path| paths.iter().any(|p| p.path == dir && p.is_dir);
        assert!(own(&dirs[0]) && own(&dirs[1]), "{paths:?}");
        assert!(
            !own(&dirs[2]),
            "the workspace's own skills are the workspace's"
        );
        let off = Config {
            skills: SkillsConfig {
                dirs: None,
                claude: false,
            },
            ..Config::default()
        };
        assert_eq!(off.skill_dirs(), Vec::from_iter(default_skills_dir()));
    }

    #[test]
    fn the_results_directories_are_out_of_every_grants_reach() {
        let default = default_results_dir().expect("tests run with HOME set");
        let configured = PathBuf::from("/srv/airlock-results");
        let config = Config {
            results_dir: Some(configured.clone()),
            ..Config::default()
        };
        let paths = config.host_paths();
        for dir in [&default, &configured] {
            assert!(
                paths
                    .iter()
                    .any(|p| &p.path == dir && p.is_dir && p.unreadable),
                "{paths:?}"
            );
        }
        assert_eq!(config.effective_results_dir(), Some(configured));
        assert_eq!(Config::default().effective_results_dir(), Some(default));
    }

    #[test]
    fn defaults_are_safe() {
        let c = Config::from_toml("", None).unwrap();
        assert!(c.workspace.is_none());
        assert!(c.tools.is_empty());
        assert!(c.bundled_tools);
        assert_eq!(c.limits, Limits::default());
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = Config::from_toml("[limits]\ntimeout = 5", None).unwrap_err();
        assert!(err.message.contains("unknown field `timeout`"), "{err}");
        let err = Config::from_toml("[tools.x]\nnetwrok = []", None).unwrap_err();
        assert!(err.message.contains("netwrok"), "{err}");
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let c = Config::from_toml(
            "workspace = \"ws\"\ntool_dirs = [\"t\", \"/abs\"]\n[[tools.x.mounts]]\nhost = \"data\"",
            Some(Path::new("/etc/airlock")),
        )
        .unwrap();
        assert_eq!(c.workspace.unwrap(), PathBuf::from("/etc/airlock/ws"));
        assert_eq!(
            c.tool_dirs.unwrap(),
            [PathBuf::from("/etc/airlock/t"), PathBuf::from("/abs")]
        );
        assert_eq!(
            c.tools["x"].mounts[0].host,
            PathBuf::from("/etc/airlock/data")
        );
        assert_eq!(c.tools["x"].mounts[0].access, WorkspaceAccess::Read);
    }

    #[test]
    fn permissions_and_hooks_take_claude_codes_shape() {
        let c = Config::from_toml(
            r#"
            [permissions]
            allow = ["read"]
            deny = ["Read(./.env)"]
            defaultMode = "acceptEdits"
            [[hooks.PreToolUse]]
            matcher = "write|edit"
            hooks = [{ type = "command", command = "./check.sh", timeout = 5 }]
            [[hooks.PostToolUse]]
            hooks = [{ type = "wasm", component = "hook.wasm" }]
            "#,
            Some(Path::new("/etc/airlock")),
        )
        .unwrap();
        assert_eq!(c.permissions.deny, ["Read(./.env)"]);
        assert_eq!(
            c.permissions.default_mode,
            crate::permissions::PermissionMode::AcceptEdits
        );
        assert_eq!(
            c.hooks.pre_tool_use[0].matcher.as_deref(),
            Some("write|edit")
        );
        assert_eq!(
            c.hooks.post_tool_use[0].hooks[0],
            HookSpec::Wasm {
                component: PathBuf::from("/etc/airlock/hook.wasm"),
                timeout: None
            }
        );
    }

    #[test]
    fn wildcard_grants_merge_with_a_tools_own() {
        let c = Config::from_toml(
            "[tools.\"*\"]\nnetwork = [\"a.com\"]\ntimeout_ms = 1\n[tools.x]\nnetwork = [\"b.com\"]\ntimeout_ms = 2",
            None,
        )
        .unwrap();
        let x = c.tool_config("x");
        assert_eq!(x.network, ["a.com", "b.com"]);
        assert_eq!(x.timeout_ms, Some(2));
        assert_eq!(c.tool_config("y").network, ["a.com"]);
    }
}
