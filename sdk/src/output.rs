//! [`Output`]: the builder for a successful result: content for the model,
//! optional structured output, messages, context changes and metadata.

use crate::{
    ContentBlock, ContextChange, EnvVar, Image, Message, ResourceLink, Role, StateEntry, ToolOutput,
};
use serde::Serialize;

/// A successful result, built up from content blocks and changes.
#[derive(Debug, Clone)]
pub struct Output {
    inner: ToolOutput,
}

impl Default for Output {
    fn default() -> Self {
        Output::new()
    }
}

impl Output {
    /// An empty result.
    pub fn new() -> Self {
        Output {
            inner: ToolOutput {
                content: Vec::new(),
                structured: None,
                messages: Vec::new(),
                changes: Vec::new(),
                metadata: None,
            },
        }
    }

    /// A result of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Output::new().with_text(text)
    }

    /// Adds a text block.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.inner.content.push(ContentBlock::Text(text.into()));
        self
    }

    /// Adds a JSON block.
    pub fn with_json(mut self, value: &impl Serialize) -> Self {
        self.inner.content.push(ContentBlock::Json(to_json(value)));
        self
    }

    /// Adds an image block.
    pub fn with_image(mut self, mime_type: &str, data: Vec<u8>) -> Self {
        self.inner.content.push(ContentBlock::Image(Image {
            mime_type: mime_type.into(),
            data,
        }));
        self
    }

    /// Adds a link to a resource.
    pub fn with_link(mut self, link: ResourceLink) -> Self {
        self.inner.content.push(ContentBlock::ResourceLink(link));
        self
    }

    /// Sets the structured output: a value of the type declared with
    /// [`Describe::output_schema`](crate::Describe::output_schema) (the host
    /// checks it against that schema and fails the call if it does not
    /// match). It must hold the whole result, not a summary of the text:
    /// MCP clients such as Claude Code show the model only this when it is
    /// there. A tool that declares no output schema should not set it (over
    /// MCP it is then not sent).
    pub fn structured(mut self, value: &impl Serialize) -> Self {
        self.inner.structured = Some(to_json(value));
        self
    }

    /// Adds a message to the conversation after the result.
    pub fn message(mut self, role: Role, text: impl Into<String>) -> Self {
        self.inner.messages.push(Message {
            role,
            text: text.into(),
        });
        self
    }

    /// Asks the host for a context change.
    pub fn change(mut self, change: ContextChange) -> Self {
        self.inner.changes.push(change);
        self
    }

    /// Changes the agent's working directory.
    pub fn set_cwd(self, path: impl Into<String>) -> Self {
        self.change(ContextChange::SetCwd(path.into()))
    }

    /// Sets an environment variable for later calls.
    pub fn set_env(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.change(ContextChange::SetEnv(EnvVar {
            name: name.into(),
            value: value.into(),
        }))
    }

    /// Removes an environment variable.
    pub fn unset_env(self, name: impl Into<String>) -> Self {
        self.change(ContextChange::UnsetEnv(name.into()))
    }

    /// Stores a value this tool can read back in later calls.
    pub fn set_state(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.change(ContextChange::SetState(StateEntry {
            key: key.into(),
            value: value.into(),
        }))
    }

    /// Records that the model has now seen `path` as it is.
    pub fn record_file_read(self, path: impl Into<String>) -> Self {
        self.change(ContextChange::RecordFileRead(path.into()))
    }

    /// Sets metadata for the front end (a JSON object, MCP's `_meta`).
    pub fn metadata(mut self, value: &impl Serialize) -> Self {
        self.inner.metadata = Some(to_json(value));
        self
    }

    /// An output from the WIT record.
    pub fn from_inner(inner: ToolOutput) -> Self {
        Output { inner }
    }

    /// The WIT record.
    pub fn into_inner(self) -> ToolOutput {
        self.inner
    }
}

fn to_json(value: &impl Serialize) -> String {
    // Serialising plain data cannot fail; a value that cannot be serialised
    // (a map with non-string keys) is a bug in the tool, and the panic
    // message reaches the host's error report.
    serde_json::to_string(value).expect("a tool's JSON value must serialise")
}
