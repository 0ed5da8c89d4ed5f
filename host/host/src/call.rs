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
}

impl ToolUse {
    /// A tool use.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }
}

/// How a permission question was settled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PermissionRecord {
    /// `allow` or `deny`.
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
