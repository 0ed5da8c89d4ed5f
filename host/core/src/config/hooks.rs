//! The `hooks` section's shape (Claude Code's `hooks`): which tools a group
//! of handlers applies to, and each handler. Values only: the pipeline
//! runs them.

use serde::Deserialize;
use std::path::PathBuf;

/// The default time a hook may take, in seconds (Claude Code's default).
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// The `hooks` section of the configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Hooks run before a call's permission check.
    #[serde(rename = "PreToolUse", default)]
    pub pre_tool_use: Vec<HookMatcher>,
    /// Hooks run after a successful call.
    #[serde(rename = "PostToolUse", default)]
    pub post_tool_use: Vec<HookMatcher>,
}

/// Which tools a group of hooks applies to.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookMatcher {
    /// The matcher, tested against the tool's name and aliases: `*`, empty
    /// or absent matches every tool; a value of letters, digits, `_`, `-`,
    /// spaces, `,` and `|` is a list of exact names (`Write|Edit`);
    /// anything else is an unanchored regex.
    #[serde(default)]
    pub matcher: Option<String>,
    /// The handlers.
    pub hooks: Vec<HookSpec>,
}

/// One handler.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum HookSpec {
    /// A shell command.
    Command {
        /// The command, run with `sh -c`.
        command: String,
        /// Seconds it may take (default 600).
        #[serde(default)]
        timeout: Option<u64>,
    },
    /// A component exporting `airlock:tool/hook`.
    Wasm {
        /// The component file.
        component: PathBuf,
        /// Seconds it may take (default 600).
        #[serde(default)]
        timeout: Option<u64>,
    },
}
