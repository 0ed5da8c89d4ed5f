//! MCP tasks (protocol 2025-11-25, SEP-1686): a `tools/call` whose params
//! carry `task` is answered at once with a task, while the call runs
//! exactly as a plain one does (the same handler, in its turn on the
//! connection, through the session's executor). The client polls it
//! (`tasks/get`), lists the session's tasks (`tasks/list`), cancels one
//! (`tasks/cancel`) and fetches its result (`tasks/result`, which waits
//! for it); each task's end is also sent as `notifications/tasks/status`.
//!
//! rmcp 3.11 implements another design (SEP-2663): its call params drop
//! `task`, its `Tool` has no `execution`, its capabilities no `tasks`, and
//! it reads `tasks/get` and `tasks/cancel` as its own kind. So the raw
//! message is read here first: the stdio transport (`stdio_transport::Stdio`) and the
//! HTTP front ([`requested`]) put a call's `task` on the request as a
//! [`TaskRequest`], where no client can put one; [`divert`] turns such a
//! call, and the `tasks/*` requests, into custom requests that
//! [`McpServer::task_request`] answers; and [`shape`] adds the `tasks`
//! capability and each tool's `execution` to the replies on their way out.
//!
//! Limits: a task lives for its `ttl` from its creation (10 minutes unless
//! the client asks otherwise, 1 s to 1 hour); one still working then is
//! cancelled, and every task is forgotten then. A session keeps at most
//! 128 tasks: one more makes room by forgetting the oldest that ended, and
//! is refused (-32000) when all 128 are working. Tasks belong to the
//! session that made them: another session is told there is no such task.
//! Task ids are a keyed BLAKE3 hash of a count and the time, with a key
//! drawn at random when the process first makes one. A permission question
//! a task's call asks goes to the client as any call's does (the task does
//! not go to `input_required`).

use super::{McpServer, cancelled_by_client, lock};
use airlock_host::sanitize::{self, Sink};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, CustomNotification,
    CustomRequest, CustomResult, ErrorCode, JsonRpcMessage, ServerJsonRpcMessage,
    ServerNotification, ServerResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a task is kept when the client names no `ttl`.
const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// The shortest `ttl` a task gets, whatever the client asks.
const MIN_TTL: Duration = Duration::from_secs(1);
/// The longest `ttl` a task gets, whatever the client asks.
const MAX_TTL: Duration = Duration::from_secs(3600);
/// The tasks a session keeps.
const MAX_TASKS: usize = 128;
/// How often a client is asked to poll a task, in milliseconds.
const POLL_INTERVAL_MS: u64 = 500;

/// The method of a call that asked for a task (and of every call).
const CALL: &str = "tools/call";
const GET: &str = "tasks/get";
const RESULT: &str = "tasks/result";
const LIST: &str = "tasks/list";
const CANCEL: &str = "tasks/cancel";
const STATUS: &str = "notifications/tasks/status";
/// The `_meta` key that ties a result to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// What a `tools/call` asked of its task (its `params.task`): a `ttl` in
/// milliseconds, if any, or what is wrong with the field.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TaskRequest(Result<Option<u64>, String>);

/// The task a raw message asks for: only a `tools/call` request whose
/// params carry a `task` (not `null`) asks for one. A message without the
/// word is not parsed.
pub(super) fn requested(raw: &[u8]) -> Option<TaskRequest> {
    #[derive(Deserialize)]
    struct Message {
        method: Option<String>,
        params: Option<Params>,
    }
    #[derive(Deserialize)]
    struct Params {
        task: Option<Value>,
    }
    if !raw.windows(6).any(|w| w == b"\"task\"") {
        return None;
    }
    let message: Message = serde_json::from_slice(raw).ok()?;
    if message.method.as_deref() != Some(CALL) {
        return None;
    }
    let task = message.params?.task?;
    let shown = |v: &Value| sanitize::clean_capped(&v.to_string(), Sink::Line, 100);
    Some(TaskRequest(match &task {
        Value::Object(fields) => match fields.get("ttl") {
            None | Some(Value::Null) => Ok(None),
            Some(ttl) => ttl.as_u64().map(Some).ok_or_else(|| {
                format!(
                    "the task's ttl is a number of milliseconds, not {}",
                    shown(ttl)
                )
            }),
        },
        other => Err(format!("`task` is an object, not {}", shown(other))),
    }))
}

/// A `tools/call` to run as a task, as [`divert`] hands it on.
#[derive(Clone)]
struct TaskCall {
    params: CallToolRequestParams,
    task: TaskRequest,
}

/// Turns the requests rmcp cannot answer as this protocol says into custom
/// requests (answered by [`McpServer::task_request`]): a `tools/call` that
/// carries a [`TaskRequest`] (on itself, or on its HTTP request), and
/// `tasks/get` and `tasks/cancel` (which rmcp reads as SEP-2663's). Their
/// extensions (the call's turn, `_meta`) go along.
pub(super) fn divert(request: &mut ClientRequest) {
    let custom = match request {
        ClientRequest::CallToolRequest(call) => {
            let extensions = &call.extensions;
            let Some(task) = extensions
                .get::<TaskRequest>()
                .or_else(|| {
                    extensions
                        .get::<http::request::Parts>()
                        .and_then(|parts| parts.extensions.get::<TaskRequest>())
                })
                .cloned()
            else {
                return;
            };
            let mut extensions = std::mem::take(&mut call.extensions);
            extensions.insert(TaskCall {
                params: std::mem::take(&mut call.params),
                task,
            });
            CustomRequest {
                method: CALL.into(),
                params: None,
                extensions,
            }
        }
        ClientRequest::GetTaskRequest(get) => CustomRequest {
            method: GET.into(),
            params: Some(json!({ "taskId": get.params.task_id })),
            extensions: std::mem::take(&mut get.extensions),
        },
        ClientRequest::CancelTaskRequest(cancel) => CustomRequest {
            method: CANCEL.into(),
            params: Some(json!({ "taskId": cancel.params.task_id })),
            extensions: std::mem::take(&mut cancel.extensions),
        },
        _ => return,
    };
    *request = ClientRequest::CustomRequest(custom);
}

/// Adds what rmcp's types cannot hold to the replies that need it: the
/// `tasks` capability to the `initialize` result, and
/// `execution.taskSupport` (`optional`: a call may run as a task or not)
/// to each tool of a `tools/list` result. The transport is the last place a
/// reply passes as rmcp's typed value, so it is replaced there by its JSON
/// with the field added; every other message passes untouched.
pub(super) fn shape(message: &mut ServerJsonRpcMessage) {
    let JsonRpcMessage::Response(response) = message else {
        return;
    };
    let shaped = match &response.result {
        ServerResult::InitializeResult(result) => {
            serde_json::to_value(result).ok().map(|mut value| {
                if let Some(capabilities) =
                    value.get_mut("capabilities").and_then(Value::as_object_mut)
                {
                    capabilities.insert(
                        "tasks".into(),
                        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
                    );
                }
                value
            })
        }
        ServerResult::ListToolsResult(result) => {
            serde_json::to_value(result).ok().map(|mut value| {
                let tools = value.get_mut("tools").and_then(Value::as_array_mut);
                for tool in tools.into_iter().flatten() {
                    if let Some(tool) = tool.as_object_mut() {
                        tool.insert("execution".into(), json!({"taskSupport": "optional"}));
                    }
                }
                value
            })
        }
        _ => None,
    };
    if let Some(value) = shaped {
        response.result = ServerResult::CustomResult(CustomResult(value));
    }
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// What `tasks/result` returns once a task ended: what its call answered
/// (a result, with the related-task `_meta`, or a JSON-RPC error).
type Outcome = Result<Value, ErrorData>;

struct Entry {
    id: String,
    status: Status,
    message: Option<String>,
    created: SystemTime,
    updated: SystemTime,
    ttl: Duration,
    expires: Instant,
    /// Cancels the task's call.
    stop: CancellationToken,
    /// Set once, when the task ends.
    outcome: watch::Sender<Option<Outcome>>,
}

impl Entry {
    /// The task as the protocol shows it.
    fn json(&self) -> Value {
        let mut task = json!({
            "taskId": self.id,
            "status": self.status.name(),
            "createdAt": rfc3339(self.created),
            "lastUpdatedAt": rfc3339(self.updated),
            "ttl": u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX),
            "pollInterval": POLL_INTERVAL_MS,
        });
        if let Some(message) = &self.message {
            task["statusMessage"] = message.as_str().into();
        }
        task
    }

    fn end(&mut self, status: Status, message: Option<String>, outcome: Outcome) {
        self.status = status;
        self.message = message;
        self.updated = SystemTime::now();
        self.outcome.send_replace(Some(outcome));
    }
}

/// A session's tasks, in the order they were made.
#[derive(Default)]
pub(super) struct Tasks {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// By a count of the session's tasks (a `tasks/list` cursor is one).
    entries: BTreeMap<u64, Entry>,
    keys: HashMap<String, u64>,
    next: u64,
}

impl Inner {
    /// Forgets the tasks whose time ran out (cancelling any still working).
    fn sweep(&mut self) {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            self.remove(key);
        }
    }

    fn remove(&mut self, key: u64) {
        if let Some(entry) = self.entries.remove(&key) {
            self.keys.remove(&entry.id);
            entry.stop.cancel();
        }
    }

    fn find(&mut self, id: &str) -> Result<&mut Entry, ErrorData> {
        self.sweep();
        self.keys
            .get(id)
            .and_then(|key| self.entries.get_mut(key))
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!(
                        "Failed to retrieve task: this session has no task {:?} (a task is \
                         forgotten when its ttl ends)",
                        sanitize::clean_capped(id, Sink::Line, 100)
                    ),
                    None,
                )
            })
    }
}

impl Tasks {
    /// A new working task, kept for `ttl` ms (within this module's bounds):
    /// its id, its call's stop, its time to live and how it shows.
    fn create(
        &self,
        ttl: Option<u64>,
    ) -> Result<(String, CancellationToken, Duration, Value), ErrorData> {
        let ttl = ttl
            .map_or(DEFAULT_TTL, Duration::from_millis)
            .clamp(MIN_TTL, MAX_TTL);
        let mut inner = lock(&self.inner);
        inner.sweep();
        if inner.entries.len() >= MAX_TASKS {
            let ended = inner
                .entries
                .iter()
                .find(|(_, e)| e.status != Status::Working)
                .map(|(k, _)| *k);
            let Some(ended) = ended else {
                return Err(ErrorData::new(
                    ErrorCode(-32000),
                    format!(
                        "this session has {MAX_TASKS} tasks working, its limit: wait for one \
                         to end, cancel one (tasks/cancel), or call without a task"
                    ),
                    None,
                ));
            };
            inner.remove(ended);
        }
        let key = inner.next;
        inner.next += 1;
        let created = SystemTime::now();
        let entry = Entry {
            id: task_id(),
            status: Status::Working,
            message: None,
            created,
            updated: created,
            ttl,
            expires: Instant::now() + ttl,
            stop: CancellationToken::new(),
            outcome: watch::Sender::new(None),
        };
        let made = (entry.id.clone(), entry.stop.clone(), ttl, entry.json());
        inner.keys.insert(entry.id.clone(), key);
        inner.entries.insert(key, entry);
        Ok(made)
    }

    fn get(&self, id: &str) -> Result<Value, ErrorData> {
        Ok(lock(&self.inner).find(id)?.json())
    }

    /// A page of the session's tasks, oldest first, from `cursor` (a count
    /// this server gave).
    fn list(&self, cursor: Option<&str>) -> Result<Value, ErrorData> {
        let mut inner = lock(&self.inner);
        inner.sweep();
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<u64>()
                .ok()
                .filter(|&key| key <= inner.next)
                .ok_or_else(|| {
                    ErrorData::invalid_params("the cursor is not one this server gave", None)
                })?,
        };
        let mut entries = inner.entries.range(start..);
        let tasks: Vec<Value> = entries
            .by_ref()
            .take(super::PAGE)
            .map(|(_, e)| e.json())
            .collect();
        let mut result = json!({ "tasks": tasks });
        if let Some((next, _)) = entries.next() {
            result["nextCursor"] = next.to_string().into();
        }
        Ok(result)
    }

    /// Cancels a working task: its call is cancelled in the executor, and
    /// the task is `cancelled` from now on, whatever the call does.
    fn cancel(&self, id: &str) -> Result<Value, ErrorData> {
        let mut inner = lock(&self.inner);
        let entry = inner.find(id)?;
        if entry.status != Status::Working {
            return Err(ErrorData::invalid_params(
                format!(
                    "Cannot cancel task: already in terminal status '{}'",
                    entry.status.name()
                ),
                None,
            ));
        }
        entry.end(
            Status::Cancelled,
            Some("The task was cancelled by request (tasks/cancel).".into()),
            Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "cancelled: the task was cancelled (tasks/cancel)",
                None,
            )),
        );
        entry.stop.cancel();
        Ok(entry.json())
    }

    /// Records what a task's call answered: the task as it now is, unless
    /// it had already ended (cancelled) or was forgotten.
    fn finish(&self, id: &str, answer: Result<CallToolResult, ErrorData>) -> Option<Value> {
        let (status, message, outcome) = match answer {
            Ok(result) if result.is_error == Some(true) => {
                let text = result
                    .content
                    .iter()
                    .find_map(|c| c.as_text().map(|t| t.text.clone()))
                    .unwrap_or_else(|| "the tool call failed".into());
                let message = sanitize::clean_capped(&text, Sink::Line, 300);
                (Status::Failed, Some(message), related(result, id))
            }
            Ok(result) => (Status::Completed, None, related(result, id)),
            Err(error) => {
                let message = sanitize::clean_capped(&error.message, Sink::Line, 300);
                (Status::Failed, Some(message), Err(error))
            }
        };
        let mut inner = lock(&self.inner);
        let key = *inner.keys.get(id)?;
        let entry = inner.entries.get_mut(&key)?;
        if entry.status != Status::Working {
            return None;
        }
        entry.end(status, message, outcome);
        Some(entry.json())
    }

    /// Forgets a task.
    fn forget(&self, id: &str) {
        let mut inner = lock(&self.inner);
        if let Some(key) = inner.keys.get(id).copied() {
            inner.remove(key);
        }
    }

    /// What `tasks/result` waits on: the task's outcome, once it ended.
    fn outcome(&self, id: &str) -> Result<watch::Receiver<Option<Outcome>>, ErrorData> {
        Ok(lock(&self.inner).find(id)?.outcome.subscribe())
    }
}

/// A task's call result as `tasks/result` returns it: the JSON the call
/// itself would have answered (in the shape of the protocol versions this
/// server offers), with the related-task `_meta`.
fn related(result: CallToolResult, id: &str) -> Outcome {
    let mut result = ServerResult::CallToolResult(result);
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    let mut value = serde_json::to_value(&result).map_err(|e| {
        ErrorData::internal_error(format!("the task's result cannot be sent: {e}"), None)
    })?;
    if let Some(fields) = value.as_object_mut() {
        let meta = fields.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK.into(), json!({ "taskId": id }));
        }
    }
    Ok(value)
}

impl McpServer {
    /// Answers the custom requests [`divert`] made; any other custom
    /// method is not found, as before.
    pub(super) async fn task_request(
        &self,
        request: CustomRequest,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let tasks = &self.session.tasks;
        let result = match request.method.as_str() {
            CALL => {
                let call = context.extensions.remove::<TaskCall>();
                self.start_task(call.ok_or_else(|| method_not_found(CALL))?, context)?
            }
            GET => tasks.get(&task_id_param(&request)?)?,
            LIST => tasks.list(cursor_param(&request)?.as_deref())?,
            CANCEL => {
                let task = tasks.cancel(&task_id_param(&request)?)?;
                notify_status(&context.peer, task.clone()).await;
                task
            }
            RESULT => {
                let id = task_id_param(&request)?;
                let mut outcome = tasks.outcome(&id)?;
                tokio::select! {
                    ended = outcome.wait_for(Option::is_some) => {
                        let ended = ended.ok().and_then(|o| o.clone());
                        ended.unwrap_or_else(|| {
                            Err(ErrorData::invalid_params(
                                "Failed to retrieve task: the task was forgotten (its ttl ended)",
                                None,
                            ))
                        })?
                    }
                    () = context.ct.cancelled() => return Err(cancelled_by_client()),
                }
            }
            other => return Err(method_not_found(other)),
        };
        Ok(CustomResult(result))
    }

    /// Makes the task and starts its call, which runs as a plain
    /// `tools/call` does (the handler, its turn, the executor), stopped by
    /// the task's own token instead of the request's: by `tasks/cancel`, or
    /// when its ttl ends (then the task is forgotten).
    fn start_task(
        &self,
        call: TaskCall,
        mut context: RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let ttl = call
            .task
            .0
            .map_err(|e| ErrorData::invalid_params(e, None))?;
        self.session.narrow(super::tool_view(&context));
        // A tool whose component is still compiling may be listed later:
        // the task's call waits for it.
        let tools = self.tools();
        if tools.get(&call.params.name).is_none() && tools.unlisted().is_empty() {
            return Err(super::no_such_tool(&call.params.name));
        }
        let (id, stop, ttl, task) = self.session.tasks.create(ttl)?;
        context.ct = stop.clone();
        let server = self.clone();
        tokio::spawn(async move {
            let peer = context.peer.clone();
            let answer = server.call_tool(call.params, context);
            tokio::pin!(answer);
            let answer = tokio::select! {
                answer = &mut answer => answer,
                () = tokio::time::sleep(ttl) => {
                    stop.cancel();
                    let _ = answer.await;
                    server.session.tasks.forget(&id);
                    return;
                }
            };
            let answer = answer.and_then(|response| match response {
                CallToolResponse::Complete(result) => Ok(result),
                _ => Err(ErrorData::internal_error(
                    "the call answered what a task cannot hold",
                    None,
                )),
            });
            if let Some(task) = server.session.tasks.finish(&id, answer) {
                notify_status(&peer, task).await;
            }
        });
        Ok(json!({ "task": task }))
    }
}

/// Sends `notifications/tasks/status` with the task as it now is.
async fn notify_status(peer: &Peer<RoleServer>, task: Value) {
    let status = CustomNotification::new(STATUS, Some(task));
    let _ = peer
        .send_notification(ServerNotification::CustomNotification(status))
        .await;
}

fn method_not_found(method: &str) -> ErrorData {
    ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None)
}

fn task_id_param(request: &CustomRequest) -> Result<String, ErrorData> {
    request
        .params
        .as_ref()
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("{} needs the task's id (params.taskId)", request.method),
                None,
            )
        })
}

fn cursor_param(request: &CustomRequest) -> Result<Option<String>, ErrorData> {
    match request.params.as_ref().and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(cursor)) => Ok(Some(cursor.clone())),
        Some(_) => Err(ErrorData::invalid_params(
            "the cursor is not one this server gave",
            None,
        )),
    }
}

/// 32 hex digits no client can guess: a BLAKE3 hash, keyed with 32 bytes
/// drawn once per process (from the random seeds of std's `RandomState`,
/// which come from the operating system), of a count and the time.
fn task_id() -> String {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let key = KEY.get_or_init(|| {
        use std::hash::BuildHasher;
        let mut key = [0; 32];
        for (i, chunk) in key.chunks_mut(8).enumerate() {
            let random = std::collections::hash_map::RandomState::new().hash_one(i);
            chunk.copy_from_slice(&random.to_le_bytes());
        }
        key
    });
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(&COUNT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    hasher.update(&now.as_nanos().to_le_bytes());
    hasher.finalize().to_hex()[..32].to_owned()
}

/// `time` in UTC as RFC 3339 (an ISO 8601 profile), to the millisecond:
/// `2025-11-25T10:30:00.000Z`.
fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let second = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        second / 3600,
        second / 60 % 60,
        second % 60,
        since.subsec_millis()
    )
}

/// The Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let m = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * m + 2) / 5 + 1;
    let month = if m < 10 { m + 3 } else { m - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stdio_transport::Stdio;
    use rmcp::transport::Transport;
    use tokio::io::AsyncBufReadExt;

    #[test]
    fn only_a_call_with_a_task_asks_for_one() {
        let call = |params: &str| {
            requested(
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
                    .as_bytes(),
            )
        };
        assert_eq!(
            call(r#"{"name":"sleep","task":{"ttl":60000}}"#),
            Some(TaskRequest(Ok(Some(60000))))
        );
        assert_eq!(
            call(r#"{"name":"sleep","task":{}}"#),
            Some(TaskRequest(Ok(None)))
        );
        assert_eq!(call(r#"{"name":"sleep","task":null}"#), None);
        assert_eq!(
            call(r#"{"name":"sleep","arguments":{"task":{}}}"#),
            None,
            "an argument named task is not the call's task"
        );
        assert_eq!(call(r#"{"name":"sleep"}"#), None);
        assert!(matches!(
            call(r#"{"name":"sleep","task":{"ttl":-1}}"#),
            Some(TaskRequest(Err(_)))
        ));
        assert!(matches!(
            call(r#"{"name":"sleep","task":5}"#),
            Some(TaskRequest(Err(_)))
        ));
        let other = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"task":{}}}"#;
        assert_eq!(requested(other), None);
        assert_eq!(requested(b"{\"task\": not json"), None);
    }

    #[test]
    fn times_are_rfc_3339_in_utc() {
        let at = |seconds: u64, millis: u64| {
            rfc3339(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_764_066_600, 250), "2025-11-25T10:30:00.250Z");
        assert_eq!(at(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn task_ids_are_long_and_unique() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| task_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }

    #[test]
    fn a_session_keeps_its_working_tasks_and_makes_room_by_forgetting_ended_ones() {
        let tasks = Tasks::default();
        let ids: Vec<String> = (0..MAX_TASKS)
            .map(|_| tasks.create(None).unwrap().0)
            .collect();
        let full = tasks.create(None).unwrap_err();
        assert_eq!(full.code, ErrorCode(-32000));
        assert!(
            full.message.contains("128 tasks working"),
            "{}",
            full.message
        );
        let done = tasks.finish(&ids[5], Ok(CallToolResult::success(vec![])));
        assert_eq!(done.unwrap()["status"], "completed");
        let (_, _, _, task) = tasks.create(None).unwrap();
        assert_eq!(task["status"], "working");
        assert!(tasks.get(&ids[5]).is_err(), "the ended task made room");
        assert!(tasks.get(&ids[4]).is_ok());
    }

    #[test]
    fn a_ttl_is_kept_within_bounds() {
        let tasks = Tasks::default();
        let ttl = |asked| tasks.create(asked).unwrap().2;
        assert_eq!(ttl(None), DEFAULT_TTL);
        assert_eq!(ttl(Some(1)), MIN_TTL);
        assert_eq!(ttl(Some(60_000)), Duration::from_secs(60));
        assert_eq!(ttl(Some(u64::MAX)), MAX_TTL);
        let (_, _, _, task) = tasks.create(Some(1)).unwrap();
        assert_eq!(task["ttl"], 1000);
        assert_eq!(task["pollInterval"], POLL_INTERVAL_MS);
    }

    #[test]
    fn a_cancelled_task_stays_cancelled_and_an_ended_one_cannot_be_cancelled() {
        let tasks = Tasks::default();
        let (id, stop, _, _) = tasks.create(None).unwrap();
        let task = tasks.cancel(&id).unwrap();
        assert_eq!(task["status"], "cancelled");
        assert!(stop.is_cancelled(), "the call is stopped");
        assert_eq!(tasks.finish(&id, Ok(CallToolResult::success(vec![]))), None);
        assert_eq!(tasks.get(&id).unwrap()["status"], "cancelled");
        let again = tasks.cancel(&id).unwrap_err();
        assert_eq!(again.code, ErrorCode::INVALID_PARAMS);
        assert!(again.message.contains("'cancelled'"), "{}", again.message);
        let (failed, _, _, _) = tasks.create(None).unwrap();
        let error = CallToolResult::error(vec![rmcp::model::ContentBlock::text("no such file")]);
        let task = tasks.finish(&failed, Ok(error)).unwrap();
        assert_eq!(task["status"], "failed", "isError is a failed task");
        assert_eq!(task["statusMessage"], "no such file");
        let outcome = tasks.outcome(&failed).unwrap().borrow().clone();
        let result = outcome.unwrap().unwrap();
        assert_eq!(result["isError"], true);
        assert_eq!(result["_meta"][RELATED_TASK]["taskId"], failed.as_str());
        assert!(result.get("resultType").is_none(), "{result}");
        assert_eq!(
            tasks.get("no-such-task").unwrap_err().code,
            ErrorCode::INVALID_PARAMS
        );
    }

    #[test]
    fn tasks_are_listed_oldest_first_a_page_at_a_time() {
        let tasks = Tasks::default();
        let ids: Vec<String> = (0..crate::PAGE + 5)
            .map(|_| tasks.create(None).unwrap().0)
            .collect();
        let first = tasks.list(None).unwrap();
        let listed = first["tasks"].as_array().unwrap();
        assert_eq!(listed.len(), crate::PAGE);
        assert_eq!(listed[0]["taskId"], ids[0].as_str());
        let cursor = first["nextCursor"].as_str().unwrap();
        let second = tasks.list(Some(cursor)).unwrap();
        assert_eq!(second["tasks"].as_array().unwrap().len(), 5);
        assert_eq!(second["tasks"][4]["taskId"], ids[104].as_str());
        assert!(second.get("nextCursor").is_none());
        for bad in ["x", "-1", "9999"] {
            assert_eq!(
                tasks.list(Some(bad)).unwrap_err().code,
                ErrorCode::INVALID_PARAMS
            );
        }
    }

    #[test]
    fn the_capability_and_each_tools_task_support_are_added_to_the_replies() {
        use rmcp::model::{InitializeResult, ListToolsResult, ServerCapabilities, Tool};
        let init = InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
        let mut message = ServerJsonRpcMessage::response(
            ServerResult::InitializeResult(init),
            rmcp::model::RequestId::Number(0),
        );
        shape(&mut message);
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(
            json["result"]["capabilities"]["tasks"],
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
        );
        assert!(json["result"]["capabilities"]["tools"].is_object());
        let tool = Tool::new("probe", "Probes.", serde_json::Map::new());
        let mut message = ServerJsonRpcMessage::response(
            ServerResult::ListToolsResult(ListToolsResult::with_all_items(vec![tool])),
            rmcp::model::RequestId::Number(1),
        );
        shape(&mut message);
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(json["result"]["tools"][0]["name"], "probe");
        assert_eq!(
            json["result"]["tools"][0]["execution"],
            json!({"taskSupport": "optional"})
        );
    }

    #[derive(Clone, Debug, PartialEq)]
    struct Turned(u64);

    #[tokio::test]
    async fn the_stdio_reader_keeps_a_calls_task_and_resumes_a_line_split_across_reads() {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = tokio::io::duplex(64);
        let (replies, out) = tokio::io::duplex(4096);
        let mut stdio = Stdio::new(server, out);
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1},"task":{"ttl":5000}}}"#;
        let get = br#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t"}}"#;
        let writer = tokio::spawn(async move {
            let lines: [&[u8]; 7] = [
                b"not json\n\n",
                br#"{"jsonrpc":"1.0","method":"x/y"}"#,
                b"\n{\"jsonrpc\":\"2.0\",\"id\":7,\"what\":1}\n",
                call,
                b"\r\n",
                get,
                b"\n",
            ];
            for line in lines {
                client.write_all(line).await.unwrap();
            }
        });
        let Some(JsonRpcMessage::Request(mut first)) = stdio.receive().await else {
            panic!("no request");
        };
        let ClientRequest::CallToolRequest(call) = &mut first.request else {
            panic!("not a call: {:?}", first.request);
        };
        assert_eq!(
            call.extensions.get::<TaskRequest>(),
            Some(&TaskRequest(Ok(Some(5000))))
        );
        // What `Ordered` put on the call (its turn) goes along.
        call.extensions.insert(Turned(3));
        divert(&mut first.request);
        let ClientRequest::CustomRequest(custom) = &first.request else {
            panic!("not diverted");
        };
        assert_eq!(custom.method, CALL);
        assert_eq!(custom.extensions.get::<Turned>(), Some(&Turned(3)));
        let task_call = custom.extensions.get::<TaskCall>().unwrap();
        assert_eq!(task_call.params.name, "sleep");
        let Some(JsonRpcMessage::Request(mut second)) = stdio.receive().await else {
            panic!("no second request");
        };
        divert(&mut second.request);
        let ClientRequest::CustomRequest(get) = &second.request else {
            panic!("tasks/get is not diverted: {:?}", second.request);
        };
        assert_eq!(get.method, GET);
        assert_eq!(get.params, Some(json!({"taskId": "t"})));
        writer.await.unwrap();
        assert!(stdio.receive().await.is_none(), "the end of input ends it");
        drop(stdio);
        let mut replies = tokio::io::BufReader::new(replies);
        let mut answered = Vec::new();
        for _ in 0..2 {
            let mut reply = String::new();
            replies.read_line(&mut reply).await.unwrap();
            let reply: Value = serde_json::from_str(&reply).unwrap();
            answered.push((reply["id"].clone(), reply["error"]["code"].clone()));
        }
        answered.sort_by_key(|(id, _)| id.to_string());
        // The line that is not JSON, and the request; not the notification.
        assert_eq!(
            answered,
            [(json!(7), json!(-32600)), (Value::Null, json!(-32700))]
        );
    }
}
