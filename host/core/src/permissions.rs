//! Claude Code's permission vocabulary: the modes, the `permissions`
//! section's shape, and the rule language with the facts a rule is
//! matched against. Plain values: deciding a call is the host's.
//!
//! Rules use Claude Code's syntax: `Tool`, `Tool(*)`, `Tool(specifier)`,
//! where the specifier is a gitignore-style path for tools that take a
//! path (`Read(./.env)`, `Edit(/src/**/*.ts)`, `Read(//etc/**)`,
//! `Read(~/secrets/**)`), `domain:HOST` for tools that take a URL
//! (`fetch(domain:*.example.com)`), `param:value` for one input field
//! (`Bash(run_in_background:true)`), or a `*` pattern over a `command`
//! field (`Bash(npm run test *)`). The rule name `Read` covers every call
//! that reads a path, and in a deny rule every call that touches one;
//! `Edit` covers every call that writes a path. Tool names match a tool's
//! name or aliases, and may end in `*` (`mcp__server__*`); `mcp__server`
//! alone means every tool of that server.

use crate::descriptor::{Descriptor, SafetyFlags, WorkspaceAccess};
use crate::guest_path::normalize_guest;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// How much the agent may do without asking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PermissionMode {
    /// Read-only calls go ahead; everything else asks.
    #[default]
    #[serde(rename = "default", alias = "manual")]
    Default,
    /// Also edits of granted directories go ahead.
    #[serde(rename = "acceptEdits")]
    AcceptEdits,
    /// Only read-only calls; everything else is refused.
    #[serde(rename = "plan")]
    Plan,
    /// Everything not denied goes ahead (calls that require user
    /// interaction still ask).
    #[serde(rename = "bypassPermissions")]
    BypassPermissions,
    /// Anything that would ask is refused.
    #[serde(rename = "dontAsk")]
    DontAsk,
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::Plan => "plan",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::DontAsk => "dontAsk",
        })
    }
}

impl std::str::FromStr for PermissionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        serde_json::from_value(Value::String(s.to_string())).map_err(|_| {
            format!("{s:?} is not a permission mode (default, acceptEdits, plan, bypassPermissions, dontAsk)")
        })
    }
}

/// The `permissions` section of the configuration (Claude Code's shape).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// Rules that let calls go ahead.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Rules that make calls ask.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Rules that refuse calls.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The mode a context starts in.
    #[serde(default, alias = "defaultMode")]
    pub default_mode: PermissionMode,
}

/// One parsed rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    text: String,
    tool: ToolPattern,
    spec: Specifier,
    /// The code this rule was given for (an "always allow" answer): it
    /// matches only a tool with this digest, so new code under the same
    /// name is asked about again.
    digest: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
enum ToolPattern {
    /// A name (or alias), exactly.
    Name(String),
    /// A name prefix (`mcp__server__*`, or `mcp__server`).
    Prefix(String),
    /// `Read`: calls that read a path (any path call, in a deny rule).
    ReadFamily,
    /// `Edit`: calls that write a path.
    EditFamily,
}

#[derive(Clone, Debug, PartialEq)]
enum Specifier {
    Any,
    Path(String),
    Domain(String),
    Param { key: String, value: String },
    Command(String),
}

/// Which list a rule is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// `permissions.allow`.
    Allow,
    /// `permissions.ask`.
    Ask,
    /// `permissions.deny`.
    Deny,
}

impl Rule {
    /// Parses a rule; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let trimmed = text.trim();
        let (name, spec) = match trimmed.find('(') {
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(format!("the rule {text:?} has no closing parenthesis"));
                };
                (&trimmed[..open], Some(inner))
            }
            None => (trimmed, None),
        };
        if name.is_empty() {
            return Err(format!("the rule {text:?} names no tool"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'*')
        {
            return Err(format!(
                "the rule {text:?} has an invalid tool name {name:?}"
            ));
        }
        let tool = match name {
            "Read" => ToolPattern::ReadFamily,
            "Edit" => ToolPattern::EditFamily,
            n if n.ends_with('*') => ToolPattern::Prefix(n.trim_end_matches('*').to_string()),
            n if n.starts_with("mcp__") && n.matches("__").count() == 1 => {
                ToolPattern::Prefix(format!("{n}__"))
            }
            n => ToolPattern::Name(n.to_string()),
        };
        let spec = match spec.map(str::trim) {
            None | Some("") | Some("*") => Specifier::Any,
            Some(s) => parse_specifier(s),
        };
        Ok(Rule {
            text: trimmed.to_string(),
            tool,
            spec,
            digest: None,
        })
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// This rule, bound to the tool code with `digest` (see
    /// [`crate::tool::Tool::digest`]); unbound when the tool has none.
    pub fn bound_to(mut self, digest: Option<&str>) -> Rule {
        self.digest = digest.map(str::to_string);
        self
    }

    /// Whether this rule names the whole of this tool: no specifier, and
    /// the tool's name or an alias (or a prefix of the name), not a family.
    pub fn names_whole_tool(&self, descriptor: &Descriptor) -> bool {
        self.spec == Specifier::Any
            && match &self.tool {
                ToolPattern::Name(n) => descriptor.name == *n || descriptor.aliases.contains(n),
                ToolPattern::Prefix(p) => descriptor.name.starts_with(p.as_str()),
                ToolPattern::ReadFamily | ToolPattern::EditFamily => false,
            }
    }

    /// Whether this rule, in the `kind` list, matches the call.
    pub fn matches(&self, kind: RuleKind, call: &CallFacts<'_>) -> bool {
        if let Some(digest) = &self.digest
            && call.digest != Some(digest.as_str())
        {
            return false;
        }
        let tool_ok = match &self.tool {
            ToolPattern::Name(n) => call.names().any(|name| name == n),
            ToolPattern::Prefix(p) => call.names().any(|name| name.starts_with(p.as_str())),
            ToolPattern::ReadFamily => {
                call.path.is_some()
                    && (kind == RuleKind::Deny || call.flags.contains(SafetyFlags::READ_ONLY))
            }
            ToolPattern::EditFamily => {
                call.path.is_some() && !call.flags.contains(SafetyFlags::READ_ONLY)
            }
        };
        tool_ok && self.spec_matches(call)
    }

    fn spec_matches(&self, call: &CallFacts<'_>) -> bool {
        match &self.spec {
            Specifier::Any => true,
            Specifier::Path(pattern) => call
                .path
                .as_deref()
                .is_some_and(|p| path_matches(pattern, p, call.cwd, call.project_root)),
            Specifier::Domain(domain) => call.host().is_some_and(|h| domain_matches(domain, &h)),
            Specifier::Param { key, value } => call
                .input
                .get(key)
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .is_some_and(|v| wildcard(value, &v)),
            Specifier::Command(pattern) => call
                .input
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(|c| wildcard(pattern, c)),
        }
    }
}

fn parse_specifier(s: &str) -> Specifier {
    if let Some(domain) = s.strip_prefix("domain:") {
        return Specifier::Domain(domain.trim().to_ascii_lowercase());
    }
    if let Some((key, value)) = s.split_once(':') {
        let is_key = !key.is_empty()
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !key.as_bytes()[0].is_ascii_digit();
        if is_key && value != "*" {
            return Specifier::Param {
                key: key.to_string(),
                value: value.to_string(),
            };
        }
    }
    if looks_like_path(s) {
        return Specifier::Path(s.to_string());
    }
    // `npm run test:*` means `npm run test *`.
    let command = match s.strip_suffix(":*") {
        Some(prefix) => format!("{prefix} *"),
        None => s.to_string(),
    };
    Specifier::Command(command)
}

/// Whether a specifier reads as a path rather than a command: it starts
/// with `/`, `~/`, `./` or `../`, or has no spaces and a `/`, `*` or `.`.
fn looks_like_path(s: &str) -> bool {
    s.starts_with('/')
        || s.starts_with("~/")
        || s.starts_with("./")
        || s.starts_with("../")
        || (!s.contains(' ') && (s.contains('/') || s.contains('*') || s.contains('.')))
}

/// `*` matches any run of characters (spaces included); a trailing ` *`
/// also matches nothing, so `ls *` matches `ls` (a word boundary).
fn wildcard(pattern: &str, text: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix(" *")
        && text == prefix
    {
        return true;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

fn domain_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")) || host == suffix,
        None => host == pattern,
    }
}

/// Gitignore-style path matching with Claude Code's anchors: `//p` is
/// absolute, `~/p` is under the home directory, `/p` is under the project
/// root, `p` and `./p` are under the cwd. A pattern without an inner `/`
/// matches at any depth; a match on a directory covers what is under it.
fn path_matches(pattern: &str, path: &str, cwd: &str, project_root: Option<&str>) -> bool {
    let (base, rest) = if let Some(rest) = pattern.strip_prefix("//") {
        ("/".to_string(), rest)
    } else if let Some(rest) = pattern.strip_prefix("~/") {
        (std::env::var("HOME").unwrap_or_else(|_| "/".into()), rest)
    } else if let Some(rest) = pattern.strip_prefix('/') {
        (project_root.unwrap_or("/").to_string(), rest)
    } else {
        (
            cwd.to_string(),
            pattern.strip_prefix("./").unwrap_or(pattern),
        )
    };
    let rest = rest.trim_end_matches('/');
    let anywhere = !rest.contains('/');
    let joined = if anywhere {
        format!("{}/**/{rest}", base.trim_end_matches('/'))
    } else {
        format!("{}/{rest}", base.trim_end_matches('/'))
    };
    let Some(glob_text) = normalize_guest(&joined) else {
        return false;
    };
    let glob = match globset::GlobBuilder::new(&glob_text)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(_) => return false,
    };
    std::path::Path::new(path)
        .ancestors()
        .any(|p| glob.is_match(p))
}

/// What the rules look at in one call.
pub struct CallFacts<'a> {
    /// The tool's descriptor.
    pub descriptor: &'a Descriptor,
    /// The call's effective flags.
    pub flags: SafetyFlags,
    /// The input.
    pub input: &'a Value,
    /// The path the call touches (`file_path` or `path`, made absolute).
    pub path: Option<String>,
    /// The agent's cwd.
    pub cwd: &'a str,
    /// The workspace root, the anchor of `/p` rules.
    pub project_root: Option<&'a str>,
    /// Whether the tool runs in the sandbox.
    pub sandboxed: bool,
    /// The digest of the tool's code, if it has one.
    pub digest: Option<&'a str>,
}

impl<'a> CallFacts<'a> {
    /// The facts of a call; the path comes from `file_path` or `path`.
    pub fn new(
        descriptor: &'a Descriptor,
        flags: SafetyFlags,
        input: &'a Value,
        cwd: &'a str,
        project_root: Option<&'a str>,
        sandboxed: bool,
    ) -> Self {
        let raw = input
            .get("file_path")
            .or_else(|| input.get("path"))
            .and_then(Value::as_str);
        let path = raw.and_then(|p| {
            if p.starts_with('/') {
                normalize_guest(p)
            } else {
                normalize_guest(&format!("{cwd}/{p}"))
            }
        });
        CallFacts {
            descriptor,
            flags,
            input,
            path,
            cwd,
            project_root,
            sandboxed,
            digest: None,
        }
    }

    /// These facts, for a tool whose code has `digest`.
    pub fn with_digest(mut self, digest: Option<&'a str>) -> Self {
        self.digest = digest;
        self
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.descriptor.name.as_str())
            .chain(self.descriptor.aliases.iter().map(String::as_str))
    }

    fn host(&self) -> Option<String> {
        let url = self.input.get("url")?.as_str()?;
        let rest = url.split_once("://")?.1;
        let authority = rest.split(['/', '?', '#']).next()?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = match host.find(']') {
            Some(end) => &host[..=end],
            None => host.rsplit_once(':').map_or(host, |(h, _)| h),
        };
        Some(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase(),
        )
    }

    /// Whether the call edits files in granted directories only: it writes,
    /// its tool asks for read-write workspace access and no network, and it
    /// runs in the sandbox (what `acceptEdits` lets through).
    pub fn is_sandboxed_edit(&self) -> bool {
        self.sandboxed
            && !self.flags.contains(SafetyFlags::READ_ONLY)
            && self.descriptor.capabilities.workspace == WorkspaceAccess::ReadWrite
            && self.descriptor.capabilities.network_hosts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_rule_form() {
        assert_eq!(Rule::parse("Bash").unwrap().spec, Specifier::Any);
        assert_eq!(Rule::parse("Bash(*)").unwrap().spec, Specifier::Any);
        assert_eq!(
            Rule::parse("Read(./.env)").unwrap().spec,
            Specifier::Path("./.env".into())
        );
        assert_eq!(
            Rule::parse("Read(*.env)").unwrap().spec,
            Specifier::Path("*.env".into())
        );
        assert_eq!(
            Rule::parse("fetch(domain:x.com)").unwrap().spec,
            Specifier::Domain("x.com".into())
        );
        assert_eq!(
            Rule::parse("Bash(run_in_background:true)").unwrap().spec,
            Specifier::Param {
                key: "run_in_background".into(),
                value: "true".into()
            }
        );
        assert_eq!(
            Rule::parse("Bash(npm run test:*)").unwrap().spec,
            Specifier::Command("npm run test *".into())
        );
        assert_eq!(
            Rule::parse("mcp__srv").unwrap().tool,
            ToolPattern::Prefix("mcp__srv__".into())
        );
        assert_eq!(
            Rule::parse("mcp__srv__*").unwrap().tool,
            ToolPattern::Prefix("mcp__srv__".into())
        );
        assert!(
            Rule::parse("Bash(oops")
                .unwrap_err()
                .contains("parenthesis")
        );
        assert!(Rule::parse("(x)").unwrap_err().contains("names no tool"));
        assert!(
            Rule::parse("Ba sh")
                .unwrap_err()
                .contains("invalid tool name")
        );
    }

    #[test]
    fn path_rules_are_gitignore_style_with_anchors() {
        let cwd = "/ws/src";
        let root = Some("/ws");
        assert!(path_matches("./.env", "/ws/src/.env", cwd, root));
        assert!(
            path_matches(".env", "/ws/src/deep/.env", cwd, root),
            "no slash: any depth"
        );
        assert!(
            !path_matches(".env", "/ws/.env", cwd, root),
            "only under the cwd"
        );
        assert!(
            path_matches("/.env", "/ws/.env", cwd, root),
            "/ anchors at the project root"
        );
        assert!(path_matches("//etc/**", "/etc/passwd", cwd, root));
        assert!(path_matches("/src/**/*.ts", "/ws/src/a/b.ts", cwd, root));
        assert!(!path_matches("/src/**/*.ts", "/ws/src/a/b.js", cwd, root));
        assert!(
            path_matches("./secrets/", "/ws/src/secrets/key.pem", cwd, root),
            "a directory covers its contents"
        );
        assert!(path_matches("../README.md", "/ws/README.md", cwd, root));
        let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
        assert!(path_matches(
            "~/.ssh/**",
            &format!("{home}/.ssh/id_rsa"),
            cwd,
            root
        ));
    }

    #[test]
    fn modes_parse_from_their_names() {
        assert_eq!(
            "acceptEdits".parse::<PermissionMode>().unwrap(),
            PermissionMode::AcceptEdits
        );
        assert_eq!(
            "manual".parse::<PermissionMode>().unwrap(),
            PermissionMode::Default
        );
        assert!(
            "yolo"
                .parse::<PermissionMode>()
                .unwrap_err()
                .contains("not a permission mode")
        );
    }
}
