//! One tool use and its one result, as they cross every layer: what a
//! model asked for, how a caller follows and stops it, and what came back.
//! Values only.

use crate::policy::DecisionSource;
use airlock_core::descriptor::SafetyFlags;
use airlock_core::error::CallError;
use airlock_core::tool::{CancellationToken, ProgressSink, ToolOutput};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// A tool use, as a model emits it.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolUse {
    /// Its id (`toolu_...`, `call_...`).
    pub id: String,
    /// The tool's name or alias.
    pub name: String,
    /// The input.
    pub input: Value,
    /// Who asked for it, when a front end authenticated them (never read
    /// from a model's output).
    #[serde(skip)]
    pub caller: Option<Caller>,
}

impl ToolUse {
    /// A tool use.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            caller: None,
        }
    }

    /// This use, asked for by `caller`.
    pub fn with_caller(mut self, caller: Option<Caller>) -> Self {
        self.caller = caller;
        self
    }
}

/// Who asked for a tool use, as a front end authenticated them (over MCP:
/// an OAuth access token's subject and client). It goes into the use's
/// `execute_tool` span (`enduser.id`) and its permission question.
///
/// ```
/// use airlock_host::Caller;
/// let caller = Caller { subject: "alice".into(), client_id: Some("claude-code".into()) };
/// assert_eq!(caller.to_string(), "alice (client claude-code)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// The subject (a user or a service).
    pub subject: String,
    /// The client it used, when known.
    pub client_id: Option<String>,
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.client_id {
            Some(client) => write!(f, "{} (client {client})", self.subject),
            None => f.write_str(&self.subject),
        }
    }
}

/// How a permission question was settled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PermissionRecord {
    /// `allow` or `deny`; `ask` when the use stopped while the user was
    /// being asked (an MCP 2026-07-28 round that returned the question to
    /// its client, whose answer comes with the use sent again).
    pub decision: &'static str,
    /// Who decided.
    pub source: DecisionSource,
}

/// The result of one tool use: exactly one per use.
#[derive(Clone, Debug, Serialize)]
pub struct ToolResult {
    /// The tool use's id.
    pub id: String,
    /// The tool's name, as registered (an alias resolves to it).
    pub name: String,
    /// The call's effective flags, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<SafetyFlags>,
    /// The output, or why there is none.
    pub outcome: Result<ToolOutput, CallError>,
    /// How permission was settled, if the use got that far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionRecord>,
    /// Context from hooks, for the model (after the result).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_context: Vec<String>,
    /// Where an oversized result was saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spilled_to: Option<String>,
    /// Context changes that were refused, one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused_changes: Vec<String>,
    /// How long the use took.
    pub duration: Duration,
}

impl ToolResult {
    /// A result for a use that failed before it ran.
    pub fn failed(id: impl Into<String>, name: impl Into<String>, error: CallError) -> ToolResult {
        ToolResult {
            id: id.into(),
            name: name.into(),
            flags: None,
            outcome: Err(error),
            permission: None,
            additional_context: Vec::new(),
            spilled_to: None,
            refused_changes: Vec::new(),
            duration: Duration::ZERO,
        }
    }

    /// Whether the use failed.
    pub fn is_error(&self) -> bool {
        self.outcome.is_err()
    }

    /// What the model should see: the output's text, or the error's message.
    pub fn text(&self) -> String {
        match &self.outcome {
            Ok(output) => output.text_content(),
            Err(e) => e.message.clone(),
        }
    }
}

/// How a caller follows and stops one use.
#[derive(Clone, Debug, Default)]
pub struct CallControl {
    /// Where progress goes.
    pub progress: ProgressSink,
    /// Cancels the use.
    pub cancel: CancellationToken,
}
