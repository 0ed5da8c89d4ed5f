//! Airlock: a WebAssembly-sandboxed tool host for AI agents.
//!
//! Tools are WASI 0.2 components built against the `airlock:tool` WIT
//! world. The host validates every call, confines each component to the
//! directories, hosts and environment variables the operator granted (and
//! the call's safety flags allow), and stops it with epoch interruption
//! when it runs out of time or is cancelled.
//!
//! This crate is what an embedder depends on: the [`Airlock`] facade over
//! the [`Registry`] of tools, an agent's [`ToolContext`], the pipeline one
//! tool use takes ([`pipeline`]: validation, hooks, permission, the call,
//! result processing, telemetry), the streaming [`Executor`] that schedules
//! many by their flags, and the model API [`adapters`]. The values it shares
//! with the crates beneath it (descriptors, errors, the [`Tool`] trait,
//! grants, configuration: airlock-core) and the wasmtime [`Engine`]
//! (airlock-engine) are re-exported here, each at one path: the common types
//! at the root, the rest in the module named after their kind. The MCP
//! server is the airlock-mcp crate; the `airlock` binary, airlock-cli.
//!
//! One call of a bundled tool over a workspace (`examples/embed.rs` runs a
//! whole model turn through the streaming executor):
//!
//! ```no_run
//! use airlock_host::{Airlock, Config, ToolUse};
//! use serde_json::json;
//!
//! # async fn run() -> anyhow::Result<()> {
//! let config = Config {
//!     workspace: Some("/path/to/project".into()),
//!     ..Config::default()
//! };
//! let airlock = Airlock::new(config).await?;
//! let mut cx = airlock.context();
//! let use_ = ToolUse::new("toolu_1", "read", json!({"file_path": "/path/to/project/README.md"}));
//! let result = airlock.call(&mut cx, use_).await;
//! println!("{}", result.text());
//! # Ok(())
//! # }
//! ```

/// The audit trail's format, writer and verifier.
pub use airlock_audit as audit_trail;
pub use airlock_bundled as bundled;
pub use airlock_core::{host_files, json, lock, sanitize, secrets, skills};
#[cfg(feature = "mcp-client")]
pub use airlock_mcp_client as mcp_client;
/// Native programs confined by the grants (Linux): a binary that embeds
/// Airlock calls [`native::serve_if_asked`] first in `main`, so it is its
/// own sandbox helper.
pub use airlock_native as native;

/// The configuration's parts beside [`Config`] and [`Limits`]
/// (`airlock.toml`, with Claude Code's hooks and settings).
pub mod config {
    pub use airlock_core::config::{
        AuditConfig, AuditFailure, AuditSink, AuthConfig, ConfigError, ContextStoreUrl,
        ContextsConfig, HostPath, McpServerConfig, MountConfig, ScopeTools, SecretConfig,
        ServerWorkspace, ToolConfig, ToolSearchMode, TrustRule, approvals_file, default_cache_dir,
        default_contexts_dir, default_sdk_dir, default_skills_dir, default_tool_dir, hooks,
        nearest_name, settings,
    };
}

/// Descriptor parts and checks beside [`Descriptor`] and its flags.
pub mod descriptor {
    pub use airlock_core::descriptor::{
        Capabilities, DEFAULT_MAX_RESULT_SIZE, MAX_RESULT_SIZE_CEILING, is_env_name,
        is_host_pattern, is_portable_name, schema_root_problems,
    };
}

/// What crosses the [`Tool`] trait beside the types at the root.
pub mod tool {
    pub use airlock_core::tool::{
        CallContext, CancellationToken, Catalog, Invocation, LogEvent, LogLevel, Message,
        ProgressEvent, ProgressSink, ReadFiles, Role,
    };
}

/// One tool's and one call's share of the [`Grants`].
pub mod grants {
    pub use airlock_core::grants::{
        CallGrants, CallMount, FileStamp, HostMount, NetPolicy, ToolGrants, normalize_guest,
        stamp_in,
    };
}

/// Claude Code's permission rules beside [`PermissionMode`].
pub mod permissions {
    pub use airlock_core::permissions::{CallFacts, PermissionsConfig, Rule, RuleKind};
}

/// The engine's parts beside [`Engine`] and [`WasmTool`].
pub mod engine {
    #[cfg(any(test, feature = "test-support"))]
    #[doc(hidden)]
    pub use airlock_engine::testing;
    pub use airlock_engine::{HookAnswer, Settled, Snapshot, WasmHook};
}

pub mod adapters;
mod airlock;
pub mod approvals;
pub mod audit;
mod call;
mod context;
pub mod context_store;
mod executor;
pub mod pipeline;
pub mod policy;
mod registry;
pub mod skill_tool;
pub mod tool_search;

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub use registry::testing;

pub use airlock::Airlock;
pub use airlock_core::config::{Config, Limits};
pub use airlock_core::descriptor::{
    Descriptor, InterruptBehavior, Preflight, SafetyFlags, WorkspaceAccess,
};
pub use airlock_core::error::{CallError, ErrorClass, LoadError};
pub use airlock_core::grants::Grants;
pub use airlock_core::permissions::PermissionMode;
pub use airlock_core::skills::{Skill, SkillFailure, SkillFile, Skills};
pub use airlock_core::tool::{
    ContentBlock, ContextChange, PermissionDecision, Tool, ToolOrigin, ToolOutput,
};
pub use airlock_engine::{COMPILE_LOG, CompileEvent, Engine, WasmTool};
pub use call::{CallControl, Caller, PermissionRecord, ToolResult, ToolUse};
pub use context::{Completed, Denial, READ_FILE_CACHE, ToolContext};
pub use executor::{Calls, Executor, ExecutorEvent, ExecutorHandle, Submit, UseEvents};
pub use pipeline::prompt::{
    AllowPrompter, DenyPrompter, PermissionAnswer, PermissionPrompter, PermissionRequest,
};
pub use registry::{Entry, LoadFailure, Registry, SourceStamp};
