//! Airlock: a WebAssembly-sandboxed tool host for AI agents.
//!
//! Tools are WASI 0.2 components built against the `airlock:tool` WIT
//! world. The host validates every call, confines each component to the
//! directories, hosts and environment variables the operator granted (and
//! the call's safety flags allow), and stops it with epoch interruption
//! when it runs out of time or is cancelled.
//!
//! A call takes one path through the modules, top to bottom:
//!
//! - [`config`]: `airlock.toml`, with Claude Code [`config::settings`] files merged
//!   in; [`grants`]: what each tool and call gets;
//! - [`engine`]: wasmtime, the linker allowlist, the [`WasmTool`] adapter;
//! - [`registry`]: the tools by name, loaded and checked;
//! - [`context`]: the agent's cwd, env, state, read-file cache, mode and
//!   denials;
//! - [`pipeline`]: one tool use from input to result: validation, hooks,
//!   permission, the call, result processing, telemetry;
//! - [`executor`]: many tool uses as a model streams them, scheduled by
//!   their flags, results in order;
//! - [`tool_search`]: the built-in tool that finds deferred tools;
//! - [`adapters`]: model API formats in and out;
//! - `mcp` (feature `mcp`): the tools served over the Model Context
//!   Protocol, each session through its own executor;
//! - `mcp_client` (feature `mcp-client`): external MCP servers' tools
//!   mounted as `mcp__server__tool`.
//!
//! [`Airlock`] bundles them for an embedder; the `airlock` binary (feature
//! `cli`) is a thin front end over it.

#![deny(missing_docs)]

pub use airlock_bundled as bundled;
pub use airlock_core::{
    config, descriptor, error, grants, host_files, json, permissions, sanitize, tool,
};
pub use airlock_engine as engine;
#[cfg(feature = "mcp-client")]
pub use airlock_mcp_client as mcp_client;

pub mod adapters;
pub mod airlock;
pub mod approvals;
mod call;
pub mod context;
pub mod executor;
pub mod pipeline;
pub mod policy;
pub mod registry;
pub mod tool_search;

pub use airlock::Airlock;
pub use call::{CallControl, PermissionRecord, ToolResult, ToolUse};
pub use config::{Config, Limits};
pub use context::ToolContext;
pub use descriptor::{Descriptor, InterruptBehavior, Preflight, SafetyFlags, WorkspaceAccess};
pub use engine::{Engine, WasmTool};
pub use error::{CallError, ErrorClass, LoadError};
pub use executor::{Calls, Executor, ExecutorEvent, ExecutorHandle, UseEvents};
pub use grants::Grants;
pub use permissions::PermissionMode;
pub use pipeline::prompt::{PermissionAnswer, PermissionPrompter, PermissionRequest};
pub use registry::Registry;
pub use tool::{ContentBlock, ContextChange, PermissionDecision, Tool, ToolOrigin, ToolOutput};
