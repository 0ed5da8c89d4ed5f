//! Where Airlock keeps its own state by default (the XDG directories), and
//! [`HostPath`], a file or directory of that state no grant may reach.

use std::path::PathBuf;

/// A file or directory holding Airlock's own state ([`Config::host_paths`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPath {
    /// What it is, for error messages.
    pub what: &'static str,
    /// Where it is (it need not exist yet).
    pub path: PathBuf,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Whether no grant may even read it (the artifact cache: its key
    /// authenticates what the host runs as native code).
    pub unreadable: bool,
}

/// Where `airlock approve` records the tool code the operator approved:
/// `approved.json` in Airlock's configuration directory.
pub fn approvals_file() -> Option<PathBuf> {
    user_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("airlock/approved.json"))
}

/// The default cache of compiled tools: `$XDG_CACHE_HOME/airlock/artifacts`,
/// or `~/.cache/airlock/artifacts`.
pub fn default_cache_dir() -> Option<PathBuf> {
    user_dir("XDG_CACHE_HOME", ".cache").map(|d| d.join("airlock/artifacts"))
}

/// Where results too large to return are saved when `results_dir` names no
/// other directory: `$XDG_STATE_HOME/airlock/results`, or
/// `~/.local/state/airlock/results`, outside any workspace.
pub fn default_results_dir() -> Option<PathBuf> {
    user_dir("XDG_STATE_HOME", ".local/state").map(|d| d.join("airlock/results"))
}

/// Where `airlock call` keeps each workspace's context between calls:
/// `$XDG_STATE_HOME/airlock/contexts`, or `~/.local/state/airlock/contexts`.
pub fn default_contexts_dir() -> Option<PathBuf> {
    user_dir("XDG_STATE_HOME", ".local/state").map(|d| d.join("airlock/contexts"))
}

/// The user's tool directory, where `just build-guests` installs tools:
/// `$XDG_DATA_HOME/airlock/tools`, or `~/.local/share/airlock/tools`.
pub fn default_tool_dir() -> Option<PathBuf> {
    user_dir("XDG_DATA_HOME", ".local/share").map(|d| d.join("airlock/tools"))
}

/// The default audit trail: `$XDG_STATE_HOME/airlock/audit.jsonl`, or
/// `~/.local/state/airlock/audit.jsonl`.
pub fn default_audit_file() -> Option<PathBuf> {
    user_dir("XDG_STATE_HOME", ".local/state").map(|d| d.join("airlock/audit.jsonl"))
}

/// The default directory of skills: `$XDG_DATA_HOME/airlock/skills`, or
/// `~/.local/share/airlock/skills`.
pub fn default_skills_dir() -> Option<PathBuf> {
    user_dir("XDG_DATA_HOME", ".local/share").map(|d| d.join("airlock/skills"))
}

/// Where `airlock new` and `airlock build` put the SDKs a tool project
/// depends on: `$XDG_DATA_HOME/airlock/sdk`, or `~/.local/share/airlock/sdk`.
/// No writable grant may reach it.
pub fn default_sdk_dir() -> Option<PathBuf> {
    user_dir("XDG_DATA_HOME", ".local/share").map(|d| d.join("airlock/sdk"))
}

pub(crate) fn user_dir(xdg_var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(xdg_var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)))
}
