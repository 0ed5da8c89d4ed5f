//! Asking the user: the question, the answer, and the prompter an
//! embedder implements.

use crate::call::Caller;
use airlock_core::descriptor::SafetyFlags;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

/// A question for the user.
#[derive(Clone, Debug, Serialize)]
pub struct PermissionRequest {
    /// The tool's name.
    pub tool_name: String,
    /// The tool use's id.
    pub tool_use_id: String,
    /// The input the call would run with.
    pub input: Value,
    /// Why the host asks.
    pub reason: String,
    /// The call's effective flags.
    pub flags: SafetyFlags,
    /// Who asked for the call, when a front end authenticated them.
    pub caller: Option<Caller>,
}

/// The user's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Yes, this once.
    Allow,
    /// Yes, and to every later call of this tool in this context.
    AllowAlways,
    /// No, optionally saying why (shown to the model).
    Deny(Option<String>),
}

/// Asks the user. The embedder implements it; the CLI prompts on a
/// terminal. It may be asked by several calls at once.
#[async_trait]
pub trait PermissionPrompter: Send + Sync {
    /// Asks about one call.
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer;
}

/// A prompter for contexts with nobody to ask: it denies, saying how to
/// allow the call instead.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyPrompter;

#[async_trait]
impl PermissionPrompter for DenyPrompter {
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer {
        PermissionAnswer::Deny(Some(format!(
            "{} needs approval ({}), and there is nobody to ask. Allow it with a rule \
             (permissions.allow = [\"{}\"]) or another permission mode.",
            request.tool_name, request.reason, request.tool_name
        )))
    }
}

/// A prompter that says yes to everything (`airlock --yes`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowPrompter;

#[async_trait]
impl PermissionPrompter for AllowPrompter {
    async fn ask(&self, _request: &PermissionRequest) -> PermissionAnswer {
        PermissionAnswer::Allow
    }
}
