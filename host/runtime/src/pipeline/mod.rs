//! The pipeline: the one path every tool use takes, always in this order.
//!
//! 1. [`prepare`]: look the tool up in the context's view, bound the input,
//!    classify it (the executor schedules on these flags);
//! 2. validation (`validate`): the JSON Schema, then the tool's own check;
//! 3. pre-tool hooks ([`hooks`]): may rewrite the input, block, ask, allow,
//!    add context;
//! 4. permission ([`crate::policy`], asking through the [`crate::PermissionPrompter`]): rules, hooks' verdict, mode, the tool's
//!    own check; an ask goes to the prompter; denials are recorded;
//! 5. the call, with progress, under the grants of its final flags;
//! 6. result processing ([`results`]): the secrets redacted from the output
//!    or error ([`crate::secrets`]), output schema, spilling (to a file of
//!    the caller's and context's, outside every grant);
//! 7. post-tool hooks: may block or replace the output, add context;
//! 8. telemetry ([`telemetry`]) around it all: one `execute_tool` span;
//!    and with `[audit]`, one record in the trail ([`crate::audit`]) for
//!    every use, run or refused (a trail failing closed that cannot be
//!    written refuses the use before step 2).
//!
//! [`execute`] runs 2–8 without touching the context; the caller applies
//! the context changes with [`ToolContext::finish`], which is how the
//! executor applies them only from exclusive calls. [`call_alone`] is the three
//! steps back to back. Every tool use gets exactly one [`ToolResult`].

pub mod hooks;
pub(crate) mod prompt;
pub mod results;
pub mod telemetry;
mod validate;

pub use validate::check_schema;

use crate::audit::CallRecord;
use crate::call::{CallControl, Caller, PermissionRecord, ToolResult, ToolUse};
use crate::context::{Completed, Denial, ToolContext};
use crate::policy::{self, DecisionSource, Verdict};
use crate::registry::Entry;
use airlock_audit::AuditLog;
use airlock_core::descriptor::SafetyFlags;
use airlock_core::error::{CallError, ErrorClass};
use airlock_core::grants::CallGrants;
use airlock_core::json;
use airlock_core::permissions::CallFacts;
use airlock_core::secrets::Secrets;
use airlock_core::tool::{CancellationToken, ContentBlock, ContextChange, Invocation, ToolOutput};
use hooks::{HookEvent, Hooks};
use prompt::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use results::ResultStore;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// A tool use looked up and classified, waiting to run.
pub struct PreparedUse {
    tool_use: ToolUse,
    entry: Option<Arc<Entry>>,
    invocation: Option<Invocation>,
    flags: Option<SafetyFlags>,
    failure: Option<CallError>,
    started: Instant,
}

impl PreparedUse {
    /// The tool use's id.
    pub fn id(&self) -> &str {
        &self.tool_use.id
    }

    /// The tool's registered name (or the name asked for, if unknown).
    pub fn name(&self) -> &str {
        self.entry
            .as_ref()
            .map_or(&self.tool_use.name, |e| &e.descriptor().name)
    }

    /// The flags of the classified input, when classification succeeded.
    pub fn flags(&self) -> Option<SafetyFlags> {
        self.flags
    }

    /// Whether the use may run alongside other concurrency-safe uses. A use
    /// that already failed runs nothing, so it never waits.
    pub fn concurrency_safe(&self) -> bool {
        self.failure.is_some()
            || self
                .flags
                .is_some_and(|f| f.contains(SafetyFlags::CONCURRENCY_SAFE))
    }
}

impl std::fmt::Debug for PreparedUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedUse")
            .field("tool_use", &self.tool_use)
            .field("flags", &self.flags)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

/// What every use is checked and run against, besides its context and
/// its grants: the hooks, who is asked for permission, where oversized
/// results go, the input's depth limit and the project directory hooks
/// are told about. [`crate::Airlock`] builds it from the configuration.
#[derive(Clone)]
pub struct CallPolicy {
    hooks: Hooks,
    prompter: Arc<dyn PermissionPrompter>,
    results: Option<Arc<ResultStore>>,
    json_depth: usize,
    project_dir: Option<String>,
    /// The audit trail every use is recorded in.
    audit: Option<Audited>,
}

/// The audit trail, and how uses are recorded in it.
#[derive(Clone)]
pub(crate) struct Audited {
    /// The trail.
    pub(crate) log: Arc<AuditLog>,
    /// Whether inputs are kept in it (`[audit] inputs`).
    pub(crate) keep_input: bool,
    /// Every secret, which a kept input is redacted of.
    pub(crate) secrets: Arc<Secrets>,
}

impl std::fmt::Debug for CallPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallPolicy")
            .field("hooks", &self.hooks)
            .field("results", &self.results)
            .field("json_depth", &self.json_depth)
            .field("project_dir", &self.project_dir)
            .finish_non_exhaustive()
    }
}

impl CallPolicy {
    pub(crate) fn new(
        hooks: Hooks,
        prompter: Arc<dyn PermissionPrompter>,
        results: Option<ResultStore>,
        json_depth: usize,
        project_dir: Option<String>,
        audit: Option<Audited>,
    ) -> CallPolicy {
        CallPolicy {
            hooks,
            prompter,
            results: results.map(Arc::new),
            json_depth,
            project_dir,
            audit,
        }
    }

    /// The audit trail uses are recorded in, if any.
    pub fn audit(&self) -> Option<&Arc<AuditLog>> {
        self.audit.as_ref().map(|a| &a.log)
    }

    /// The same policy, asking `prompter` (nothing else is built again:
    /// the results directory stays the one already opened).
    pub(crate) fn with_prompter(&self, prompter: Arc<dyn PermissionPrompter>) -> CallPolicy {
        CallPolicy {
            prompter,
            ..self.clone()
        }
    }

    /// The hooks.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// Who is asked when a call needs permission.
    pub fn prompter(&self) -> &Arc<dyn PermissionPrompter> {
        &self.prompter
    }

    /// Where oversized results are saved, if anywhere.
    pub fn results(&self) -> Option<&ResultStore> {
        self.results.as_deref()
    }
}

/// Looks the tool up in `cx`'s view and classifies the input. The user's
/// interrupt (`cx`'s abort handle) stops the classification.
pub async fn prepare(policy: &CallPolicy, cx: &ToolContext, tool_use: ToolUse) -> PreparedUse {
    prepare_with(policy, cx, tool_use, cx.abort_handle().child_token()).await
}

/// [`prepare`], stopped by `cancel`.
async fn prepare_with(
    policy: &CallPolicy,
    cx: &ToolContext,
    tool_use: ToolUse,
    cancel: CancellationToken,
) -> PreparedUse {
    let started = Instant::now();
    let mut prepared = PreparedUse {
        entry: cx.tools().get(&tool_use.name).cloned(),
        tool_use,
        invocation: None,
        flags: None,
        failure: None,
        started,
    };
    let Some(entry) = prepared.entry.clone() else {
        prepared.failure = Some(CallError::new(
            ErrorClass::UnknownTool,
            format!("No such tool available: {}", prepared.tool_use.name),
        ));
        return prepared;
    };
    let d = entry.descriptor();
    if let Err(e) = json::check_depth(&prepared.tool_use.input, policy.json_depth) {
        prepared.failure = Some(CallError::invalid_input(format!(
            "The input is rejected: {e}"
        )));
        return prepared;
    }
    let mut inv = Invocation::new(
        prepared.tool_use.id.clone(),
        cx.call_context(&d.name),
        CallGrants::nothing(entry.grants.timeout, entry.grants.memory_bytes),
        cx.read_files().clone(),
    );
    inv.tenant = cx.tenant();
    inv.cancel = cancel;
    match entry
        .tool
        .classify(&mut inv, &prepared.tool_use.input)
        .await
    {
        Ok(classified) => prepared.flags = Some(SafetyFlags::effective(d.flags, classified)),
        Err(e) => prepared.failure = Some(e),
    }
    prepared.invocation = Some(inv);
    prepared
}

/// Runs a prepared use through validation, hooks, permission, the call,
/// result processing and post-tool hooks, without changing `cx` (except
/// the denials and "always allow" answers it records).
pub async fn execute(
    policy: &CallPolicy,
    cx: &ToolContext,
    prepared: PreparedUse,
    control: CallControl,
) -> Completed {
    let name = prepared.name().to_string();
    let span = telemetry::span(&name, prepared.id(), prepared.tool_use.caller.as_ref());
    let PreparedUse {
        tool_use,
        entry,
        invocation,
        flags,
        failure,
        started,
    } = prepared;
    let mut result = ToolResult::failed(
        tool_use.id.clone(),
        name,
        CallError::internal("the use did not run"),
    );
    result.flags = flags;
    let mut changes = Vec::new();
    let mut grants = CallGrants::nothing(Duration::ZERO, 0);
    // What the trail needs of the use before it is run: the input as the
    // model gave it, and which code it names. A trail that cannot be
    // written (failing closed) lets no use run.
    let audited = policy.audit.as_ref().map(|audited| {
        let tool = entry.as_ref().map(|e| Arc::clone(&e.tool));
        (audited, tool_use.input.to_string(), tool)
    });
    let failure = failure.or_else(|| {
        let (audited, ..) = audited.as_ref()?;
        audited
            .log
            .ready()
            .err()
            .map(|why| CallError::new(ErrorClass::Internal, why))
    });
    let outcome = match (failure, entry, invocation, flags) {
        (Some(failure), ..) => Err(failure),
        (None, Some(entry), Some(mut inv), Some(flags)) => {
            // The context as it is now, not as it was when the use arrived:
            // an exclusive call may have changed it since.
            inv.context = cx.call_context(&entry.descriptor().name);
            inv.progress = control.progress;
            inv.cancel = control.cancel;
            let mut stages = Stages {
                policy,
                cx,
                entry: &entry,
                inv: &mut inv,
                flags,
                result: &mut result,
                span: &span,
                ran_changes: Vec::new(),
                caller: tool_use.caller.clone(),
            };
            let outcome = stages.pass(tool_use.input).instrument(span.clone()).await;
            changes = std::mem::take(&mut stages.ran_changes);
            grants = inv.grants;
            outcome.map(|mut output| {
                changes = std::mem::take(&mut output.changes);
                output
            })
        }
        _ => Err(CallError::internal("the use was not prepared")),
    };
    result.duration = started.elapsed();
    telemetry::record_outcome(&span, outcome.as_ref().map(drop), result.duration);
    result.outcome = outcome;
    if let Some((audited, input, tool)) = audited {
        let record = CallRecord {
            tool: tool.as_deref(),
            session: cx.session_id(),
            caller: tool_use.caller.as_ref(),
            input,
            keep_input: audited.keep_input.then_some(&audited.secrets),
            grants: &grants,
            result: &result,
        };
        // A full queue is waited on off the async workers.
        let recorded = match audited.log.try_record_json("call", record.fields()) {
            Ok(()) => Ok(()),
            Err(airlock_audit::Full(fields)) => {
                let log = Arc::clone(&audited.log);
                tokio::task::spawn_blocking(move || log.record_json("call", fields))
                    .await
                    .unwrap_or_else(|e| Err(format!("the audit record was lost: {e}")))
            }
        };
        if let Err(why) = recorded {
            // Failing closed: what was not recorded is not handed back.
            result.outcome = Err(CallError::new(
                ErrorClass::Internal,
                format!("the call ran, but its result is withheld: {why}"),
            ));
        }
    }
    Completed {
        result,
        changes,
        grants,
    }
}

/// Runs one tool use to its result: [`prepare`], [`execute`], then
/// [`ToolContext::finish`] as an exclusive call.
pub async fn call_alone(
    policy: &CallPolicy,
    cx: &mut ToolContext,
    tool_use: ToolUse,
    control: CallControl,
) -> ToolResult {
    let prepared = prepare_with(policy, cx, tool_use, control.cancel.clone()).await;
    let completed = execute(policy, cx, prepared, control).await;
    cx.finish(completed, true)
}

/// The stages of one use, sharing what they need.
struct Stages<'a> {
    policy: &'a CallPolicy,
    cx: &'a ToolContext,
    entry: &'a Entry,
    inv: &'a mut Invocation,
    /// The flags the use was scheduled with.
    flags: SafetyFlags,
    result: &'a mut ToolResult,
    span: &'a tracing::Span,
    /// Context changes of a call whose result was then blocked.
    ran_changes: Vec<ContextChange>,
    /// Who asked for the use.
    caller: Option<Caller>,
}

impl Stages<'_> {
    async fn pass(&mut self, mut input: Value) -> Result<ToolOutput, CallError> {
        let d = self.entry.descriptor();
        let mut flags = self.flags;
        self.inv.grants = self.entry.grants.for_call(d, flags, self.cx.env());

        // Validation.
        self.validate(&input).await?;

        // Pre-tool hooks.
        let hooks = self.policy.hooks();
        let pre = hooks.pre_tool_use(&self.hook_event(&input)).await;
        self.result
            .additional_context
            .extend(pre.additional_context.iter().cloned());
        if let Some(updated) = pre.updated_input.clone() {
            input = updated;
            flags = self.revalidate(&input).await?;
        }

        // Permission.
        let tool_decision = self.entry.tool.check_permissions(self.inv, &input).await?;
        let project_root = self.policy.project_dir.as_deref();
        let facts = CallFacts::new(
            d,
            flags,
            &input,
            self.cx.cwd(),
            project_root,
            self.entry.tool.origin().sandboxed(),
        )
        .with_digest(self.entry.tool.digest());
        let (verdict, rewritten) = {
            let rules = self.cx.rules();
            policy::decide(&rules, self.cx.mode(), &facts, &pre.verdict, &tool_decision)
        };
        self.settle_permission(verdict, &input, flags).await?;
        if let Some(rewritten) = rewritten {
            input = rewritten;
            flags = self.revalidate(&input).await?;
        }
        self.result.flags = Some(flags);
        self.inv.grants = self.entry.grants.for_call(d, flags, self.cx.env());
        if self.inv.cancel.is_cancelled() {
            return Err(CallError::cancelled(
                "the call was cancelled before it started",
            ));
        }

        // The call.
        let called = Instant::now();
        // Whatever the tool hands back loses the secrets first: before the
        // hooks, the spill file, a log or the model see it.
        let secrets = self.inv.grants.secrets.clone();
        let mut output = self
            .entry
            .tool
            .call(self.inv, &input)
            .await
            .map_err(|mut e| {
                secrets.redact_in_place(&mut e.message);
                e
            })?;
        output.redact(&secrets);

        // Result processing.
        if let (Some(validator), Some(structured)) =
            (&self.entry.output_validator, &output.structured)
        {
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
        self.result.spilled_to = results::spill(
            &mut output,
            d.max_result_size,
            self.policy.results(),
            results::Owner::of(self.cx, self.caller.as_ref()),
            &self.inv.tool_use_id,
        )?;

        // Post-tool hooks.
        if !hooks.is_empty() {
            let response = output
                .structured
                .clone()
                .unwrap_or_else(|| serde_json::json!({"content": output.text_content()}));
            let ms = u64::try_from(called.elapsed().as_millis()).unwrap_or(u64::MAX);
            let post = hooks
                .post_tool_use(&self.hook_event(&input), response, ms)
                .await;
            self.result
                .additional_context
                .extend(post.additional_context);
            if let Some(updated) = post.updated_output {
                output.content = vec![match updated {
                    Value::String(text) => ContentBlock::Text(text),
                    other => ContentBlock::Json(other),
                }];
                output.structured = None;
            }
            if let Some(reason) = post.block {
                tracing::info!(tool = %d.name, "a PostToolUse hook blocked the result");
                // The call ran, so its context changes still apply.
                self.ran_changes = std::mem::take(&mut output.changes);
                return Err(CallError::new(
                    ErrorClass::PermissionDenied,
                    format!("A PostToolUse hook blocked this result: {reason}"),
                ));
            }
        }
        Ok(output)
    }

    async fn validate(&mut self, input: &Value) -> Result<(), CallError> {
        check_schema(
            &self.entry.descriptor().name,
            &self.entry.input_validator,
            input,
        )?;
        self.entry.tool.validate(self.inv, input).await
    }

    /// Validates and classifies an input a hook or the tool rewrote. A use
    /// scheduled as concurrency-safe stays so (it may be running beside
    /// others), which also keeps its handles read-only.
    async fn revalidate(&mut self, input: &Value) -> Result<SafetyFlags, CallError> {
        self.validate(input).await?;
        let classified = self.entry.tool.classify(self.inv, input).await?;
        let mut flags = SafetyFlags::effective(self.entry.descriptor().flags, classified);
        if self.flags.contains(SafetyFlags::CONCURRENCY_SAFE) {
            flags |= SafetyFlags::CONCURRENCY_SAFE;
        }
        Ok(flags)
    }

    fn hook_event<'b>(&'b self, input: &'b Value) -> HookEvent<'b> {
        let d = self.entry.descriptor();
        HookEvent {
            session_id: self.cx.session_id(),
            cwd: self.cx.cwd(),
            permission_mode: self.cx.mode().to_string(),
            tool_name: &d.name,
            aliases: &d.aliases,
            tool_input: input,
            tool_use_id: &self.inv.tool_use_id,
            agent_id: self.cx.agent_id(),
            project_dir: self.policy.project_dir.as_deref(),
        }
    }

    /// Turns the verdict into a go-ahead or an error, asking the user when
    /// the verdict says so, and recording denials.
    async fn settle_permission(
        &mut self,
        verdict: Verdict,
        input: &Value,
        flags: SafetyFlags,
    ) -> Result<(), CallError> {
        let name = self.entry.descriptor().name.clone();
        let (allowed, source, reason) = match verdict {
            Verdict::Allow(source) => (true, source, String::new()),
            Verdict::Deny(source, reason) => (false, source, reason),
            Verdict::Ask(_, reason) => {
                let request = PermissionRequest {
                    tool_name: name.clone(),
                    tool_use_id: self.inv.tool_use_id.clone(),
                    input: input.clone(),
                    reason,
                    flags,
                    caller: self.caller.clone(),
                };
                let answer = tokio::select! {
                    answer = self.policy.prompter().ask(&request) => answer,
                    () = self.inv.cancel.cancelled() => {
                        telemetry::record_decision(self.span, "ask", &DecisionSource::User.to_string());
                        self.result.permission = Some(PermissionRecord {
                            decision: "ask",
                            source: DecisionSource::User,
                        });
                        return Err(CallError::cancelled("the call was cancelled while waiting for permission"));
                    }
                };
                match answer {
                    PermissionAnswer::Allow => (true, DecisionSource::User, String::new()),
                    PermissionAnswer::AllowAlways => {
                        // Bound to this code: after a reload with other
                        // code under the same name, the user is asked again.
                        self.cx.allow_always(&name, self.entry.tool.digest());
                        (true, DecisionSource::User, String::new())
                    }
                    PermissionAnswer::Deny(why) => (
                        false,
                        DecisionSource::User,
                        match why {
                            Some(why) => format!("The user denied permission to use {name}: {why}"),
                            None => format!("The user denied permission to use {name}."),
                        },
                    ),
                }
            }
        };
        let decision = if allowed { "allow" } else { "deny" };
        telemetry::record_decision(self.span, decision, &source.to_string());
        self.result.permission = Some(PermissionRecord {
            decision,
            source: source.clone(),
        });
        if allowed {
            return Ok(());
        }
        self.cx.record_denial(Denial {
            tool_use_id: self.inv.tool_use_id.clone(),
            tool: name,
            source,
            reason: reason.clone(),
        });
        Err(CallError::permission_denied(reason))
    }
}
