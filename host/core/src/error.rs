//! Errors: [`CallError`], what a failed call returns, with its stable
//! [`ErrorClass`] (Claude Code's `classifyToolError`), and [`LoadError`], why a
//! component did not become a tool.
//!
//! Every message here may reach a model or a terminal, so it must carry
//! guest paths only, and guest-controlled text in it must already be
//! sanitised by whoever built it.

use serde::Serialize;
use std::fmt;

/// A stable class for a failed call, for telemetry (`error.type`) and for
/// front ends that treat failures differently.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub enum ErrorClass {
    /// The input failed validation.
    InvalidInput,
    /// The call was not allowed.
    PermissionDenied,
    /// The call ran out of time.
    Timeout,
    /// The call was cancelled (by the user or a failing sibling).
    Cancelled,
    /// The guest hit its memory limit.
    MemoryLimit,
    /// The guest overflowed its stack.
    StackOverflow,
    /// The guest trapped (a panic, an out-of-bounds access, ...).
    Trap,
    /// The guest wrote more output than allowed.
    OutputLimit,
    /// The guest wrote more to its writable mounts than its budget.
    WriteLimit,
    /// The guest held too many handles, asked for too much random data, or
    /// passed too much data to the host in one host call.
    ResourceLimit,
    /// A filesystem or I/O failure, by errno name (`ENOENT`, `EPERM`, ...).
    Errno(String),
    /// What the input refers to does not exist (a record, a name; a
    /// missing file is `ENOENT`).
    NotFound,
    /// The tool reported a failure of its own.
    ToolError,
    /// No tool has that name.
    UnknownTool,
    /// The host failed (a bug or an exhausted host resource).
    Internal,
}

impl ErrorClass {
    /// The class as it appears in telemetry.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorClass::InvalidInput => "invalid_input",
            ErrorClass::PermissionDenied => "permission_denied",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::MemoryLimit => "memory_limit",
            ErrorClass::StackOverflow => "stack_overflow",
            ErrorClass::Trap => "trap",
            ErrorClass::OutputLimit => "output_limit",
            ErrorClass::WriteLimit => "write_limit",
            ErrorClass::ResourceLimit => "resource_limit",
            ErrorClass::Errno(name) => name,
            ErrorClass::NotFound => "not_found",
            ErrorClass::ToolError => "tool_error",
            ErrorClass::UnknownTool => "unknown_tool",
            ErrorClass::Internal => "internal",
        }
    }

    /// An errno class, if `name` looks like one (`E` and capitals or digits);
    /// anything else is a plain tool error, so a guest cannot mint classes.
    pub fn errno(name: &str) -> ErrorClass {
        let valid = name.len() >= 2
            && name.len() <= 16
            && name.starts_with('E')
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if valid {
            ErrorClass::Errno(name.to_string())
        } else {
            ErrorClass::ToolError
        }
    }
}

impl From<ErrorClass> for String {
    fn from(class: ErrorClass) -> String {
        class.as_str().to_string()
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call: a class and a message written for the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallError {
    /// The stable class.
    pub class: ErrorClass,
    /// What went wrong and, where possible, what to do about it.
    pub message: String,
}

impl CallError {
    /// A new error.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        CallError {
            class,
            message: message.into(),
        }
    }

    /// The input failed validation.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::InvalidInput, message)
    }

    /// The call was not allowed.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::PermissionDenied, message)
    }

    /// The call was cancelled.
    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Cancelled, message)
    }

    /// The host failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Internal, message)
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.class)
    }
}

impl std::error::Error for CallError {}

/// Why a component did not become a tool. Each message says what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read the component: {0}")]
    Io(String),
    /// The file is not the component `airlock install` pinned for it.
    #[error(
        "its BLAKE3 is {found}, but airlock.lock pins {expected} (installed from {reference}); \
         reinstall it with `airlock install {reference}`, or remove it with `airlock remove {name}`"
    )]
    NotAsLocked {
        /// The tool's name in the lock.
        name: String,
        /// Where it was installed from.
        reference: String,
        /// The BLAKE3 the lock records.
        expected: String,
        /// The BLAKE3 of the file now.
        found: String,
    },
    /// The file is larger than the configured cap (counted while reading).
    #[error("the component is larger than {limit} bytes (limits.component_bytes)")]
    TooLarge {
        /// The cap.
        limit: u64,
    },
    /// A tool directory holds more components, or more bytes of them, than
    /// one directory may load: those past the bound (by file name) were not
    /// read.
    #[error(
        "holds {found} components; {skipped} of them, from {first} on (by name), were not loaded: \
         more than {bound} ({limit}); move tools to another directory, or raise the limit"
    )]
    DirectoryFull {
        /// How many component files the directory holds.
        found: usize,
        /// How many were left unread.
        skipped: usize,
        /// The first file left unread.
        first: String,
        /// What was exceeded, as a person reads it.
        bound: String,
        /// The `[limits]` key that sets it.
        limit: String,
    },
    /// The file is a precompiled artifact, which Airlock never accepts from outside.
    #[error(
        "this is a precompiled artifact, not a component; Airlock only loads .wasm components it compiles itself"
    )]
    Precompiled,
    /// The bytes are not a valid component.
    #[error("not a valid component: {0}")]
    Compile(String),
    /// Compiling took longer than allowed.
    #[error("compiling the component took longer than {0} ms (limits.compile_timeout_ms)")]
    CompileTimeout(u64),
    /// The component imports something Airlock never provides.
    #[error("imports `{import}`, which Airlock does not provide: {reason}")]
    ForbiddenImport {
        /// The import's name.
        import: String,
        /// Why it is refused.
        reason: String,
    },
    /// The component imports an interface its grants do not allow.
    #[error("imports `{import}`, which needs {needs}; {how}")]
    UngrantedImport {
        /// The import's name.
        import: String,
        /// The grant it needs.
        needs: String,
        /// How to grant it.
        how: String,
    },
    /// `describe` failed.
    #[error("describing the tool failed: {0}")]
    Describe(String),
    /// The descriptor has problems.
    #[error("the descriptor of `{tool}` is invalid: {}", problems.join("; "))]
    InvalidDescriptor {
        /// The tool's name as it gave it.
        tool: String,
        /// What is wrong.
        problems: Vec<String>,
    },
    /// The name or an alias is already taken.
    #[error("the name `{name}` is already used by {other}")]
    Duplicate {
        /// The clashing name.
        name: String,
        /// The source that has it.
        other: String,
    },
    /// The grants in the configuration are unsafe or invalid.
    #[error("invalid grants: {0}")]
    Grants(String),
    /// A tool's component changed under a running host, and the new code
    /// is not approved: the version loaded before is still served.
    #[error(
        "the component of `{name}` changed since it was loaded (BLAKE3 {was} → {now}); the \
         version loaded before is served until the new one is approved: review it, then run \
         `airlock approve {name}`"
    )]
    Unapproved {
        /// The tool.
        name: String,
        /// The digest served.
        was: String,
        /// The digest on disk.
        now: String,
    },
    /// An external MCP server could not be started or listed.
    #[error("the MCP server failed: {0}")]
    McpServer(String),
    /// The host itself failed while loading the component (its compiler
    /// thread could not start or panicked): no fault of the component, so
    /// never remembered as its failure.
    #[error("the host failed while loading it: {0}")]
    Host(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_have_stable_names() {
        assert_eq!(ErrorClass::InvalidInput.as_str(), "invalid_input");
        assert_eq!(ErrorClass::errno("ENOENT").as_str(), "ENOENT");
        assert_eq!(ErrorClass::errno("enoent"), ErrorClass::ToolError);
        assert_eq!(ErrorClass::errno("E"), ErrorClass::ToolError);
        assert_eq!(
            ErrorClass::errno("EVERYTHING_IS_FINE"),
            ErrorClass::ToolError
        );
        assert_eq!(
            serde_json::to_value(ErrorClass::OutputLimit).unwrap(),
            serde_json::json!("output_limit")
        );
    }

    #[test]
    fn errors_display_message_and_class() {
        let e = CallError::invalid_input("bad");
        assert_eq!(e.to_string(), "bad (invalid_input)");
    }
}
