//! Grants: what each tool may touch, and what one call actually gets.
//!
//! [`Grants`] is the operator's side, resolved once from [`Config`]: the
//! workspace and extra mounts opened as `cap-std` directory handles, checked
//! (no `/proc`, `/sys` or `/dev`; no writable directory containing another
//! grant's root). [`ToolGrants`] is one tool's share. [`CallGrants`] is one
//! call's: the intersection of the operator's grant, the tool's request
//! and the call's effective safety flags (a read-only or concurrency-safe
//! call gets read-only handles and safe HTTP methods only).
//!
//! The host's own file access inside granted directories (stamping a read,
//! checking a new cwd) goes through the `cap-std` handles opened here, never
//! through ambient paths, so a guest-planted symlink cannot redirect it.
//!
//! Grants never reach the host's own state: a writable grant that contains,
//! or lies inside, Airlock's configuration, tool directories, artifact
//! cache, results directory or settings files is refused, and so is any
//! grant that exposes the cache. A configured path may not run through a
//! symbolic link inside a writable grant (a tool could re-point it), and a
//! directory granted once is pinned by its (device, inode): opened again on
//! a reload, it must be the same directory.

use crate::config::{Config, HostPath, Limits, ToolConfig};
use crate::descriptor::{Descriptor, SafetyFlags, WorkspaceAccess, is_env_name, is_host_pattern};
use crate::error::LoadError;
pub use crate::guest_path::normalize_guest;
use crate::programs::{self, ProgramGrants};
use crate::secrets::Secrets;
use cap_std::fs::MetadataExt;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// A directory the host opened for tools.
#[derive(Debug)]
pub struct HostMount {
    /// Where tools see it (absolute).
    pub guest: String,
    /// Where it is on the host (canonical).
    pub host: PathBuf,
    /// The handle the host itself uses inside it.
    pub dir: cap_std::fs::Dir,
    /// The path the operator configured (it may run through links).
    pub configured: PathBuf,
    /// The directory's (device, inode) when it was opened.
    pub id: (u64, u64),
    /// A path that opens this very directory, whatever its configured path
    /// names now: its handle's entry in `/proc/self/fd` (`/dev/fd`
    /// elsewhere). Each call's sandbox is built through it, so a granted
    /// directory moved away, or replaced by a link to elsewhere, after it
    /// was granted is not followed.
    pub handle_path: PathBuf,
}

/// When the agent last saw a file: the host's own stamp of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileStamp {
    /// Modification time, ns since the Unix epoch.
    pub modified_ns: u64,
    /// Size in bytes.
    pub size: u64,
    /// The BLAKE3 hash of the content: a file rewritten to the same size
    /// with its modification time restored still differs here.
    pub blake3: [u8; 32],
}

/// The operator's grants, resolved and checked: the directories opened,
/// and what each tool may have of them, of the network and of the
/// environment, and within which limits.
#[derive(Debug)]
pub struct Grants {
    limits: Limits,
    workspace_access: WorkspaceAccess,
    /// The `[tools]` table, as configured.
    tools: BTreeMap<String, ToolConfig>,
    workspace: Option<Arc<HostMount>>,
    /// The mounts by the path the operator configured.
    mounts: BTreeMap<PathBuf, Arc<HostMount>>,
    /// The secrets, with their values.
    secrets: Arc<Secrets>,
    /// The native programs granted to `bash`.
    programs: Arc<ProgramGrants>,
}

impl Grants {
    /// Every configured secret, with its value (what any output is
    /// redacted of).
    pub fn secrets(&self) -> &Arc<Secrets> {
        &self.secrets
    }

    /// Resolves the grants in `config`: opens the workspace and every mount,
    /// and refuses grants that point into `/proc`, `/sys` or `/dev`, that
    /// nest under a writable grant (a tool could swap the inner root), that
    /// reach Airlock's own state ([`Config::host_paths`]), or whose path
    /// runs through a link inside a writable grant; reads the secrets'
    /// values ([`Secrets::load`]).
    pub fn from_config(config: &Config) -> Result<Grants, LoadError> {
        Grants::open(config, None)
    }

    /// [`Grants::from_config`] for a reload: every directory `previous`
    /// granted under the same configured path must still be the same
    /// directory (device and inode), else the grant is refused: something
    /// moved or re-pointed it since it was granted.
    pub fn reopen(config: &Config, previous: &Grants) -> Result<Grants, LoadError> {
        Grants::open(config, Some(previous))
    }

    fn open(config: &Config, previous: Option<&Grants>) -> Result<Grants, LoadError> {
        if let Some(file) = config.settings.first() {
            return Err(LoadError::Grants(format!(
                "the settings file {} was never merged: settings files are read when airlock.toml \
                 is parsed (Config::from_toml), or merged with settings::merge",
                file.display()
            )));
        }
        let workspace = match &config.workspace {
            Some(path) => Some(Arc::new(open_mount(path, None)?)),
            None => None,
        };
        let mut mounts = BTreeMap::new();
        let mut all: Vec<(Arc<HostMount>, bool, String)> = Vec::new();
        if let Some(ws) = &workspace {
            all.push((
                ws.clone(),
                config.workspace_access == WorkspaceAccess::ReadWrite,
                "the workspace".into(),
            ));
        }
        for (tool, tc) in &config.tools {
            for m in &tc.mounts {
                let mount = match mounts.get(&m.host) {
                    Some(mount) => Arc::clone(mount),
                    None => Arc::new(open_mount(&m.host, m.path.as_deref())?),
                };
                mounts.insert(m.host.clone(), mount.clone());
                all.push((
                    mount,
                    m.access == WorkspaceAccess::ReadWrite,
                    format!("a mount of `{tool}`"),
                ));
            }
        }
        check_nesting(&all)?;
        let host_paths = config.host_paths();
        check_host_state(&all, &host_paths)?;
        check_links(&all, &host_paths)?;
        if let Some(previous) = previous {
            check_pins(&all, previous)?;
        }
        let writable: Vec<&Path> = (all.iter())
            .filter(|(_, writable, _)| *writable)
            .map(|(mount, _, _)| mount.host.as_path())
            .collect();
        let programs = Arc::new(programs::granted(config, &writable)?);
        let secrets = Arc::new(Secrets::load(config)?);
        Ok(Grants {
            programs,
            limits: config.limits.clone(),
            workspace_access: config.workspace_access,
            tools: config.tools.clone(),
            workspace,
            mounts,
            secrets,
        })
    }

    /// The workspace, if one is granted.
    pub fn workspace(&self) -> Option<&Arc<HostMount>> {
        self.workspace.as_ref()
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Every directory a tool may be granted: the workspace and the mounts.
    pub fn all_mounts(&self) -> impl Iterator<Item = &Arc<HostMount>> {
        self.workspace.iter().chain(self.mounts.values())
    }

    /// The grants of the tool named `tool`.
    pub fn for_tool(&self, tool: &str) -> Result<ToolGrants, LoadError> {
        let tc = ToolConfig::of(&self.tools, tool);
        for host in &tc.network {
            if !is_host_pattern(host) {
                return Err(LoadError::Grants(format!(
                    "tools.{tool}.network: {host:?} is not a host pattern (`name`, `*.name`, `*`)"
                )));
            }
        }
        for name in &tc.env {
            if !is_env_name(name) {
                return Err(LoadError::Grants(format!(
                    "tools.{tool}.env: {name:?} is not an environment variable name"
                )));
            }
        }
        let workspace_cap = tc
            .workspace
            .unwrap_or(self.workspace_access)
            .min(self.workspace_access);
        let mounts = tc
            .mounts
            .iter()
            .map(|m| {
                let mount = self.mounts.get(&m.host).cloned().ok_or_else(|| {
                    LoadError::Grants(format!("{} was not opened", m.host.display()))
                })?;
                Ok((mount, m.access))
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        let limits = &self.limits;
        Ok(ToolGrants {
            enabled: tc.enabled.unwrap_or(true),
            workspace: self.workspace.clone().map(|w| (w, workspace_cap)),
            mounts,
            env: tc.env,
            network: tc.network,
            timeout: Duration::from_millis(tc.timeout_ms.unwrap_or(limits.timeout_ms)),
            memory_bytes: tc.memory_mib.unwrap_or(limits.memory_mib) << 20,
            write_bytes: tc.write_mib.unwrap_or(limits.write_mib) << 20,
            defer_loading: tc.defer_loading,
            secrets: self.secrets.clone(),
            programs: if tool == programs::SHELL {
                self.programs.clone()
            } else {
                Arc::new(ProgramGrants {
                    granted: Vec::new(),
                    helper: self.programs.helper.clone(),
                })
            },
        })
    }
}

/// One tool's grants.
#[derive(Clone, Debug)]
pub struct ToolGrants {
    /// Whether the tool is switched on.
    pub enabled: bool,
    /// The workspace and the most access this tool gets to it.
    pub workspace: Option<(Arc<HostMount>, WorkspaceAccess)>,
    /// Extra directories, with their access.
    pub mounts: Vec<(Arc<HostMount>, WorkspaceAccess)>,
    /// Environment variable names it may read.
    pub env: Vec<String>,
    /// Host patterns it may reach.
    pub network: Vec<String>,
    /// Its time limit per call.
    pub timeout: Duration,
    /// Its memory limit per call, in bytes.
    pub memory_bytes: u64,
    /// What one call may write to writable mounts, in bytes.
    pub write_bytes: u64,
    /// The operator's override of the tool's `defer_loading`.
    pub defer_loading: Option<bool>,
    /// The secrets: added to its requests, taken out of what it hands back.
    pub secrets: Arc<Secrets>,
    /// The native programs it may run (`bash`'s alone).
    pub programs: Arc<ProgramGrants>,
}

impl ToolGrants {
    /// Grants that give nothing (for tests and the preflight phase).
    pub fn nothing(limits: &Limits) -> ToolGrants {
        ToolGrants {
            enabled: true,
            workspace: None,
            mounts: Vec::new(),
            env: Vec::new(),
            network: Vec::new(),
            timeout: Duration::from_millis(limits.timeout_ms),
            memory_bytes: limits.memory_mib << 20,
            write_bytes: limits.write_mib << 20,
            defer_loading: None,
            secrets: Arc::default(),
            programs: Arc::default(),
        }
    }

    /// Whether a call of a tool that asks for `d`'s capabilities could reach
    /// the network at all.
    pub fn network_possible(&self, d: &Descriptor) -> bool {
        !self.network.is_empty() && d.wants_network()
    }

    /// What one call with effective `flags` gets: the grant intersected with
    /// the tool's request, with read-only handles unless the flags allow
    /// writing. A granted name takes its value from the host's environment
    /// (the operator's); `context_env` (the agent's context, which tools
    /// change) only supplies names the host's environment does not set, so
    /// one tool's `set-env` never overrides what the operator granted.
    pub fn for_call(
        &self,
        d: &Descriptor,
        flags: SafetyFlags,
        context_env: &BTreeMap<String, String>,
    ) -> CallGrants {
        let requested = d.capabilities.workspace;
        let mut mounts = Vec::new();
        let mut add = |mount: &Arc<HostMount>, granted: WorkspaceAccess| {
            let access = granted.min(requested);
            if access == WorkspaceAccess::None {
                return;
            }
            mounts.push(CallMount {
                mount: mount.clone(),
                writable: access == WorkspaceAccess::ReadWrite && flags.may_write(),
            });
        };
        if let Some((ws, cap)) = &self.workspace {
            add(ws, *cap);
        }
        for (m, access) in &self.mounts {
            add(m, *access);
        }
        let env = d
            .capabilities
            .env_vars
            .iter()
            .filter(|name| self.env.contains(name))
            .filter_map(|name| {
                let value = std::env::var(name)
                    .ok()
                    .or_else(|| context_env.get(name).cloned())?;
                Some((name.clone(), value))
            })
            .collect();
        let network = self.network_possible(d).then(|| {
            Arc::new(NetPolicy {
                requested: d.capabilities.network_hosts.clone(),
                granted: self.network.clone(),
                safe_methods_only: flags.contains(SafetyFlags::READ_ONLY),
            })
        });
        CallGrants {
            mounts,
            env,
            network,
            timeout: self.timeout,
            memory_bytes: self.memory_bytes,
            write_bytes: self.write_bytes,
            secrets: self.secrets.clone(),
            programs: self.programs.clone(),
        }
    }
}

/// A directory one call can reach.
#[derive(Clone, Debug)]
pub struct CallMount {
    /// The directory.
    pub mount: Arc<HostMount>,
    /// Whether this call may write under it.
    pub writable: bool,
}

/// What one call gets.
#[derive(Clone, Debug)]
pub struct CallGrants {
    /// Directories, with their access in this call.
    pub mounts: Vec<CallMount>,
    /// Environment variables, with their values.
    pub env: Vec<(String, String)>,
    /// The network policy, when the call may reach the network.
    pub network: Option<Arc<NetPolicy>>,
    /// The call's time limit.
    pub timeout: Duration,
    /// The call's memory limit, in bytes.
    pub memory_bytes: u64,
    /// What the call may write to writable mounts, in bytes.
    pub write_bytes: u64,
    /// The secrets: added to its requests, taken out of what it hands back.
    pub secrets: Arc<Secrets>,
    /// The native programs it may run, confined by these grants.
    pub programs: Arc<ProgramGrants>,
}

impl CallGrants {
    /// A call that gets nothing (and may write nothing).
    pub fn nothing(timeout: Duration, memory_bytes: u64) -> CallGrants {
        CallGrants {
            mounts: Vec::new(),
            env: Vec::new(),
            network: None,
            timeout,
            memory_bytes,
            write_bytes: 0,
            secrets: Arc::default(),
            programs: Arc::default(),
        }
    }

    /// The mount holding `guest_path` (absolute, normalised) and the path
    /// relative to it.
    pub fn locate(&self, guest_path: &str) -> Option<(&CallMount, PathBuf)> {
        let path = Path::new(guest_path);
        self.mounts
            .iter()
            .filter_map(|m| {
                let rel = path.strip_prefix(&m.mount.guest).ok()?;
                Some((m, rel.to_path_buf()))
            })
            .max_by_key(|(m, _)| m.mount.guest.len())
    }

    /// The host's stamp of the file at `guest_path`, read through the
    /// mount's handle (so a symlink cannot point it outside the mount).
    pub fn stamp(&self, guest_path: &str) -> Option<FileStamp> {
        stamp_in(&self.mounts, guest_path)
    }

    /// Whether `guest_path` is a directory this call can reach: it opens
    /// as one through the mount's handle (one `openat2`).
    pub fn is_dir(&self, guest_path: &str) -> bool {
        self.locate(guest_path)
            .is_some_and(|(mount, rel)| mount.mount.dir.open_dir(dot_if_empty(&rel)).is_ok())
    }
}

/// The host's stamp of the file at `guest_path` in one of `mounts`: its
/// modification time, size and content hash, all of the one file opened
/// through the mount's handle (regular files only; the open does not
/// block on a FIFO).
pub fn stamp_in(mounts: &[CallMount], guest_path: &str) -> Option<FileStamp> {
    use cap_std::fs::OpenOptionsExt;
    let path = Path::new(guest_path);
    let (mount, rel) = mounts
        .iter()
        .filter_map(|m| Some((m, path.strip_prefix(&m.mount.guest).ok()?)))
        .max_by_key(|(m, _)| m.mount.guest.len())?;
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = mount
        .mount
        .dir
        .open_with(dot_if_empty(rel), &options)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let modified = meta.modified().ok()?.into_std();
    let modified_ns = modified.duration_since(UNIX_EPOCH).ok()?.as_nanos();
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(file.into_std()).ok()?;
    Some(FileStamp {
        modified_ns: u64::try_from(modified_ns).ok()?,
        size: meta.len(),
        blake3: *hasher.finalize().as_bytes(),
    })
}

fn dot_if_empty(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    }
}

/// Which HTTP requests a call may make: the host must match both a pattern
/// the tool requested and one the operator granted; a read-only call may
/// only use safe methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetPolicy {
    /// Patterns the tool asked for.
    pub requested: Vec<String>,
    /// Patterns the operator granted.
    pub granted: Vec<String>,
    /// Only GET, HEAD and OPTIONS.
    pub safe_methods_only: bool,
}

impl NetPolicy {
    /// Allows or refuses a request a confined program sends through the
    /// proxy: [`NetPolicy::check`], and [`proxied_port`].
    ///
    /// ```
    /// let policy = airlock_core::grants::NetPolicy {
    ///     requested: vec!["*".into()],
    ///     granted: vec!["example.com".into(), "db.example.com:5432".into()],
    ///     safe_methods_only: false,
    /// };
    /// assert!(policy.check_proxied("CONNECT", "example.com", 443).is_ok());
    /// assert!(policy.check_proxied("CONNECT", "example.com", 22).is_err());
    /// assert!(policy.check_proxied("CONNECT", "db.example.com", 5432).is_ok());
    /// assert!(policy.check_proxied("GET", "example.com", 80).is_ok());
    /// ```
    pub fn check_proxied(&self, method: &str, host: &str, port: u16) -> Result<(), String> {
        self.check(method, host, Some(port))?;
        proxied_port(&self.granted, method, host, port)
    }

    /// Allows or refuses a request, saying why.
    pub fn check(&self, method: &str, host: &str, port: Option<u16>) -> Result<(), String> {
        if self.safe_methods_only && !matches!(method, "GET" | "HEAD" | "OPTIONS") {
            return Err(format!(
                "{method} is not allowed in a read-only call (only GET, HEAD and OPTIONS)"
            ));
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let matches = |patterns: &[String]| patterns.iter().any(|p| host_matches(p, &host, port));
        if !matches(&self.granted) {
            return Err(format!(
                "the host {host} is not in the operator's network grant for this tool \
                 (`--allow-host {host}`, or `network = [...]` under [tools.NAME] in airlock.toml, \
                 grants it)"
            ));
        }
        if !matches(&self.requested) {
            return Err(format!(
                "the host {host} is not among the hosts the tool's descriptor asks for, \
                 so no grant can cover it"
            ));
        }
        Ok(())
    }
}

/// Refuses a port a confined program asks the proxy for that its grant
/// does not name: a pattern without a port reaches only the default port
/// of the request's kind, 443 for a `CONNECT` tunnel (whose bytes the
/// proxy never sees: any protocol could pass) and 80 for plain HTTP; any
/// other needs `host:port` among `patterns`.
pub fn proxied_port(
    patterns: &[String],
    method: &str,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let default = if method == "CONNECT" { 443 } else { 80 };
    let host = host.to_ascii_lowercase();
    let named = |p: &String| {
        p.rsplit_once(':')
            .is_some_and(|(_, n)| n.parse() == Ok(port))
    };
    if port == default
        || patterns
            .iter()
            .any(|p| named(p) && host_matches(p, &host, Some(port)))
    {
        return Ok(());
    }
    Err(format!(
        "port {port} of {host} is not granted: a grant without a port reaches only port \
         {default} through the proxy (`{host}:{port}` grants this one)"
    ))
}

/// Whether `pattern` (`*`, `name`, `name:port`, `*.name`) matches.
fn host_matches(pattern: &str, host: &str, port: Option<u16>) -> bool {
    if pattern == "*" {
        return true;
    }
    let pattern = pattern.to_ascii_lowercase();
    let (pat_host, pat_port) = match pattern.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()),
        None => (pattern.as_str(), None),
    };
    if pat_port.is_some() && pat_port != port {
        return false;
    }
    match pat_host.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => host == pat_host,
    }
}

fn canonical(path: &Path) -> Result<PathBuf, LoadError> {
    std::fs::canonicalize(path).map_err(|e| LoadError::Grants(format!("{}: {e}", path.display())))
}

/// Opens a granted directory after checking it.
fn open_mount(configured: &Path, guest: Option<&str>) -> Result<HostMount, LoadError> {
    let host = canonical(configured)?;
    if !host.is_dir() {
        return Err(LoadError::Grants(format!(
            "{} is not a directory",
            host.display()
        )));
    }
    for forbidden in ["/proc", "/sys", "/dev"] {
        if host.starts_with(forbidden) {
            return Err(LoadError::Grants(format!(
                "{} is under {forbidden}, which is never granted",
                host.display()
            )));
        }
    }
    if host == Path::new("/") {
        return Err(LoadError::Grants(
            "the root directory is never granted".into(),
        ));
    }
    let guest = match guest {
        Some(g) => normalize_guest(g)
            .ok_or_else(|| LoadError::Grants(format!("the mount path {g:?} is not absolute")))?,
        None => host
            .to_str()
            .ok_or_else(|| LoadError::Grants(format!("{} is not UTF-8", host.display())))?
            .to_string(),
    };
    let dir = cap_std::fs::Dir::open_ambient_dir(&host, cap_std::ambient_authority())
        .map_err(|e| LoadError::Grants(format!("{}: {e}", host.display())))?;
    // The identity of what was opened, not of what the path names now.
    let meta = dir
        .dir_metadata()
        .map_err(|e| LoadError::Grants(format!("{}: {e}", host.display())))?;
    let id = (meta.dev(), meta.ino());
    let handle_path = {
        use std::os::fd::{AsFd, AsRawFd};
        let table = if cfg!(target_os = "linux") {
            "/proc/self/fd"
        } else {
            "/dev/fd"
        };
        PathBuf::from(format!("{table}/{}", dir.as_fd().as_raw_fd()))
    };
    let mount = HostMount {
        guest,
        host,
        dir,
        configured: configured.to_path_buf(),
        id,
        handle_path,
    };
    let through_handle = std::fs::metadata(&mount.handle_path)
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        })
        .map_err(|e| {
            LoadError::Grants(format!(
                "{}: cannot reopen it through {} ({e}); is /proc mounted?",
                mount.host.display(),
                mount.handle_path.display()
            ))
        })?;
    if through_handle != id {
        return Err(LoadError::Grants(format!(
            "{}: {} names another directory",
            mount.host.display(),
            mount.handle_path.display()
        )));
    }
    Ok(mount)
}

/// Refuses a grant that reaches Airlock's own state: a writable grant
/// containing it or inside it (a tool could rewrite the configuration,
/// plant a tool, or replace a compiled artifact), and any grant exposing
/// the artifact cache.
fn check_host_state(
    all: &[(Arc<HostMount>, bool, String)],
    host_paths: &[HostPath],
) -> Result<(), LoadError> {
    for state in host_paths {
        let path = resolve_existing(&state.path);
        for (grant, writable, name) in all {
            if !*writable && !state.unreadable {
                continue;
            }
            let contains = path.starts_with(&grant.host);
            let inside = state.is_dir && grant.host.starts_with(&path);
            if contains || inside {
                let access = if *writable { "writable" } else { "readable" };
                let relation = if contains { "contains" } else { "lies inside" };
                let instead = if state.is_dir {
                    "neither holds nor lies inside it"
                } else {
                    "does not hold it"
                };
                let or_read_only = if *writable && !state.unreadable {
                    ", or make the grant read-only"
                } else {
                    ""
                };
                return Err(LoadError::Grants(format!(
                    "{name} ({}) {relation} {} ({}), and tools may not reach Airlock's own \
                     state: the {access} grant would let a tool {}; grant a directory that \
                     {instead}{or_read_only}",
                    grant.host.display(),
                    state.what,
                    path.display(),
                    if *writable { "rewrite it" } else { "read it" },
                )));
            }
        }
    }
    Ok(())
}

/// Refuses a configured path (a grant, or one of Airlock's own) that runs
/// through a symbolic link inside a writable grant: a tool could re-point
/// the link, and the path would name another directory at the next start.
fn check_links(
    all: &[(Arc<HostMount>, bool, String)],
    host_paths: &[HostPath],
) -> Result<(), LoadError> {
    let writable: Vec<&Path> = all
        .iter()
        .filter(|(_, w, _)| *w)
        .map(|(m, _, _)| m.host.as_path())
        .collect();
    if writable.is_empty() {
        return Ok(());
    }
    let configured = all
        .iter()
        .map(|(m, _, name)| (m.configured.clone(), name.clone()))
        .chain(
            host_paths
                .iter()
                .map(|p| (p.path.clone(), p.what.to_string())),
        );
    for (path, name) in configured {
        if let Some(link) = planted_link(&path, &writable) {
            return Err(LoadError::Grants(format!(
                "{name} ({}) runs through the symbolic link {}, which lies inside a writable \
                 grant: a tool could re-point it; configure the path the link points to instead",
                path.display(),
                link.display()
            )));
        }
    }
    Ok(())
}

/// Refuses a directory that is not the one granted before under the same
/// configured path.
fn check_pins(all: &[(Arc<HostMount>, bool, String)], previous: &Grants) -> Result<(), LoadError> {
    for (mount, _, name) in all {
        let before = previous
            .all_mounts()
            .find(|m| m.configured == mount.configured);
        if let Some(before) = before
            && before.id != mount.id
        {
            return Err(LoadError::Grants(format!(
                "{name} ({}) is no longer the directory that was granted ({}): it was moved, \
                 replaced or re-pointed since; the grant is refused until airlock is restarted \
                 with the path checked",
                mount.configured.display(),
                before.host.display()
            )));
        }
    }
    Ok(())
}

/// `path` made absolute and canonical as far as it exists, with the rest
/// appended (Airlock's state may not exist yet).
fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(&existing) {
            return rest.iter().rev().fold(canonical, |p, c| p.join(c));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The first symbolic link that resolving `path` passes through whose
/// directory lies inside one of `writable`, following every link on the
/// way as the kernel would.
fn planted_link(path: &Path, writable: &[&Path]) -> Option<PathBuf> {
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut current = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir().ok()?
    };
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if writable.iter().any(|w| current.starts_with(w)) {
                    return Some(next);
                }
                hops += 1;
                let target = std::fs::read_link(&next).ok()?;
                if hops > 40 {
                    return None;
                }
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(n) => pending.push_front(n.to_os_string()),
                        Component::ParentDir => pending.push_front("..".into()),
                        _ => {}
                    }
                }
            }
            _ => current = next,
        }
    }
    None
}

/// Refuses a grant whose root lies strictly inside a writable grant: a tool
/// writing the outer directory could replace the inner root with a link.
fn check_nesting(all: &[(Arc<HostMount>, bool, String)]) -> Result<(), LoadError> {
    for (outer, outer_writable, outer_name) in all {
        for (inner, _, inner_name) in all {
            if *outer_writable && inner.host != outer.host && inner.host.starts_with(&outer.host) {
                return Err(LoadError::Grants(format!(
                    "{inner_name} ({}) lies inside {outer_name} ({}), which is writable: a tool \
                     could replace it; grant a directory outside it, or make {outer_name} read-only",
                    inner.host.display(),
                    outer.host.display()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{MountConfig, ToolConfig};
    use crate::descriptor::Capabilities;

    fn descriptor(access: WorkspaceAccess, hosts: &[&str], env: &[&str]) -> Descriptor {
        let mut d = Descriptor::new("t", "t");
        d.capabilities = Capabilities {
            workspace: access,
            network_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            env_vars: env.iter().map(|s| s.to_string()).collect(),
        };
        d
    }

    fn config_with_workspace(dir: &Path) -> Config {
        Config {
            workspace: Some(dir.to_path_buf()),
            ..Config::default()
        }
    }

    #[test]
    fn calls_get_the_intersection_of_grant_request_and_flags() {
        let tmp = tempfile::tempdir().unwrap();
        let grants = Grants::from_config(&config_with_workspace(tmp.path())).unwrap();
        let tool = grants.for_tool("t").unwrap();
        let none = BTreeMap::new();

        let rw = descriptor(WorkspaceAccess::ReadWrite, &[], &[]);
        let call = tool.for_call(&rw, SafetyFlags::empty(), &none);
        assert!(call.mounts[0].writable);
        let call = tool.for_call(&rw, SafetyFlags::READ_ONLY, &none);
        assert!(
            !call.mounts[0].writable,
            "read-only calls get read-only handles"
        );
        let call = tool.for_call(&rw, SafetyFlags::CONCURRENCY_SAFE, &none);
        assert!(
            !call.mounts[0].writable,
            "concurrency-safe calls get read-only handles"
        );

        let ro = descriptor(WorkspaceAccess::Read, &[], &[]);
        assert!(!tool.for_call(&ro, SafetyFlags::empty(), &none).mounts[0].writable);
        let nothing = descriptor(WorkspaceAccess::None, &[], &[]);
        assert!(
            tool.for_call(&nothing, SafetyFlags::empty(), &none)
                .mounts
                .is_empty()
        );

        let guest = tmp.path().canonicalize().unwrap();
        assert_eq!(call.mounts[0].mount.guest, guest.to_str().unwrap());
    }

    #[test]
    fn read_only_workspaces_stay_read_only() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = config_with_workspace(tmp.path());
        config.workspace_access = WorkspaceAccess::Read;
        let grants = Grants::from_config(&config).unwrap();
        let d = descriptor(WorkspaceAccess::ReadWrite, &[], &[]);
        let call =
            grants
                .for_tool("t")
                .unwrap()
                .for_call(&d, SafetyFlags::empty(), &BTreeMap::new());
        assert!(!call.mounts[0].writable);
    }

    #[test]
    fn env_and_network_need_both_grant_and_request() {
        let mut config = Config::default();
        config.tools.insert(
            "t".into(),
            ToolConfig {
                env: vec!["AIRLOCK_TEST_A".into(), "AIRLOCK_TEST_B".into()],
                network: vec!["*.example.com".into()],
                ..ToolConfig::default()
            },
        );
        let grants = Grants::from_config(&config).unwrap();
        let tool = grants.for_tool("t").unwrap();
        let ctx_env = BTreeMap::from([("AIRLOCK_TEST_A".to_string(), "from-context".to_string())]);
        let d = descriptor(
            WorkspaceAccess::None,
            &["api.example.com"],
            &["AIRLOCK_TEST_A", "HOME"],
        );
        let call = tool.for_call(&d, SafetyFlags::empty(), &ctx_env);
        assert_eq!(
            call.env,
            [("AIRLOCK_TEST_A".to_string(), "from-context".to_string())]
        );
        let net = call.network.unwrap();
        assert!(net.check("POST", "api.example.com", Some(443)).is_ok());

        // A variable the operator's environment sets keeps its value
        // whatever a tool put in the context.
        let path = std::env::var("PATH").expect("tests run with PATH set");
        let mut granted = grants.for_tool("t").unwrap();
        granted.env.push("PATH".into());
        let wants_path = descriptor(WorkspaceAccess::None, &[], &["PATH"]);
        let ctx_env = BTreeMap::from([("PATH".to_string(), "/evil".to_string())]);
        let call = granted.for_call(&wants_path, SafetyFlags::empty(), &ctx_env);
        assert_eq!(call.env, [("PATH".to_string(), path)]);
        assert!(
            net.check("GET", "other.example.com", None)
                .unwrap_err()
                .contains("descriptor asks for")
        );
        assert!(
            net.check("GET", "evil.com", None)
                .unwrap_err()
                .contains("operator")
        );

        let call = tool.for_call(&d, SafetyFlags::READ_ONLY, &ctx_env);
        assert!(
            call.network
                .unwrap()
                .check("POST", "api.example.com", None)
                .is_err()
        );

        let no_net = descriptor(WorkspaceAccess::None, &[], &[]);
        assert!(
            tool.for_call(&no_net, SafetyFlags::empty(), &ctx_env)
                .network
                .is_none()
        );
    }

    #[test]
    fn host_patterns_match_precisely() {
        assert!(host_matches("example.com", "example.com", Some(80)));
        assert!(!host_matches("example.com", "www.example.com", None));
        assert!(host_matches("*.example.com", "www.example.com", None));
        assert!(!host_matches("*.example.com", "example.com", None));
        assert!(!host_matches("*.example.com", "evilexample.com", None));
        assert!(host_matches("127.0.0.1:8080", "127.0.0.1", Some(8080)));
        assert!(!host_matches("127.0.0.1:8080", "127.0.0.1", Some(8081)));
        assert!(host_matches("*", "anything", None));
    }

    #[test]
    fn refuses_dangerous_grants() {
        for bad in ["/proc", "/sys/kernel", "/dev", "/"] {
            let err = Grants::from_config(&config_with_workspace(Path::new(bad))).unwrap_err();
            assert!(err.to_string().contains("never granted"), "{bad}: {err}");
        }
        let err =
            Grants::from_config(&config_with_workspace(Path::new("/nonexistent/x"))).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/x"), "{err}");
    }

    #[test]
    fn refuses_grants_nested_in_a_writable_one() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("inner")).unwrap();
        let mut config = config_with_workspace(tmp.path());
        config.tools.insert(
            "t".into(),
            ToolConfig {
                mounts: vec![MountConfig {
                    host: tmp.path().join("inner"),
                    path: Some("/data".into()),
                    access: WorkspaceAccess::Read,
                }],
                ..ToolConfig::default()
            },
        );
        let err = Grants::from_config(&config).unwrap_err();
        assert!(err.to_string().contains("writable"), "{err}");
        config.workspace_access = WorkspaceAccess::Read;
        let grants = Grants::from_config(&config).unwrap();
        let mounts = &grants.for_tool("t").unwrap().mounts;
        assert_eq!(mounts[0].0.guest, "/data");
    }

    #[test]
    fn stamps_files_through_the_handle() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", tmp.path().join("escape")).unwrap();
        let grants = Grants::from_config(&config_with_workspace(tmp.path())).unwrap();
        let d = descriptor(WorkspaceAccess::Read, &[], &[]);
        let call =
            grants
                .for_tool("t")
                .unwrap()
                .for_call(&d, SafetyFlags::empty(), &BTreeMap::new());
        let root = &call.mounts[0].mount.guest;
        assert_eq!(call.stamp(&format!("{root}/a.txt")).unwrap().size, 5);
        assert!(
            call.stamp(&format!("{root}/escape")).is_none(),
            "symlinks out are not followed"
        );
        assert!(call.stamp("/etc/hostname").is_none());
        assert!(call.is_dir(root));
        assert!(!call.is_dir(&format!("{root}/a.txt")));
    }
}
