//! The one host-side [`Tool`] trait, and the values that cross it.
//!
//! Every tool implements [`Tool`]: wasm components (through the engine's
//! `WasmTool`), native built-ins, and proxied tools. The pipeline and the
//! front ends see only this trait.
//!
//! A tool use is one [`Invocation`]: the pipeline creates it, passes it to
//! `classify`, `validate`, `check_permissions` and `call` in that order,
//! and fills in its [`CallGrants`] once the call's flags are known. A tool
//! may keep per-use state in its scratch slot between those steps.

use crate::descriptor::{Descriptor, SafetyFlags};
use crate::error::CallError;
use crate::grants::{CallGrants, FileStamp};
use crate::secrets::Secrets;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};
use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
pub use tokio_util::sync::CancellationToken;

/// A tool: described once, then classified, validated, checked and called
/// once per use.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's descriptor.
    fn descriptor(&self) -> &Descriptor;

    /// Where the tool comes from (for listings and logs).
    fn origin(&self) -> &ToolOrigin;

    /// A hash identifying the tool's code (hex), when it has one: "always
    /// allow" answers and the choice between tools of one name bind to it,
    /// so other code under the same name is not trusted as the old was.
    fn digest(&self) -> Option<&str> {
        None
    }

    /// Imports linked deny-all: the tool may import them, and every use
    /// fails (`wasi:sockets`: no socket, connection or name lookup;
    /// `wasi:http` of a tool that asks for no network hosts: every request
    /// refused). For listings, so an operator sees what a tool tried to
    /// bring.
    fn deny_all_imports(&self) -> Vec<String> {
        Vec::new()
    }

    /// The flags of this input, when they differ from the descriptor's.
    async fn classify(
        &self,
        _invocation: &mut Invocation,
        _input: &Value,
    ) -> Result<Option<SafetyFlags>, CallError> {
        Ok(None)
    }

    /// Tool-specific validation, after the host checked the schema.
    async fn validate(
        &self,
        _invocation: &mut Invocation,
        _input: &Value,
    ) -> Result<(), CallError> {
        Ok(())
    }

    /// The tool's own permission check.
    async fn check_permissions(
        &self,
        _invocation: &mut Invocation,
        _input: &Value,
    ) -> Result<PermissionDecision, CallError> {
        Ok(PermissionDecision::Passthrough)
    }

    /// Runs the tool with `invocation.grants`.
    async fn call(
        &self,
        invocation: &mut Invocation,
        input: &Value,
    ) -> Result<ToolOutput, CallError>;
}

/// Where a tool comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "location", rename_all = "kebab-case")]
pub enum ToolOrigin {
    /// Built into this binary (the package name).
    Bundled(String),
    /// Loaded from a component file.
    File(std::path::PathBuf),
    /// A tool built into the host (`tool_search`): host code that touches
    /// nothing but the host's own state, so it is treated as sandboxed.
    Builtin,
    /// Native code in the host, not sandboxed.
    Native,
    /// A tool of an external MCP server (a native process of its own,
    /// confined by its grants unless the operator opted out, never a
    /// component): the server's name in the configuration.
    Mcp(String),
}

impl ToolOrigin {
    /// Whether the tool runs inside the wasm sandbox (or is a host
    /// built-in that reaches nothing outside the host). A tool that is not
    /// sandboxed asks in the default, acceptEdits and plan modes (unless a
    /// rule allows it), whatever its flags claim.
    pub fn sandboxed(&self) -> bool {
        !matches!(self, ToolOrigin::Native | ToolOrigin::Mcp(_))
    }
}

impl std::fmt::Display for ToolOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolOrigin::Bundled(package) => write!(f, "bundled ({package})"),
            ToolOrigin::File(path) => write!(f, "{}", path.display()),
            ToolOrigin::Builtin => f.write_str("built-in"),
            ToolOrigin::Native => f.write_str("native"),
            ToolOrigin::Mcp(server) => write!(f, "MCP server `{server}`"),
        }
    }
}

/// The tool's answer to "may this call go ahead?".
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "decision", content = "detail", rename_all = "kebab-case")]
pub enum PermissionDecision {
    /// Go ahead, optionally with a rewritten input.
    Allow(Option<Value>),
    /// Ask the user, saying why.
    Ask(String),
    /// Refuse, saying why.
    Deny(String),
    /// No opinion.
    Passthrough,
}

/// A successful result.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: Vec<ContentBlock>,
    /// Structured output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Messages to add to the conversation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    /// Changes to the agent's context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ContextChange>,
    /// Metadata for the front end (MCP `_meta`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl ToolOutput {
    /// A result of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::Text(text.into())],
            ..ToolOutput::default()
        }
    }

    /// The content as one text: text blocks as they are, JSON blocks
    /// serialised, images and links as one-line placeholders.
    pub fn text_content(&self) -> String {
        self.content
            .iter()
            .map(ContentBlock::to_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Redacts `secrets` from every text the output carries: content, structured
    /// output, messages, context changes and metadata.
    pub fn redact(&mut self, secrets: &Secrets) {
        if secrets.is_empty() {
            return;
        }
        for block in &mut self.content {
            match block {
                ContentBlock::Text(text) => secrets.redact_in_place(text),
                ContentBlock::Json(value) => secrets.redact_json(value),
                ContentBlock::ResourceLink {
                    uri,
                    name,
                    description,
                    mime_type,
                } => {
                    for text in [uri, name].into_iter().chain(description).chain(mime_type) {
                        secrets.redact_in_place(text);
                    }
                }
                ContentBlock::ToolReference { name, definition } => {
                    secrets.redact_in_place(name);
                    secrets.redact_json(definition);
                }
                ContentBlock::Image { mime_type, data } => {
                    secrets.redact_in_place(mime_type);
                    if let Cow::Owned(clean) = secrets.redact_bytes(data) {
                        *data = clean;
                    }
                }
            }
        }
        if let Some(structured) = &mut self.structured {
            secrets.redact_json(structured);
        }
        for message in &mut self.messages {
            secrets.redact_in_place(&mut message.text);
        }
        // A change carrying a secret into the context is dropped: no
        // redacted form of it is the change the tool asked for.
        let before = self.changes.len();
        self.changes.retain(|change| {
            serde_json::to_string(change).map_or(true, |text| !secrets.contains(&text))
        });
        if self.changes.len() < before {
            tracing::warn!("a tool asked for a context change carrying a secret; it was dropped");
        }
        if let Some(metadata) = &mut self.metadata {
            let mut value = Value::Object(std::mem::take(metadata));
            secrets.redact_json(&mut value);
            if let Value::Object(map) = value {
                *metadata = map;
            }
        }
    }
}

/// One block of a result. It serialises as `{"type": "text", "text": ...}`,
/// `{"type": "json", "json": ...}`, `{"type": "image", "mime_type": ...,
/// "bytes": N}` (the data stays out of logs), `{"type": "resource_link",
/// ...}` or `{"type": "tool_reference", "tool_name": ...}`.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// A JSON document.
    Json(Value),
    /// An image.
    Image {
        /// Its media type.
        mime_type: String,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// A link to a resource.
    ResourceLink {
        /// The URI.
        uri: String,
        /// A short name.
        name: String,
        /// A description.
        description: Option<String>,
        /// The media type.
        mime_type: Option<String>,
    },
    /// A tool the model may call from now on (what `tool_search` returns):
    /// Anthropic's `tool_reference`; elsewhere, the definition as text.
    ToolReference {
        /// The tool's name.
        name: String,
        /// Its definition: `name`, `description` and `input_schema`.
        definition: Value,
    },
}

impl ContentBlock {
    /// The block as text: JSON serialised, images and links as one-line
    /// placeholders.
    pub fn to_text(&self) -> String {
        match self {
            ContentBlock::Text(t) => t.clone(),
            ContentBlock::Json(v) => v.to_string(),
            ContentBlock::Image { mime_type, data } => {
                format!("[image: {mime_type}, {} bytes]", data.len())
            }
            ContentBlock::ResourceLink { uri, name, .. } => format!("[{name}]({uri})"),
            ContentBlock::ToolReference { definition, .. } => definition.to_string(),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            ContentBlock::Text(text) => serde_json::json!({"type": "text", "text": text}),
            ContentBlock::Json(json) => serde_json::json!({"type": "json", "json": json}),
            ContentBlock::Image { mime_type, data } => {
                serde_json::json!({"type": "image", "mime_type": mime_type, "bytes": data.len()})
            }
            ContentBlock::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            } => serde_json::json!({
                "type": "resource_link",
                "uri": uri,
                "name": name,
                "description": description,
                "mime_type": mime_type,
            }),
            ContentBlock::ToolReference { name, .. } => {
                serde_json::json!({"type": "tool_reference", "tool_name": name})
            }
        };
        value.serialize(s)
    }
}

/// Who a message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// A message a tool adds to the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    /// Its author.
    pub role: Role,
    /// Its text.
    pub text: String,
}

/// A change a call asks for in the agent's context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum ContextChange {
    /// A new working directory.
    SetCwd {
        /// The directory.
        path: String,
    },
    /// Set an environment variable.
    SetEnv {
        /// Its name.
        name: String,
        /// Its value.
        value: String,
    },
    /// Remove an environment variable.
    UnsetEnv {
        /// Its name.
        name: String,
    },
    /// Set a key of the tool's own state.
    SetState {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// The model has seen this file as it is now.
    RecordFileRead {
        /// The file.
        path: String,
    },
}

/// Progress of a running call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProgressEvent {
    /// The tool use it belongs to.
    pub tool_use_id: String,
    /// What is happening.
    pub message: String,
    /// The fraction done, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f32>,
}

/// How severe a tool's log line is (the levels of `airlock:tool/host`'s
/// `log`), least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Fine detail.
    Trace,
    /// For debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the tool worked around.
    Warn,
    /// A failure.
    Error,
}

/// A line a running call logged (a tool's `log`), its text sanitised and
/// capped by the host. The host's own log gets the line too.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogEvent {
    /// The tool use it belongs to.
    pub tool_use_id: String,
    /// The tool that logged it.
    pub tool: String,
    /// How severe it is.
    pub level: LogLevel,
    /// The line.
    pub message: String,
}

/// Where a call's progress goes, and its log lines when a receiver asked
/// for them ([`ProgressSink::with_logs`]). Sending never blocks: when the
/// receiver falls behind, updates are dropped (progress is a hint, not a
/// record; log lines are in the host's log as well).
#[derive(Clone, Debug, Default)]
pub struct ProgressSink {
    tx: Option<mpsc::Sender<ProgressEvent>>,
    logs: Option<mpsc::Sender<LogEvent>>,
}

impl ProgressSink {
    /// A sink that drops everything.
    pub fn none() -> Self {
        ProgressSink::default()
    }

    /// A sink and its receiver, holding up to `capacity` pending events.
    /// Log lines are not kept (see [`ProgressSink::with_logs`]).
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<ProgressEvent>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            ProgressSink {
                tx: Some(tx),
                logs: None,
            },
            rx,
        )
    }

    /// This sink, also sending the call's log lines to the returned
    /// receiver, which holds up to `capacity` pending lines.
    pub fn with_logs(self, capacity: usize) -> (Self, mpsc::Receiver<LogEvent>) {
        let (logs, rx) = mpsc::channel(capacity.max(1));
        (
            ProgressSink {
                logs: Some(logs),
                ..self
            },
            rx,
        )
    }

    /// Sends an event, or drops it when the receiver is behind or gone.
    pub fn send(&self, event: ProgressEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(event);
        }
    }

    /// Sends a log line, or drops it when no receiver asked for log lines,
    /// or it is behind or gone.
    pub fn log(&self, event: LogEvent) {
        if let Some(logs) = &self.logs {
            let _ = logs.try_send(event);
        }
    }
}

/// The agent's read-file-state cache, shared between the context and the
/// calls that look at it.
pub type ReadFiles = Arc<Mutex<lru::LruCache<String, FileStamp>>>;

/// The tools in the caller's view, as a tool may see them (what
/// `tool_search` searches): descriptors only, with the operator's
/// overrides applied.
pub trait Catalog: Send + Sync + std::fmt::Debug {
    /// The descriptor of the tool answering to `name` (a name or an
    /// alias), if it is in view.
    fn descriptor(&self, name: &str) -> Option<&Descriptor>;
    /// Every descriptor in view, sorted by name.
    fn descriptors(&self) -> Vec<&Descriptor>;
}

impl<T: Catalog + ?Sized> Catalog for Arc<T> {
    fn descriptor(&self, name: &str) -> Option<&Descriptor> {
        (**self).descriptor(name)
    }

    fn descriptors(&self) -> Vec<&Descriptor> {
        (**self).descriptors()
    }
}

/// A view with no tools in it.
#[derive(Debug)]
struct NoTools;

impl Catalog for NoTools {
    fn descriptor(&self, _name: &str) -> Option<&Descriptor> {
        None
    }

    fn descriptors(&self) -> Vec<&Descriptor> {
        Vec::new()
    }
}

/// What a call knows about the agent.
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The working directory.
    pub cwd: String,
    /// The tools in the agent's view (what `tool_search` searches).
    pub tools: Arc<dyn Catalog>,
    /// The calling agent, when it is a sub-agent.
    pub agent_id: Option<String>,
    /// The tool's own state.
    pub state: Vec<(String, String)>,
}

impl Default for CallContext {
    /// No cwd, no tools in view, not a sub-agent, no state.
    fn default() -> Self {
        CallContext {
            cwd: String::new(),
            tools: Arc::new(NoTools),
            agent_id: None,
            state: Vec::new(),
        }
    }
}

/// One tool use, as it passes through the pipeline.
pub struct Invocation {
    /// The tool use's id.
    pub tool_use_id: String,
    /// What the call knows about the agent.
    pub context: CallContext,
    /// What the call may touch; set by the pipeline before `validate`.
    pub grants: CallGrants,
    /// Cancellation of this use.
    pub cancel: CancellationToken,
    /// Where progress goes.
    pub progress: ProgressSink,
    /// The agent's read-file-state cache (read-only to tools).
    pub read_files: ReadFiles,
    /// Whose turn the call waits in for an instance slot: calls of one
    /// agent context share it (by default, the address of its read-file
    /// cache), so each context gets a fair share of the pool.
    pub tenant: usize,
    scratch: Option<Box<dyn Any + Send>>,
}

impl Invocation {
    /// A new tool use.
    pub fn new(
        tool_use_id: impl Into<String>,
        context: CallContext,
        grants: CallGrants,
        read_files: ReadFiles,
    ) -> Self {
        Invocation {
            tool_use_id: tool_use_id.into(),
            context,
            grants,
            cancel: CancellationToken::new(),
            progress: ProgressSink::none(),
            tenant: Arc::as_ptr(&read_files) as usize,
            read_files,
            scratch: None,
        }
    }

    /// The tool's per-use state of type `T`, if it stored one.
    pub fn scratch<T: Send + 'static>(&mut self) -> Option<&mut T> {
        self.scratch.as_mut()?.downcast_mut()
    }

    /// Takes the tool's per-use state of type `T` out, if it stored one.
    pub fn take_scratch<T: Send + 'static>(&mut self) -> Option<T> {
        match self.scratch.take()?.downcast::<T>() {
            Ok(value) => Some(*value),
            Err(other) => {
                self.scratch = Some(other);
                None
            }
        }
    }

    /// Stores per-use state, replacing any.
    pub fn set_scratch<T: Send + 'static>(&mut self, value: T) {
        self.scratch = Some(Box::new(value));
    }

    /// Drops the per-use state.
    pub fn clear_scratch(&mut self) {
        self.scratch = None;
    }
}

impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invocation")
            .field("tool_use_id", &self.tool_use_id)
            .field("context", &self.context)
            .field("grants", &self.grants)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::tests::{VALUE, secrets};

    #[test]
    fn outputs_lose_the_secret_everywhere_and_changes_carrying_it_are_dropped() {
        let s = secrets();
        let mut output = ToolOutput::text(format!("got {VALUE}"));
        output.content.push(ContentBlock::Json(
            serde_json::json!({VALUE: [VALUE, 1], "k": "x"}),
        ));
        output.structured = Some(serde_json::json!({"v": VALUE}));
        output.messages.push(Message {
            role: Role::User,
            text: VALUE.into(),
        });
        output.changes.push(ContextChange::SetEnv {
            name: "K".into(),
            value: VALUE.into(),
        });
        output.changes.push(ContextChange::SetEnv {
            name: "OK".into(),
            value: "fine".into(),
        });
        output.redact(&s);
        let all = serde_json::to_string(&output).unwrap();
        assert!(!all.contains(VALUE), "{all}");
        assert_eq!(
            output.content[0],
            ContentBlock::Text("got [secret api]".into())
        );
        assert_eq!(
            output.content[1],
            ContentBlock::Json(serde_json::json!({"[secret api]": ["[secret api]", 1], "k": "x"}))
        );
        assert_eq!(output.changes.len(), 1, "{:?}", output.changes);
        assert!(format!("{s:?}").contains("api") && !format!("{s:?}").contains(VALUE));
    }
}
