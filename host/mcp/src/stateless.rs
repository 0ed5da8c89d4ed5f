//! MCP 2026-07-28 requests: no `initialize` and no session. Each request
//! says its version and capabilities in `_meta`, and any replica may
//! answer it, so the agent context a call runs in is kept in the host's
//! [`Contexts`] store (in process, or Redis shared by replicas) and named by
//! the request's `_meta["airlock/context"]`:
//! - absent (or null): the default context, which every call that names
//!   none shares (a client that knows nothing of Airlock, Claude Code for
//!   one, still has its `read` stamps seen by its `edit`, on any replica);
//! - a context id a result handed out: that context;
//! - `"new"`: a new context, private to the client: if the call changes it
//!   (a `read` records a stamp, a `cd` a cwd), the result's
//!   `_meta["airlock/context"]` hands out its id, which later calls send.
//!
//! Over HTTP, an `Airlock-Conversation` header gives the calls that name
//! no context a default context per conversation (and caller).
//!
//! On one replica, the calls of a named context (and of the default context
//! on stdio, or a conversation's) go through its [`Lanes`] lane in the order
//! they arrived: a call of a tool not declared concurrency-safe runs alone
//! in its context (the lane goes by the tool's declared flags, not by its
//! classification of the input, which only the call makes). A permission
//! question is put to a client that declares form elicitation by an
//! `input_required` result ([`crate::rounds`]: 2026-07-28 has no
//! server-to-client requests), and answered by the host's own prompter for
//! any other; log lines go out only when the request set `logLevel`;
//! tool-list changes go to `subscriptions/listen` streams.

use super::{
    McpServer, Received, logging, mcp_result, narrowed, no_such_tool, tool_view, wait_turn, waiting,
};
use crate::asking;
use crate::relay::{Abandon, Event, Relay, Relayed};
use crate::rounds::{self, Round};
use airlock_host::adapters::mcp::output_schema;
use airlock_host::context_store::{self, ContextError, Contexts};
use airlock_host::tool::ProgressSink;
use airlock_host::{CallControl, SafetyFlags, ToolUse};
use futures::StreamExt;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ProtocolVersion, RequestMetaObject};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use tokio_util::sync::CancellationToken;

/// The `_meta` key of the context id, in requests and in results.
pub const CONTEXT_META: &str = "airlock/context";

/// Progress updates and log lines a call may have pending.
const PENDING: usize = 64;

/// What `_meta["airlock/context"]` says to start a new context.
pub const NEW: &str = "new";

/// The lane of the default context.
const DEFAULT_LANE: &str = "default";

/// Which context a request names.
enum Named<'a> {
    Default,
    Fresh,
    Id(&'a str),
}

/// The lanes of the contexts calls are running in on this replica: calls
/// of one context enter its lane in the order they arrive; one whose tool
/// is not declared concurrency-safe runs alone in it (it loads the context
/// once every call before it saved, and the calls after it wait for it),
/// the others side by side. Replicas do not share lanes.
#[derive(Default)]
pub(crate) struct Lanes(Mutex<HashMap<String, Weak<RwLock<()>>>>);

/// A call's place in its lane, held until its context is saved.
enum InLane {
    Shared { _guard: OwnedRwLockReadGuard<()> },
    Alone { _guard: OwnedRwLockWriteGuard<()> },
}

impl Lanes {
    /// Enters the lane of context `key`: alone or beside others.
    async fn enter(&self, key: &str, alone: bool) -> InLane {
        let lane = {
            let mut lanes = super::lock(&self.0);
            match lanes.get(key).and_then(Weak::upgrade) {
                Some(lane) => lane,
                None => {
                    // Lanes no call holds any more go when a new one comes.
                    lanes.retain(|_, lane| lane.strong_count() > 0);
                    let lane = Arc::new(RwLock::new(()));
                    lanes.insert(key.to_string(), Arc::downgrade(&lane));
                    lane
                }
            }
        };
        if alone {
            InLane::Alone {
                _guard: lane.write_owned().await,
            }
        } else {
            InLane::Shared {
                _guard: lane.read_owned().await,
            }
        }
    }
}

/// The context a request's `_meta` names; an error for a value that is no
/// context id, `"new"` or null.
fn named(meta: &RequestMetaObject) -> Result<Named<'_>, ErrorData> {
    match meta.0.get(CONTEXT_META) {
        // Some serialisers write an unset key as null.
        None | Some(serde_json::Value::Null) => Ok(Named::Default),
        Some(serde_json::Value::String(id)) if id == NEW => Ok(Named::Fresh),
        Some(serde_json::Value::String(id)) => Ok(Named::Id(id.as_str())),
        Some(_) => Err(ErrorData::invalid_params(
            format!(
                "_meta[\"{CONTEXT_META}\"] must be a context id an earlier result handed out, \
                 or \"{NEW}\" for a new context (without it, the call runs in the default \
                 context)"
            ),
            None,
        )),
    }
}

/// The HTTP header a client names its conversation by: calls that name
/// no context run in that conversation's default context, one per caller
/// and conversation. Claude Code and the SDKs send nothing that tells one
/// conversation from another; a client sets it in its configuration.
pub const CONVERSATION_HEADER: &str = "airlock-conversation";

/// The longest conversation name taken.
const CONVERSATION_MAX: usize = 128;

/// Whose default context the calls of a request that names no context run
/// in: its caller's (an authenticated caller's key; none without tokens),
/// and within it, that of the conversation its `Airlock-Conversation`
/// header names, if any (an empty one names none). An error for a name
/// that is too long or not printable ASCII.
fn default_owner(context: &RequestContext<RoleServer>) -> Result<Option<String>, ErrorData> {
    let owner = crate::identity(context).map(crate::auth::Identity::key);
    let named = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get(CONVERSATION_HEADER));
    // Empty: a configuration whose variable is unset names none.
    let Some(named) = named.filter(|v| !v.is_empty()) else {
        return Ok(owner);
    };
    let conversation = named
        .to_str()
        .ok()
        .filter(|v| v.len() <= CONVERSATION_MAX && v.bytes().all(|b| (b' '..=b'~').contains(&b)))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "the {CONVERSATION_HEADER} header must be at most {CONVERSATION_MAX} \
                     printable ASCII characters naming the client's conversation"
                ),
                None,
            )
        })?;
    let conversation = &blake3::hash(conversation.as_bytes()).to_hex()[..32];
    // A caller's key is hex: the two never meet.
    Ok(Some(format!(
        "{}conversation.{conversation}",
        owner.map_or_else(String::new, |o| format!("{o}."))
    )))
}

/// The name the saved results of the context a 2026-07-28 request names
/// are kept under, for its caller (`ToolContext::results_key`); `None` for
/// a new context (which has none yet) or a malformed name.
pub(crate) fn results_key(context: &RequestContext<RoleServer>) -> Option<String> {
    let owner = crate::identity(context).map(crate::auth::Identity::key);
    match named(&context.meta).ok()? {
        Named::Default => Some(context_store::results_key(
            None,
            default_owner(context).ok()?.as_deref(),
        )),
        Named::Fresh => None,
        Named::Id(id) => Some(context_store::results_key(Some(id), owner.as_deref())),
    }
}

/// Whether a request says, in its own `_meta`, that it is 2026-07-28 or
/// later (no session: its context comes from the store).
pub(crate) fn is_stateless(meta: &RequestMetaObject) -> bool {
    meta.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// A context error as the client gets it: an id the store does not hold
/// (or lost) is the client's to fix (invalid params), a store that failed
/// or lost the default context is ours.
fn context_error(e: &ContextError) -> ErrorData {
    match e {
        ContextError::Unknown { id, .. } => ErrorData::invalid_params(
            format!(
                "{e} (send _meta[\"{CONTEXT_META}\"] = \"{NEW}\"), or leave the id out to use \
                 the default context"
            ),
            Some(serde_json::json!({ "context": id })),
        ),
        ContextError::Lost { id: Some(id), .. } => ErrorData::invalid_params(
            format!("{e} (send _meta[\"{CONTEXT_META}\"] = \"{NEW}\")"),
            Some(serde_json::json!({ "context": id, "lost": true })),
        ),
        ContextError::Lost { id: None, .. } => ErrorData::internal_error(
            e.to_string(),
            Some(serde_json::json!({ "context": "default", "lost": true })),
        ),
        ContextError::Store { .. } => ErrorData::internal_error(e.to_string(), None),
    }
}

impl McpServer {
    /// Runs a 2026-07-28 `tools/call` in the context its `_meta` names.
    pub(crate) async fn call_stateless(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        received: Option<Received>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = &self.session;
        let contexts: &Contexts = &session.host.contexts;
        let named = named(&context.meta)?;
        // An authenticated caller's contexts are its own: its default
        // context, and the ones it created, which no one else can name.
        let owner = crate::identity(&context).map(crate::auth::Identity::key);
        let owner = owner.as_deref();
        // A client that can be asked is asked by an `input_required`
        // result; for any other, the host's own prompter answers.
        let round = match context.meta.client_capabilities() {
            Some(client) if asking::asks_forms(&client) => {
                let key = &session.host.state_key;
                Some(Round::open(key, contexts, &request, owner).await?)
            }
            _ => None,
        };
        if let Some(round) = &round
            && self.approval_asked(&request.name, round, owner).await
            && let Some(question) = round
                .input_required(&session.host.state_key, contexts)
                .await?
        {
            return Ok(question.into());
        }
        let host = session.host.listing(&request.name, &context.ct).await?;
        let mut airlock = narrowed(host, tool_view(&context));
        if let Some(round) = &round {
            airlock = airlock.with_prompter(round.clone());
        }
        let mut cx = airlock.context();
        // The host's tools as they are now: no session refreshes a list.
        let Some(entry) = cx.tools().get(&request.name) else {
            return Err(no_such_tool(&request.name));
        };
        let lists_output_schema = output_schema(entry.descriptor()).is_some();
        let alone = !entry
            .descriptor()
            .flags
            .contains(SafetyFlags::CONCURRENCY_SAFE);
        let closed = wait_turn(received.as_ref(), &context.ct).await?;
        // Calls of one context keep their order: a call joins its lane's
        // queue before the next request on the connection may go, then
        // waits there. The default context has a lane only on a connection
        // (stdio: one client). Over HTTP every client that names no context
        // shares it, and one client's long call would hold up the others'.
        // A lane is its caller's too: one who names another's context never
        // waits in, or holds up, that context's lane.
        let default_owner = default_owner(&context)?;
        let lane = match named {
            Named::Fresh => None,
            // A conversation's calls keep their order, as a connection's do.
            Named::Default if default_owner != owner.map(str::to_string) => default_owner
                .as_ref()
                .map(|conversation| format!("{DEFAULT_LANE}:{conversation}")),
            Named::Default => received.is_some().then(|| DEFAULT_LANE.to_string()),
            Named::Id(id) => Some(match owner {
                Some(owner) => format!("{id}:{owner}"),
                None => id.to_string(),
            }),
        };
        let mut entering = std::pin::pin!(async {
            match &lane {
                None => None,
                Some(key) => Some(session.host.lanes.enter(key, alone).await),
            }
        });
        // One poll puts the call in its lane, or in the lane's queue.
        let entered = std::future::poll_fn(|task| {
            Poll::Ready(match entering.as_mut().poll(task) {
                Poll::Ready(in_lane) => Some(in_lane),
                Poll::Pending => None,
            })
        })
        .await;
        if let Some(received) = received {
            received.turn.take();
        }
        let _in_lane = match entered {
            Some(in_lane) => in_lane,
            None => waiting(entering, &context.ct, &closed).await?,
        };
        let mut loaded = match named {
            Named::Default => {
                contexts
                    .load_default(&mut cx, default_owner.as_deref())
                    .await
            }
            Named::Fresh => contexts.load_as(None, owner, &mut cx).await,
            Named::Id(id) => contexts.load_as(Some(id), owner, &mut cx).await,
        }
        .map_err(|e| context_error(&e))?;
        let use_id = session.next_use_id();
        let log_level = context.meta.log_level().map(logging::rank);
        let (sink, progress_rx) = ProgressSink::channel(PENDING);
        let (sink, log_rx) = sink.with_logs(PENDING);
        let cancel = CancellationToken::new();
        let control = CallControl {
            progress: sink,
            cancel: cancel.clone(),
        };
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let tool_use = ToolUse::new(use_id, request.name.as_ref(), input)
            .with_caller(crate::identity(&context).map(crate::auth::Identity::caller));
        let call = airlock.call_with(&mut cx, tool_use, control);
        let events = futures::stream::select(
            futures::stream::once(call).map(Event::Result),
            futures::stream::select(
                futures::stream::unfold(progress_rx, |mut rx| async {
                    rx.recv().await.map(|event| (Event::Progress(event), rx))
                }),
                futures::stream::unfold(log_rx, |mut rx| async {
                    rx.recv().await.map(|event| (Event::Log(event), rx))
                }),
            ),
        );
        // A client that cancels or goes away still waits for the call,
        // which stops soon: what it changed is kept.
        let relayed = Relay::new(&context, &closed)
            .until_result(
                events,
                || log_level,
                stopped(round.as_deref()),
                || cancel.cancel(),
                Abandon::Wait,
            )
            .await;
        let Relayed::Result {
            result,
            abandoned,
            stopped: asked,
        } = relayed
        else {
            return Err(ErrorData::internal_error(
                "the call ended without a result",
                None,
            ));
        };
        // A call that stopped at a question ran nothing: its context is
        // left as it was, and the client gets the question.
        if let Some(round) = round.as_deref().filter(|_| asked) {
            if let Some(error) = abandoned {
                return Err(error);
            }
            if let Some(question) = round
                .input_required(&session.host.state_key, contexts)
                .await?
            {
                return Ok(question.into());
            }
        }
        // A result the call saved is kept under the context's id: a new
        // context that saved one is created (its id handed out), so that
        // the result can be read back.
        if result.spilled_to.is_some() {
            loaded.keep();
        }
        // What the call changed is kept even when its client went away.
        let saved = contexts.save(loaded, &cx).await;
        if let Some(error) = abandoned {
            return Err(error);
        }
        let saved = saved.map_err(|e| {
            ErrorData::internal_error(
                format!(
                    "{} ran, but what it changed in the agent's context was not saved: {e}",
                    request.name
                ),
                None,
            )
        })?;
        let spilled = result
            .spilled_to
            .as_deref()
            .map(|path| session.give(path, cx.results_key()));
        let mut reply = mcp_result(result, lists_output_schema, spilled);
        if let Some(id) = saved {
            reply
                .meta
                .get_or_insert_with(Default::default)
                .insert(CONTEXT_META.into(), serde_json::Value::String(id));
        }
        Ok(reply.into())
    }

    /// Asks a caller that can be asked whether `tool`'s changed code may
    /// run, once per change and caller on this replica (the code approved
    /// before runs meanwhile, as in a session); approved, the new code is
    /// recorded and served. `true` when the call stops at the question.
    async fn approval_asked(&self, tool: &str, round: &Round, owner: Option<&str>) -> bool {
        let Some(change) = self.held_change(tool) else {
            return false;
        };
        let question = serde_json::json!(["approve", change.name, change.was, change.now]);
        let digest = rounds::digest(&question);
        let offered = format!("{}\n{}", owner.unwrap_or_default(), change.now);
        if let Some(answer) = round.answered(&digest) {
            let approves = asking::approves(answer);
            super::lock(&self.session.host.offered).insert(offered);
            if approves {
                self.approve(&change).await;
            }
            return false;
        }
        if super::lock(&self.session.host.offered).contains(&offered) {
            return false;
        }
        round.stop(
            digest,
            asking::approval_form(&change.name, &change.was, &change.now),
        );
        true
    }

    /// A `subscriptions/listen` stream: `notifications/tools/list_changed`
    /// each time the tools change, until the client ends it.
    pub(crate) async fn listen_for_changes(
        &self,
        subscription: SubscriptionContext,
    ) -> Result<(), ErrorData> {
        let extensions = &subscription.request_context().extensions;
        if let Some(acknowledging) = extensions.get::<super::Acknowledging>() {
            acknowledging.handed_over();
        }
        let mut tools = self.session.host.tools.clone();
        tools.borrow_and_update();
        let closed = extensions
            .get::<super::Closed>()
            .map_or_else(CancellationToken::new, |c| c.0.clone());
        let ended = async {
            tokio::select! {
                () = subscription.cancelled() => {}
                () = closed.cancelled() => {}
            }
        };
        if !subscription.accepted().tools_list_changed.unwrap_or(false) {
            ended.await;
            return Ok(());
        }
        tokio::pin!(ended);
        loop {
            tokio::select! {
                changed = tools.changed() => {
                    if changed.is_err() {
                        // Nothing watches the tools (no tool directory):
                        // none will change, and the stream stays open
                        // until the client ends it.
                        ended.await;
                        return Ok(());
                    }
                    tools.borrow_and_update();
                    if subscription.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                () = &mut ended => return Ok(()),
            }
        }
    }
}

/// Returns once `round`'s call stopped at a question; never without one.
async fn stopped(round: Option<&Round>) {
    match round {
        Some(round) => round.stopped().await,
        None => std::future::pending().await,
    }
}
