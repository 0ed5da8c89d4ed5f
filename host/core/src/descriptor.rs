//! What a tool is: its [`Descriptor`] (name, prompt, schemas, safety flags,
//! requested capabilities), the checks every descriptor must pass before a
//! tool is registered, and [`SafetyFlags::effective`], the rule that turns a
//! tool's claims about one input into flags the host can enforce.
//!
//! This module owns no I/O and trusts nothing: a descriptor from a guest is
//! sanitised by the engine before it gets here, and checked here before the
//! registry accepts it.

use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

/// The largest `max_result_size` a tool may ask for, in characters (the
/// ceiling Claude Code applies to `anthropic/maxResultSizeChars`).
pub const MAX_RESULT_SIZE_CEILING: u32 = 500_000;

/// Safety flags of a tool or of one call (see the WIT `safety-flags`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SafetyFlags(u16);

impl SafetyFlags {
    /// Does not modify its environment.
    pub const READ_ONLY: Self = Self(1 << 0);
    /// May run alongside other concurrency-safe calls.
    pub const CONCURRENCY_SAFE: Self = Self(1 << 1);
    /// May make changes that cannot be undone.
    pub const DESTRUCTIVE: Self = Self(1 << 2);
    /// Repeating it has no further effect.
    pub const IDEMPOTENT: Self = Self(1 << 3);
    /// Reaches an open world (the network).
    pub const OPEN_WORLD: Self = Self(1 << 4);
    /// A search or a read.
    pub const SEARCH_OR_READ: Self = Self(1 << 5);
    /// Needs a human every time.
    pub const REQUIRES_USER_INTERACTION: Self = Self(1 << 6);
    /// Its failure cancels its siblings.
    pub const CANCELS_SIBLINGS_ON_ERROR: Self = Self(1 << 7);

    /// Every flag with its WIT name, in declaration order.
    pub const NAMED: [(SafetyFlags, &'static str); 8] = [
        (Self::READ_ONLY, "read-only"),
        (Self::CONCURRENCY_SAFE, "concurrency-safe"),
        (Self::DESTRUCTIVE, "destructive"),
        (Self::IDEMPOTENT, "idempotent"),
        (Self::OPEN_WORLD, "open-world"),
        (Self::SEARCH_OR_READ, "search-or-read"),
        (Self::REQUIRES_USER_INTERACTION, "requires-user-interaction"),
        (Self::CANCELS_SIBLINGS_ON_ERROR, "cancels-siblings-on-error"),
    ];

    /// No flags.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets or clears `flag`.
    pub fn set(&mut self, flag: Self, on: bool) {
        if on {
            self.0 |= flag.0;
        } else {
            self.0 &= !flag.0;
        }
    }

    /// The raw bits (for conversions).
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Flags from raw bits; unknown bits are dropped.
    pub const fn from_bits_truncate(bits: u16) -> Self {
        Self(bits & 0xff)
    }

    /// The names of the set flags, in declaration order.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMED
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }

    /// The flags the host acts on for one call: the descriptor's flags
    /// (`declared`) refined by the tool's classification of the input, kept
    /// only where the refinement is enforced or errs on the side of caution.
    ///
    /// | flag | rule |
    /// |---|---|
    /// | read-only | declared **or** classified: enforced with read-only handles and safe HTTP methods |
    /// | concurrency-safe | classified: enforced with read-only handles |
    /// | destructive | declared **or** classified, and never when read-only (it cannot change anything) |
    /// | idempotent | declared **and** classified |
    /// | open-world, requires-user-interaction, cancels-siblings-on-error | declared **or** classified |
    /// | search-or-read | classified (display only) |
    ///
    /// ```
    /// use airlock_core::descriptor::SafetyFlags as F;
    /// // A tool that may write claims one input is read-only: allowed, and enforced.
    /// let f = F::effective(F::DESTRUCTIVE, Some(F::READ_ONLY));
    /// assert!(f.contains(F::READ_ONLY) && !f.contains(F::DESTRUCTIVE));
    /// // A read-only tool cannot un-claim it.
    /// assert!(F::effective(F::READ_ONLY, Some(F::empty())).contains(F::READ_ONLY));
    /// ```
    pub fn effective(declared: SafetyFlags, classified: Option<SafetyFlags>) -> SafetyFlags {
        let c = classified.unwrap_or(declared);
        let either = |f| declared.contains(f) || c.contains(f);
        let mut out = SafetyFlags::empty();
        let read_only = either(Self::READ_ONLY);
        out.set(Self::READ_ONLY, read_only);
        out.set(Self::CONCURRENCY_SAFE, c.contains(Self::CONCURRENCY_SAFE));
        out.set(Self::DESTRUCTIVE, either(Self::DESTRUCTIVE) && !read_only);
        out.set(
            Self::IDEMPOTENT,
            declared.contains(Self::IDEMPOTENT) && c.contains(Self::IDEMPOTENT),
        );
        out.set(Self::OPEN_WORLD, either(Self::OPEN_WORLD));
        out.set(
            Self::REQUIRES_USER_INTERACTION,
            either(Self::REQUIRES_USER_INTERACTION),
        );
        out.set(
            Self::CANCELS_SIBLINGS_ON_ERROR,
            either(Self::CANCELS_SIBLINGS_ON_ERROR),
        );
        out.set(Self::SEARCH_OR_READ, c.contains(Self::SEARCH_OR_READ));
        out
    }

    /// Whether a call with these flags may get writable filesystem handles:
    /// only when it is neither read-only nor concurrency-safe.
    pub fn may_write(self) -> bool {
        !self.contains(Self::READ_ONLY) && !self.contains(Self::CONCURRENCY_SAFE)
    }
}

impl BitOr for SafetyFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl BitOrAssign for SafetyFlags {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for SafetyFlags {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        Self(self.0 & rhs.0)
    }
}

impl fmt::Debug for SafetyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

impl fmt::Display for SafetyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("-")
        } else {
            f.write_str(&names.join(", "))
        }
    }
}

impl Serialize for SafetyFlags {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names())
    }
}

impl<'de> serde::Deserialize<'de> for SafetyFlags {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        let mut flags = SafetyFlags::empty();
        for name in names {
            let (flag, _) = Self::NAMED
                .iter()
                .find(|(_, n)| *n == name)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown safety flag {name:?}")))?;
            flags |= *flag;
        }
        Ok(flags)
    }
}

/// What a user interrupt does to a running call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InterruptBehavior {
    /// Stop at once.
    Cancel,
    /// Let it finish.
    Block,
}

/// Which of a component's optional exports the host calls before a call
/// (the WIT `preflight-exports`). One left out takes the answer a tool
/// without it gives: the descriptor's flags, valid, pass-through. Native
/// tools are always asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Preflight {
    /// `classify` refines the flags per input.
    pub classify: bool,
    /// `validate` checks inputs beyond their schema.
    pub validate: bool,
    /// `check-permissions` has an opinion on some inputs.
    pub check_permissions: bool,
}

impl Preflight {
    /// Every export: what a tool that says nothing gets.
    pub const ALL: Preflight = Preflight {
        classify: true,
        validate: true,
        check_permissions: true,
    };
}

impl Default for Preflight {
    fn default() -> Self {
        Preflight::ALL
    }
}

/// Access to the workspace, ordered from least to most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceAccess {
    /// None.
    None,
    /// Read.
    Read,
    /// Read and write.
    ReadWrite,
}

impl fmt::Display for WorkspaceAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkspaceAccess::None => "none",
            WorkspaceAccess::Read => "read",
            WorkspaceAccess::ReadWrite => "read-write",
        })
    }
}

/// What a tool asks the host to grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Capabilities {
    /// Access to the workspace.
    pub workspace: WorkspaceAccess,
    /// Host patterns it wants to reach over HTTP.
    pub network_hosts: Vec<String>,
    /// Environment variable names it wants to read.
    pub env_vars: Vec<String>,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            workspace: WorkspaceAccess::None,
            network_hosts: Vec::new(),
            env_vars: Vec::new(),
        }
    }
}

/// Everything the host needs to list, schedule and check a tool.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Descriptor {
    /// Unique name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// Other names it answers to.
    pub aliases: Vec<String>,
    /// Display name.
    pub title: String,
    /// Short description.
    pub description: String,
    /// Full prompt for the model.
    pub prompt: String,
    /// JSON Schema of the input (object root).
    pub input_schema: Value,
    /// JSON Schema of the structured output.
    pub output_schema: Option<Value>,
    /// Safety flags for every input.
    pub flags: SafetyFlags,
    /// Interrupt behaviour.
    pub interrupt: InterruptBehavior,
    /// Which optional exports the host calls (components only).
    #[serde(default)]
    pub preflight: Preflight,
    /// Listed by name only until tool search returns it.
    pub defer_loading: bool,
    /// Results longer than this (characters) are spilled to a file.
    pub max_result_size: u32,
    /// Requested capabilities.
    pub capabilities: Capabilities,
    /// Version.
    pub version: String,
}

impl Descriptor {
    /// A descriptor with safe defaults, for native tools: an input schema
    /// taking any object, no flags, cancel on interrupt, the default maximum
    /// result size, no capabilities. Set the fields that differ.
    ///
    /// ```
    /// use airlock_core::descriptor::{Descriptor, SafetyFlags};
    /// let mut d = Descriptor::new("tool_search", "Finds tools by name or description.");
    /// d.flags = SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE;
    /// assert!(d.problems().is_empty());
    /// ```
    pub fn new(name: &str, description: &str) -> Descriptor {
        Descriptor {
            name: name.into(),
            aliases: Vec::new(),
            title: name.into(),
            description: description.into(),
            prompt: description.into(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            flags: SafetyFlags::empty(),
            interrupt: InterruptBehavior::Cancel,
            preflight: Preflight::ALL,
            defer_loading: false,
            max_result_size: DEFAULT_MAX_RESULT_SIZE,
            capabilities: Capabilities::default(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The size above which results are spilled, unless a tool says otherwise.
pub const DEFAULT_MAX_RESULT_SIZE: u32 = 50_000;

/// Whether `name` is portable across MCP, Anthropic and OpenAI.
pub fn is_portable_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `name` is a valid environment variable name.
pub fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 128
}

/// Whether `pattern` is a host pattern: `*`, `name`, or `*.name`, where name
/// is a DNS name or an IP address, optionally with `:port`.
pub fn is_host_pattern(pattern: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let rest = pattern.strip_prefix("*.").unwrap_or(pattern);
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (rest, None),
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    port_ok && host_ok
}

impl Descriptor {
    /// Every problem that keeps this descriptor from being registered; empty
    /// when it is sound. Each problem is one sentence naming the field.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !is_portable_name(&self.name) {
            problems.push(format!(
                "the name {:?} is not portable: use 1 to 64 of [a-zA-Z0-9_-]",
                self.name
            ));
        }
        for alias in &self.aliases {
            if !is_portable_name(alias) {
                problems.push(format!(
                    "the alias {alias:?} is not portable: use 1 to 64 of [a-zA-Z0-9_-]"
                ));
            } else if alias == &self.name {
                problems.push(format!("the alias {alias:?} repeats the name"));
            }
        }
        let mut aliases = self.aliases.clone();
        aliases.sort();
        if aliases.windows(2).any(|w| w[0] == w[1]) {
            problems.push("the aliases repeat a name".into());
        }
        if self.description.trim().is_empty() {
            problems.push("the description is empty".into());
        }
        problems.extend(schema_root_problems("input schema", &self.input_schema));
        if let Some(schema) = &self.output_schema
            && !schema.is_object()
        {
            problems.push("the output schema is not a JSON object".into());
        }
        if self.max_result_size == 0 || self.max_result_size > MAX_RESULT_SIZE_CEILING {
            problems.push(format!(
                "max-result-size is {}; it must be between 1 and {MAX_RESULT_SIZE_CEILING}",
                self.max_result_size
            ));
        }
        if self.version.trim().is_empty() || self.version.len() > 64 {
            problems.push("the version must be 1 to 64 characters".into());
        }
        for host in &self.capabilities.network_hosts {
            if !is_host_pattern(host) {
                problems.push(format!(
                    "the network host {host:?} is not a host pattern (`name`, `*.name`, `*`)"
                ));
            }
        }
        for name in &self.capabilities.env_vars {
            if !is_env_name(name) {
                problems.push(format!(
                    "the environment variable {name:?} is not a valid name"
                ));
            }
        }
        problems
    }

    /// Whether the tool asks for any network access.
    pub fn wants_network(&self) -> bool {
        !self.capabilities.network_hosts.is_empty()
    }
}

/// Problems with an input schema's root: it must be an object schema
/// without root-level combinators (the Claude API rejects them).
pub fn schema_root_problems(what: &str, schema: &Value) -> Vec<String> {
    let Some(obj) = schema.as_object() else {
        return vec![format!("the {what} is not a JSON object")];
    };
    let mut problems = Vec::new();
    if obj.get("type") != Some(&Value::String("object".into())) {
        problems.push(format!("the {what} root must have \"type\": \"object\""));
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if obj.contains_key(key) {
            problems.push(format!(
                "the {what} root uses {key}, which the Claude API rejects; put it inside a property"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn descriptor() -> Descriptor {
        let mut d = Descriptor::new("read", "Reads a file.");
        d.aliases = vec!["Read".into()];
        d.flags = SafetyFlags::READ_ONLY;
        d
    }

    #[test]
    fn a_sound_descriptor_has_no_problems() {
        assert!(descriptor().problems().is_empty());
    }

    #[test]
    fn names_must_be_portable() {
        for bad in ["", "has space", "dotted.name", &"x".repeat(65), "émoji"] {
            let mut d = descriptor();
            d.name = bad.into();
            assert!(!d.problems().is_empty(), "{bad:?} accepted");
        }
        let mut d = descriptor();
        d.name = "mcp__srv__tool-1".into();
        assert!(d.problems().is_empty());
    }

    #[test]
    fn schema_roots_must_be_plain_objects() {
        let mut d = descriptor();
        d.input_schema = json!({"type": "string"});
        assert!(d.problems()[0].contains("\"type\": \"object\""));
        d.input_schema = json!({"type": "object", "anyOf": []});
        assert!(d.problems()[0].contains("anyOf"));
        d.input_schema = json!([1]);
        assert!(d.problems()[0].contains("not a JSON object"));
    }

    #[test]
    fn other_fields_are_checked() {
        let mut d = descriptor();
        d.max_result_size = 0;
        d.aliases = vec!["read".into(), "a b".into()];
        d.capabilities.network_hosts = vec!["exa mple.com".into(), "*.ok.com:443".into()];
        d.capabilities.env_vars = vec!["1BAD".into(), "GOOD_1".into()];
        let p = d.problems().join("\n");
        for needle in [
            "max-result-size",
            "repeats the name",
            "\"a b\"",
            "exa mple",
            "1BAD",
        ] {
            assert!(p.contains(needle), "missing {needle} in {p}");
        }
        assert!(!p.contains("ok.com") && !p.contains("GOOD_1"), "{p}");
    }

    #[test]
    fn host_patterns() {
        for ok in [
            "*",
            "example.com",
            "*.example.com",
            "127.0.0.1",
            "localhost:8080",
        ] {
            assert!(is_host_pattern(ok), "{ok}");
        }
        for bad in ["", "*.", "a..b", "http://x", "x:0", "x:99999", "a/b"] {
            assert!(!is_host_pattern(bad), "{bad}");
        }
    }

    #[test]
    fn effective_flags_keep_only_enforceable_refinements() {
        type F = SafetyFlags;
        // Classification cannot drop read-only.
        let f = F::effective(F::READ_ONLY | F::CONCURRENCY_SAFE, Some(F::DESTRUCTIVE));
        assert!(f.contains(F::READ_ONLY));
        assert!(
            !f.contains(F::DESTRUCTIVE),
            "a read-only call cannot destroy"
        );
        assert!(
            !f.contains(F::CONCURRENCY_SAFE),
            "classification narrows concurrency"
        );
        assert!(!f.may_write());
        // Destructive stays unless the call is read-only.
        let f = F::effective(F::DESTRUCTIVE, Some(F::empty()));
        assert!(f.contains(F::DESTRUCTIVE) && f.may_write());
        // Cautious flags are sticky either way.
        let f = F::effective(F::REQUIRES_USER_INTERACTION, Some(F::OPEN_WORLD));
        assert!(f.contains(F::REQUIRES_USER_INTERACTION | F::OPEN_WORLD));
        // Idempotence needs both.
        assert!(!F::effective(F::empty(), Some(F::IDEMPOTENT)).contains(F::IDEMPOTENT));
        assert!(F::effective(F::IDEMPOTENT, None).contains(F::IDEMPOTENT));
        // Concurrency-safe calls never write.
        assert!(!F::effective(F::empty(), Some(F::CONCURRENCY_SAFE)).may_write());
    }

    #[test]
    fn flags_print_their_names() {
        let f = SafetyFlags::READ_ONLY | SafetyFlags::OPEN_WORLD;
        assert_eq!(f.to_string(), "read-only, open-world");
        assert_eq!(SafetyFlags::empty().to_string(), "-");
        assert_eq!(
            serde_json::to_value(f).unwrap(),
            json!(["read-only", "open-world"])
        );
    }
}
