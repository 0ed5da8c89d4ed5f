//! Write an [Airlock](https://github.com/airlock-dev/airlock) tool in Rust.
//!
//! A tool is a type that implements [`Tool`]: a typed input (derive
//! `Deserialize` and `JsonSchema`, and the JSON Schema the model sees is
//! derived from it), a [`Describe`] of its name, prompt, safety flags and
//! the capabilities it asks for, and a `call`. [`export_tool!`] turns it into
//! a WASI 0.2 component exporting the `airlock:tool` world.
//!
//! ```
//! use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
//! use serde::Deserialize;
//!
//! /// Input of the `shout` tool.
//! #[derive(Deserialize, JsonSchema)]
//! struct ShoutInput {
//!     /// The text to shout.
//!     text: String,
//! }
//!
//! struct Shout;
//!
//! impl Tool for Shout {
//!     type Input = ShoutInput;
//!
//!     fn describe() -> Describe {
//!         Describe::new("shout", "Returns the text in capitals.")
//!             .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
//!     }
//!
//!     fn call(input: ShoutInput, _cx: &Context) -> Result<Output, ToolError> {
//!         Ok(Output::text(input.text.to_uppercase()))
//!     }
//! }
//!
//! export_tool!(Shout);
//! ```
//!
//! The SDK never decides what a tool may touch: the host mounts the
//! directories and grants the hosts and environment variables the operator
//! allowed, within what [`Describe`] asked for. Use [`Context::resolve`] to
//! turn a path from the input into one inside those mounts, with an error
//! the model can act on when it is outside them.

#![deny(missing_docs)]

use std::path::{Component, Path, PathBuf};

pub use schemars::{self, JsonSchema};
pub use serde;
pub use serde_json::{self, Value};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "tool-component",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__export_airlock_tool",
        default_bindings_module: "airlock_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

/// The native programs the operator granted to the bundled `bash` tool
/// (`airlock:tool/programs`, feature `programs`). Only `bash` is granted
/// any: for every other tool `granted` is empty and `run` refuses. A
/// component that does not call them does not import them.
#[cfg(feature = "programs")]
pub mod programs {
    mod bindings {
        wit_bindgen::generate!({
            world: "programs-client",
            path: "../wit",
        });
    }
    pub use bindings::airlock::tool::programs::{RunOutput, RunRequest, granted, run};
}

use bindings::airlock::tool::host as wit_host;
use bindings::airlock::tool::types as wit;

pub use wit::{
    CallContext, ContentBlock, ContextChange, EnvVar, FileStamp, Image, IoError, Message, Mount,
    PermissionDecision as Permission, PreflightExports as Preflight, ResourceLink, Role,
    SafetyFlags as Flags, StateEntry, ToolError, ToolOutput,
};
pub use wit::{InterruptBehavior as Interrupt, WorkspaceAccess as Access};
pub use wit_host::LogLevel;

mod describe;
mod errors;
pub mod fs;
mod output;

pub use describe::Describe;
pub use errors::io_error;
pub use output::Output;

/// A tool: what an author implements.
///
/// Only [`Tool::describe`] and [`Tool::call`] are required. The other
/// methods refine the host's decisions for one input; they run before the
/// call is allowed, so the host gives them no filesystem, network or
/// environment. Declare the ones you implement in [`Tool::PREFLIGHT`].
pub trait Tool {
    /// The input, deserialised from the model's JSON. Its JSON Schema is the
    /// tool's input schema (the root must be an object, so use a struct).
    type Input: serde::de::DeserializeOwned + JsonSchema;

    /// Which of [`Tool::classify`], [`Tool::validate`] and
    /// [`Tool::check_permissions`] this tool implements: the host calls only
    /// these before a call, and a tool that declares none saves a sandbox
    /// instantiation on every call (about half of Airlock's per-call cost).
    /// Declare exactly what you override, for example
    /// `const PREFLIGHT: Preflight = Preflight::VALIDATE;`, or
    /// `Preflight::empty()`. The default, every method, is always correct.
    ///
    /// An undeclared `validate` or `check_permissions` still runs at the
    /// start of `call`, so a declaration that leaves one out loses the early
    /// answer (before the user is asked), never the check; an undeclared
    /// `classify` is not called, and the descriptor's flags stand.
    const PREFLIGHT: Preflight = Preflight::all();

    /// Describes the tool: name, prompt, flags, capabilities.
    fn describe() -> Describe;

    /// The safety flags for one input, when they differ from the
    /// descriptor's (Claude Code's `isReadOnly(input)`): `None` keeps them.
    fn classify(_input: &Self::Input) -> Option<Flags> {
        None
    }

    /// Checks the input beyond its schema; the error is shown to the model.
    fn validate(_input: &Self::Input, _cx: &Context) -> Result<(), String> {
        Ok(())
    }

    /// The tool's own permission check.
    fn check_permissions(_input: &Self::Input, _cx: &Context) -> Permission {
        Permission::Passthrough
    }

    /// Runs the tool.
    fn call(input: Self::Input, cx: &Context) -> Result<Output, ToolError>;
}

/// What a call knows about the agent, and the host services it can use.
#[derive(Debug, Clone)]
pub struct Context {
    inner: CallContext,
}

impl Context {
    /// Wraps the context the host passed.
    pub fn new(inner: CallContext) -> Self {
        Context { inner }
    }

    /// The absolute working directory.
    pub fn cwd(&self) -> &str {
        &self.inner.cwd
    }

    /// The id of this tool use.
    pub fn tool_use_id(&self) -> &str {
        &self.inner.tool_use_id
    }

    /// The calling agent's id, when it is a sub-agent.
    pub fn agent_id(&self) -> Option<&str> {
        self.inner.agent_id.as_deref()
    }

    /// The directories this call can reach.
    pub fn mounts(&self) -> &[Mount] {
        &self.inner.mounts
    }

    /// A value this tool stored in an earlier call with [`Output::set_state`].
    pub fn state(&self, key: &str) -> Option<&str> {
        self.inner
            .state
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.as_str())
    }

    /// Reports progress: a message and, when known, the fraction done.
    pub fn progress(&self, message: &str, fraction: Option<f32>) {
        wit_host::progress(message, fraction);
    }

    /// Writes a line to the host's log.
    pub fn log(&self, level: LogLevel, message: &str) {
        wit_host::log(level, message);
    }

    /// Whether the user asked this call to stop.
    pub fn cancelled(&self) -> bool {
        wit_host::cancelled()
    }

    /// When the agent last read `path` (resolved like [`Context::resolve`]).
    pub fn file_read_state(&self, path: &Path) -> Option<FileStamp> {
        wit_host::file_read_state(&path.to_string_lossy())
    }

    /// Whether `path` is as the agent last read it (`None`: never read):
    /// the host compares the file's modification time, size and content
    /// hash with its record, looking at the file itself. Ask this before
    /// changing a file the model must have seen.
    pub fn file_unchanged_since_read(&self, path: &Path) -> Option<bool> {
        wit_host::file_unchanged_since_read(&path.to_string_lossy())
    }

    /// Resolves a path from the input: relative paths against the cwd, `.`
    /// and `..` lexically. Fails, with a message naming the reachable
    /// directories, when the result is outside every mount.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.is_empty() {
            return Err(ToolError::InvalidInput("the path is empty".into()));
        }
        if path.contains('\0') {
            return Err(ToolError::InvalidInput(
                "the path contains a NUL character".into(),
            ));
        }
        let joined = if path.starts_with('/') {
            PathBuf::from(path)
        } else {
            Path::new(self.cwd()).join(path)
        };
        let resolved = normalize(&joined);
        if self.mount_of(&resolved).is_some() {
            Ok(resolved)
        } else {
            Err(ToolError::PermissionDenied(format!(
                "{path} is outside the directories this tool can reach ({})",
                self.describe_mounts()
            )))
        }
    }

    /// Like [`Context::resolve`], and also requires the path's mount to be
    /// writable in this call.
    pub fn resolve_writable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let resolved = self.resolve(path)?;
        match self.mount_of(&resolved) {
            Some(m) if m.writable => Ok(resolved),
            _ => Err(ToolError::PermissionDenied(format!(
                "{path} is read-only in this call ({})",
                self.describe_mounts()
            ))),
        }
    }

    fn mount_of(&self, path: &Path) -> Option<&Mount> {
        self.inner
            .mounts
            .iter()
            .filter(|m| path.starts_with(&m.path))
            .max_by_key(|m| m.path.len())
    }

    fn describe_mounts(&self) -> String {
        if self.inner.mounts.is_empty() {
            return "none: this tool was granted no directories".into();
        }
        self.inner
            .mounts
            .iter()
            .map(|m| {
                format!(
                    "{} ({})",
                    m.path,
                    if m.writable {
                        "writable in this call"
                    } else {
                        "read-only in this call"
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Normalises `.` and `..` lexically; `..` at the root stays at the root.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Writes a line to the host's log, outside a call's [`Context`].
pub fn log(level: LogLevel, message: &str) {
    wit_host::log(level, message);
}

#[doc(hidden)]
pub mod __private {
    //! The glue `export_tool!` expands to. Not a public API.
    use super::*;

    fn parse<T: Tool>(input: &str) -> Result<T::Input, String> {
        serde_json::from_str(input).map_err(|e| format!("the input does not match the schema: {e}"))
    }

    pub fn describe<T: Tool>(crate_version: &str) -> wit::Descriptor {
        T::describe().into_descriptor::<T::Input>(crate_version, T::PREFLIGHT)
    }

    pub fn classify<T: Tool>(input: String) -> Option<Flags> {
        parse::<T>(&input).ok().and_then(|i| T::classify(&i))
    }

    pub fn validate<T: Tool>(input: String, cx: CallContext) -> Result<(), String> {
        let input = parse::<T>(&input)?;
        T::validate(&input, &Context::new(cx))
    }

    pub fn check_permissions<T: Tool>(input: String, cx: CallContext) -> Permission {
        match parse::<T>(&input) {
            Ok(input) => T::check_permissions(&input, &Context::new(cx)),
            Err(e) => Permission::Deny(e),
        }
    }

    pub fn call<T: Tool>(input: String, cx: CallContext) -> Result<ToolOutput, ToolError> {
        let input = parse::<T>(&input).map_err(ToolError::InvalidInput)?;
        // Relative paths in `std::fs` calls then mean what they mean to the
        // model. A cwd outside every mount cannot be entered; `resolve`
        // reports such paths properly.
        let _ = std::env::set_current_dir(&cx.cwd);
        let cx = Context::new(cx);
        undeclared_checks::<T>(&input, &cx)?;
        T::call(input, &cx).map(Output::into_inner)
    }

    /// Runs the checks the host skipped because [`Tool::PREFLIGHT`] leaves
    /// them out (nothing, for a tool that declares what it implements).
    fn undeclared_checks<T: Tool>(input: &T::Input, cx: &Context) -> Result<(), ToolError> {
        if !T::PREFLIGHT.contains(Preflight::VALIDATE) {
            T::validate(input, cx).map_err(ToolError::InvalidInput)?;
        }
        if !T::PREFLIGHT.contains(Preflight::CHECK_PERMISSIONS) {
            let undeclared = "; the tool implements check_permissions without declaring it in \
                              Tool::PREFLIGHT, so the host could not act on its answer";
            match T::check_permissions(input, cx) {
                Permission::Passthrough | Permission::Allow(None) => {}
                Permission::Allow(Some(_)) => {
                    return Err(ToolError::Failed(format!(
                        "the tool rewrote its input{undeclared}"
                    )));
                }
                Permission::Ask(why) | Permission::Deny(why) => {
                    return Err(ToolError::PermissionDenied(format!("{why}{undeclared}")));
                }
            }
        }
        Ok(())
    }
}

/// Exports a [`Tool`] as the component's `airlock:tool/tool` interface.
///
/// Use it once per crate, on the tool's type.
#[macro_export]
macro_rules! export_tool {
    ($tool:ty) => {
        const _: () = {
            #[doc(hidden)]
            pub struct __AirlockExport;

            impl $crate::bindings::exports::airlock::tool::tool::Guest for __AirlockExport {
                fn describe() -> $crate::bindings::airlock::tool::types::Descriptor {
                    $crate::__private::describe::<$tool>(env!("CARGO_PKG_VERSION"))
                }
                fn classify(input: String) -> Option<$crate::Flags> {
                    $crate::__private::classify::<$tool>(input)
                }
                fn validate(input: String, context: $crate::CallContext) -> Result<(), String> {
                    $crate::__private::validate::<$tool>(input, context)
                }
                fn check_permissions(
                    input: String,
                    context: $crate::CallContext,
                ) -> $crate::Permission {
                    $crate::__private::check_permissions::<$tool>(input, context)
                }
                fn call(
                    input: String,
                    context: $crate::CallContext,
                ) -> Result<$crate::ToolOutput, $crate::ToolError> {
                    $crate::__private::call::<$tool>(input, context)
                }
            }

            $crate::bindings::__export_airlock_tool!(__AirlockExport with_types_in $crate::bindings);
        };
    };
}

/// The walk-through in `README.md`, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool that checks its input and permissions but declares neither.
    struct Forgetful;

    #[derive(serde::Deserialize, JsonSchema)]
    struct ForgetfulInput {
        n: i64,
    }

    impl Tool for Forgetful {
        type Input = ForgetfulInput;
        const PREFLIGHT: Preflight = Preflight::empty();

        fn describe() -> Describe {
            Describe::new("forgetful", "Checks what it did not declare.")
        }

        fn validate(input: &ForgetfulInput, _cx: &Context) -> Result<(), String> {
            if input.n < 0 {
                return Err("n must not be negative".into());
            }
            Ok(())
        }

        fn check_permissions(input: &ForgetfulInput, _cx: &Context) -> Permission {
            match input.n {
                13 => Permission::Deny("13 is unlucky".into()),
                7 => Permission::Ask("7 needs a human".into()),
                _ => Permission::Passthrough,
            }
        }

        fn call(input: ForgetfulInput, _cx: &Context) -> Result<Output, ToolError> {
            Ok(Output::text(input.n.to_string()))
        }
    }

    #[test]
    fn undeclared_checks_still_run_before_the_call() {
        let cwd = std::env::current_dir().unwrap();
        let call = |n: i64| {
            let context = CallContext {
                cwd: cwd.to_string_lossy().into_owned(),
                tool_use_id: "t1".into(),
                agent_id: None,
                mounts: Vec::new(),
                state: Vec::new(),
            };
            __private::call::<Forgetful>(format!(r#"{{"n": {n}}}"#), context)
        };
        assert!(call(1).is_ok());
        assert!(matches!(call(-1), Err(ToolError::InvalidInput(m)) if m.contains("negative")));
        assert!(matches!(call(13), Err(ToolError::PermissionDenied(m)) if m.contains("unlucky")));
        assert!(
            matches!(call(7), Err(ToolError::PermissionDenied(m)) if m.contains("without declaring"))
        );
        assert_eq!(
            __private::describe::<Forgetful>("0.1.0").preflight,
            Preflight::empty()
        );
    }

    fn cx(cwd: &str, mounts: &[(&str, bool)]) -> Context {
        Context::new(CallContext {
            cwd: cwd.into(),
            tool_use_id: "t1".into(),
            agent_id: None,
            mounts: mounts
                .iter()
                .map(|(p, w)| Mount {
                    path: (*p).into(),
                    writable: *w,
                })
                .collect(),
            state: vec![StateEntry {
                key: "k".into(),
                value: "v".into(),
            }],
        })
    }

    #[test]
    fn resolves_relative_paths_against_the_cwd() {
        let cx = cx("/ws/src", &[("/ws", true)]);
        assert_eq!(
            cx.resolve("main.rs").unwrap(),
            PathBuf::from("/ws/src/main.rs")
        );
        assert_eq!(cx.resolve("../a/./b").unwrap(), PathBuf::from("/ws/a/b"));
        assert_eq!(cx.resolve("/ws").unwrap(), PathBuf::from("/ws"));
    }

    #[test]
    fn refuses_paths_outside_every_mount() {
        let cx = cx("/ws", &[("/ws", false)]);
        let err = cx.resolve("../../etc/passwd").unwrap_err();
        match err {
            ToolError::PermissionDenied(m) => {
                assert!(m.contains("outside"), "{m}");
                assert!(m.contains("/ws (read-only in this call)"), "{m}");
            }
            other => panic!("unexpected {other:?}"),
        }
        // A sibling whose name merely starts with the mount's is outside.
        assert!(cx.resolve("/wsx/file").is_err());
        assert!(matches!(cx.resolve(""), Err(ToolError::InvalidInput(_))));
        assert!(matches!(
            cx.resolve("a\0b"),
            Err(ToolError::InvalidInput(_))
        ));
    }

    #[test]
    fn resolve_writable_needs_a_writable_mount() {
        let cx = cx("/ws", &[("/ws", false), ("/ws/out", true)]);
        let Err(ToolError::PermissionDenied(m)) = cx.resolve_writable("a.txt") else {
            panic!("a.txt is under a read-only mount");
        };
        // Says what holds in this call, not what the grant is: a read-only
        // call of a read-write workspace sees it read-only too.
        assert!(
            m.contains("/ws (read-only in this call), /ws/out (writable in this call)"),
            "{m}"
        );
        assert_eq!(
            cx.resolve_writable("out/a.txt").unwrap(),
            PathBuf::from("/ws/out/a.txt")
        );
    }

    #[test]
    fn reads_its_own_state() {
        let cx = cx("/", &[]);
        assert_eq!(cx.state("k"), Some("v"));
        assert_eq!(cx.state("missing"), None);
        assert!(cx.resolve("/x").is_err());
    }
}
