//! Airlock's plain values, shared by every crate above: tool descriptors
//! and safety flags, errors, bounded JSON, the cleaning of guest text, the
//! [`tool::Tool`] trait and the values crossing it, the operator's grants,
//! the configuration with Claude Code's permission and hook shapes,
//! `airlock.lock`, and skills (the Agent Skills format).
//!
//! It knows nothing about wasm, MCP or any runtime: no wasmtime, rmcp or
//! hyper, and tokio only for its channels.

pub mod config;
pub mod descriptor;
pub mod error;
pub mod grants;
pub mod guest_path;
pub mod host_files;
pub mod json;
pub mod lock;
pub mod permissions;
pub mod programs;
pub mod sanitize;
pub mod secrets;
pub mod skills;
pub mod tool;
