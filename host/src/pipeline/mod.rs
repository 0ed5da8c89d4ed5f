//! The pipeline: the one path every tool use takes, from a tool-use block
//! to a result.
//!
//! Today: look the tool up, bound the input, classify it, compute the
//! call's grants from its effective flags, validate (schema, then the
//! tool's own check), call, check structured output against the output
//! schema, and apply the context changes. Permissions, hooks, result
//! spilling and telemetry join this path as stages of their own; there is
//! no second path.

mod validate;

pub use validate::check_schema;

use crate::Airlock;
use crate::context::ToolContext;
use crate::descriptor::SafetyFlags;
use crate::error::{CallError, ErrorClass};
use crate::json;
use crate::registry::Entry;
use crate::tool::{CancellationToken, Invocation, ProgressSink, ToolOutput};
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, Instant};

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
    /// Context changes that were refused, one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused_changes: Vec<String>,
    /// How long the use took.
    pub duration: Duration,
}

impl ToolResult {
    /// Whether the use failed.
    pub fn is_error(&self) -> bool {
        self.outcome.is_err()
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

/// Runs one tool use to its result.
pub async fn run(
    airlock: &Airlock,
    cx: &mut ToolContext,
    tool_use: ToolUse,
    control: CallControl,
) -> ToolResult {
    let started = Instant::now();
    let Some(entry) = airlock.registry().get(&tool_use.name) else {
        return ToolResult {
            id: tool_use.id,
            name: tool_use.name.clone(),
            flags: None,
            outcome: Err(CallError::new(
                ErrorClass::UnknownTool,
                format!("No such tool available: {}", tool_use.name),
            )),
            refused_changes: Vec::new(),
            duration: started.elapsed(),
        };
    };
    let name = entry.descriptor().name.clone();
    let mut flags = None;
    let mut refused_changes = Vec::new();
    let max_depth = airlock.grants().limits().json_depth;
    let outcome = run_entry(
        entry,
        cx,
        &tool_use,
        control,
        max_depth,
        &mut flags,
        &mut refused_changes,
    )
    .await;
    ToolResult {
        id: tool_use.id,
        name,
        flags,
        outcome,
        refused_changes,
        duration: started.elapsed(),
    }
}

async fn run_entry(
    entry: &Entry,
    cx: &mut ToolContext,
    tool_use: &ToolUse,
    control: CallControl,
    max_depth: usize,
    flags_out: &mut Option<SafetyFlags>,
    refused: &mut Vec<String>,
) -> Result<ToolOutput, CallError> {
    let d = entry.descriptor();
    let limits = (entry.grants.timeout, entry.grants.memory_bytes);
    let input = &tool_use.input;
    json::check_depth(input, max_depth)
        .map_err(|e| CallError::invalid_input(format!("The input is rejected: {e}")))?;

    let mut inv = Invocation::new(
        tool_use.id.clone(),
        cx.call_context(&d.name),
        crate::grants::CallGrants::nothing(limits.0, limits.1),
        cx.read_files().clone(),
    );
    inv.progress = control.progress;
    inv.cancel = control.cancel;

    let classified = entry.tool.classify(&mut inv, input).await?;
    let flags = SafetyFlags::effective(d.flags, classified);
    *flags_out = Some(flags);
    inv.grants = entry.grants.for_call(d, flags, cx.env());

    check_schema(&d.name, &entry.input_validator, input)?;
    entry.tool.validate(&mut inv, input).await?;

    let output = entry.tool.call(&mut inv, input).await?;
    if let (Some(validator), Some(structured)) = (&entry.output_validator, &output.structured) {
        check_schema(&d.name, validator, structured).map_err(|e| {
            CallError::new(
                ErrorClass::ToolError,
                format!(
                    "The tool's structured output does not match its output schema: {}",
                    e.message
                ),
            )
        })?;
    }
    *refused = cx.apply(&d.name, &output.changes, &inv.grants, true);
    Ok(output)
}
