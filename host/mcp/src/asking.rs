//! Airlock's own questions to an MCP client's user, as form elicitations:
//! whether a call may run, and whether a tool's changed code may. A session
//! (2025-era) sends them as `elicitation/create` requests; a 2026-07-28
//! request gets them back in an `input_required` result ([`crate::rounds`]).
//! Both read the answer the same way.

use airlock_host::sanitize::{self, Sink};
use airlock_host::{PermissionAnswer, PermissionRequest};
use rmcp::model::{
    BooleanSchema, ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema,
};

/// Whether a client with `capabilities` can be asked a form: it declares
/// elicitation, with the form mode or no mode at all (which means form).
pub(crate) fn asks_forms(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The form asking whether the call `request` describes may run.
pub(crate) fn permission_form(request: &PermissionRequest) -> ElicitRequestParams {
    let schema = ElicitationSchema::builder()
        .required_bool_property("allow", |b: BooleanSchema| {
            b.title("Allow this call").with_default(false)
        })
        .bool_property("always", |b: BooleanSchema| {
            b.title("Also allow every later call of this tool in this agent context")
                .with_default(false)
        })
        .build_unchecked();
    let asked_by = request.caller.as_ref().map_or(String::new(), |caller| {
        format!(
            " for {}",
            sanitize::clean_capped(&caller.to_string(), Sink::Line, 200)
        )
    });
    let message = format!(
        "airlock: {} wants to run{asked_by} ({}).\nInput: {}",
        request.tool_name,
        sanitize::clean_capped(&request.reason, Sink::Line, 300),
        sanitize::clean_capped(&request.input.to_string(), Sink::Line, 500),
    );
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// The user's answer to [`permission_form`] about `tool`, or why there is
/// none.
pub(crate) fn permission_answer(
    tool: &str,
    answer: Result<ElicitResult, String>,
) -> PermissionAnswer {
    match answer {
        Ok(r) if r.action == ElicitationAction::Accept => {
            let yes = |k: &str| {
                r.content
                    .as_ref()
                    .and_then(|c| c.get(k))
                    .and_then(|v| v.as_bool())
                    == Some(true)
            };
            match (yes("allow"), yes("always")) {
                (true, true) => PermissionAnswer::AllowAlways,
                (true, false) => PermissionAnswer::Allow,
                _ => PermissionAnswer::Deny(Some(format!(
                    "the user did not allow this call. {}",
                    how_to_allow(tool)
                ))),
            }
        }
        Ok(r) if r.action == ElicitationAction::Cancel => PermissionAnswer::Deny(Some(format!(
            "the question was dismissed without an answer. {}",
            how_to_allow(tool)
        ))),
        Ok(_) => PermissionAnswer::Deny(Some(format!(
            "the user declined this call. {}",
            how_to_allow(tool)
        ))),
        Err(e) => PermissionAnswer::Deny(Some(format!(
            "asking the user failed ({e}). {}",
            how_to_allow(tool)
        ))),
    }
}

/// How to let calls of `tool` run without a question.
fn how_to_allow(tool: &str) -> String {
    format!(
        "To run {tool} without asking, allow it with a rule (permissions.allow = [\"{tool}\"]), \
         another permission mode (--mode), or --yes."
    )
}

/// The form asking whether the new code of tool `name` (BLAKE3 `was` →
/// `now`) may run.
pub(crate) fn approval_form(name: &str, was: &str, now: &str) -> ElicitRequestParams {
    let schema = ElicitationSchema::builder()
        .required_bool_property("approve", |b: BooleanSchema| {
            b.title("Approve the new code and run it from now on")
                .with_default(false)
        })
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "airlock: the component of {name} changed since it was approved (BLAKE3 {was} \
             -> {now}). The code approved before runs until the new code is approved \
             (here, or with `airlock approve {name}`)."
        ),
        requested_schema: schema,
    }
}

/// Whether an answer to [`approval_form`] approves the new code.
pub(crate) fn approves(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|c| c.get("approve"))
            .and_then(|v| v.as_bool())
            == Some(true)
}
