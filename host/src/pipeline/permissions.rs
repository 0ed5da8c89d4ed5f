//! The permission stage: may this call go ahead?
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
//!
//! The decision, in order: a hook's or a deny rule's deny wins; then a
//! call that requires user interaction, an ask rule or a hook's ask asks;
//! plan mode refuses every call that is not read-only; an allow rule or a
//! hook's allow allows; then the mode decides (`bypassPermissions` allows;
//! `plan` allows read-only calls, but asks for a tool outside the sandbox,
//! whose read-only claim nothing enforces;
//! `acceptEdits` allows reads and sandboxed edits of granted directories;
//! `default` allows sandboxed read-only calls and asks for the rest,
//! destructive ones included; `dontAsk` turns every ask into a deny); then
//! the tool's own check may deny, ask, or rewrite the input, but never
//! allow what the host would ask about. An ask goes to the
//! [`PermissionPrompter`]; every denial is recorded in the context.

use crate::descriptor::{Descriptor, SafetyFlags, WorkspaceAccess};
use crate::grants::normalize_guest;
use crate::tool::PermissionDecision;
use async_trait::async_trait;
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
    /// [`crate::Tool::digest`]); unbound when the tool has none.
    pub fn bound_to(mut self, digest: Option<&str>) -> Rule {
        self.digest = digest.map(str::to_string);
        self
    }

    fn matches(&self, kind: RuleKind, call: &CallFacts<'_>) -> bool {
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
    fn is_sandboxed_edit(&self) -> bool {
        self.sandboxed
            && !self.flags.contains(SafetyFlags::READ_ONLY)
            && self.descriptor.capabilities.workspace == WorkspaceAccess::ReadWrite
            && self.descriptor.capabilities.network_hosts.is_empty()
    }
}

/// The rules, parsed.
#[derive(Clone, Debug, Default)]
pub struct PermissionRules {
    allow: Vec<Rule>,
    ask: Vec<Rule>,
    deny: Vec<Rule>,
}

impl PermissionRules {
    /// Parses the three lists; the error names the first bad rule.
    pub fn from_config(config: &PermissionsConfig) -> Result<PermissionRules, String> {
        let parse = |list: &[String]| {
            list.iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(PermissionRules {
            allow: parse(&config.allow)?,
            ask: parse(&config.ask)?,
            deny: parse(&config.deny)?,
        })
    }

    /// Adds a rule to a list (for "always allow" answers).
    pub fn add(&mut self, kind: RuleKind, rule: Rule) {
        match kind {
            RuleKind::Allow => self.allow.push(rule),
            RuleKind::Ask => self.ask.push(rule),
            RuleKind::Deny => self.deny.push(rule),
        }
    }

    fn first(&self, kind: RuleKind, call: &CallFacts<'_>) -> Option<&Rule> {
        let list = match kind {
            RuleKind::Allow => &self.allow,
            RuleKind::Ask => &self.ask,
            RuleKind::Deny => &self.deny,
        };
        list.iter().find(|r| r.matches(kind, call))
    }

    /// Whether a bare deny rule (`Tool`, no specifier) removes this tool
    /// from view entirely.
    pub fn hides(&self, descriptor: &Descriptor) -> bool {
        self.deny.iter().any(|r| {
            r.spec == Specifier::Any
                && match &r.tool {
                    ToolPattern::Name(n) => descriptor.name == *n || descriptor.aliases.contains(n),
                    ToolPattern::Prefix(p) => descriptor.name.starts_with(p.as_str()),
                    ToolPattern::ReadFamily | ToolPattern::EditFamily => false,
                }
        })
    }
}

/// What a pre-tool hook said about permission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookVerdict {
    /// No hook had an opinion.
    None,
    /// A hook allowed the call.
    Allow,
    /// A hook asks the user.
    Ask(String),
    /// A hook refused the call.
    Deny(String),
}

/// Who decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionSource {
    /// A rule (as written).
    Rule(String),
    /// A pre-tool hook.
    Hook,
    /// The permission mode.
    Mode(String),
    /// The tool's own check.
    Tool,
    /// The user, answering a prompt.
    User,
}

impl fmt::Display for DecisionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionSource::Rule(r) => write!(f, "rule {r}"),
            DecisionSource::Hook => f.write_str("hook"),
            DecisionSource::Mode(m) => write!(f, "{m} mode"),
            DecisionSource::Tool => f.write_str("tool"),
            DecisionSource::User => f.write_str("user"),
        }
    }
}

/// The host's decision before the user is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allow(DecisionSource),
    /// Ask the user, saying why.
    Ask(DecisionSource, String),
    /// Refuse, saying why.
    Deny(DecisionSource, String),
}

/// Decides a call from the rules, the hooks' verdict and the mode, and
/// then the tool's own decision. Returns the verdict and, when the tool
/// allowed with a rewritten input, that input.
pub fn decide(
    rules: &PermissionRules,
    mode: PermissionMode,
    call: &CallFacts<'_>,
    hook: &HookVerdict,
    tool: &PermissionDecision,
) -> (Verdict, Option<Value>) {
    let host = host_verdict(rules, mode, call, hook);
    let rewritten = match tool {
        PermissionDecision::Allow(input) => input.clone(),
        _ => None,
    };
    let verdict = match (host, tool) {
        (deny @ Verdict::Deny(..), _) => deny,
        (_, PermissionDecision::Deny(reason)) => {
            Verdict::Deny(DecisionSource::Tool, reason.clone())
        }
        (Verdict::Allow(_), PermissionDecision::Ask(reason)) => {
            Verdict::Ask(DecisionSource::Tool, reason.clone())
        }
        (other, _) => other,
    };
    let verdict = match verdict {
        Verdict::Ask(source, reason) if mode == PermissionMode::DontAsk => Verdict::Deny(
            DecisionSource::Mode(mode.to_string()),
            format!("{reason}; dontAsk mode refuses anything that would ask ({source})"),
        ),
        other => other,
    };
    (verdict, rewritten)
}

fn host_verdict(
    rules: &PermissionRules,
    mode: PermissionMode,
    call: &CallFacts<'_>,
    hook: &HookVerdict,
) -> Verdict {
    let name = &call.descriptor.name;
    if let HookVerdict::Deny(reason) = hook {
        return Verdict::Deny(DecisionSource::Hook, reason.clone());
    }
    if let Some(rule) = rules.first(RuleKind::Deny, call) {
        return Verdict::Deny(
            DecisionSource::Rule(rule.text.clone()),
            format!(
                "Permission to use {name} was denied by the rule {}.",
                rule.text
            ),
        );
    }
    if call.flags.contains(SafetyFlags::REQUIRES_USER_INTERACTION) {
        return Verdict::Ask(
            DecisionSource::Mode(mode.to_string()),
            format!("{name} needs the user's confirmation for every call"),
        );
    }
    if let Some(rule) = rules.first(RuleKind::Ask, call) {
        return Verdict::Ask(
            DecisionSource::Rule(rule.text.clone()),
            format!("the rule {} asks before {name} runs", rule.text),
        );
    }
    if let HookVerdict::Ask(reason) = hook {
        return Verdict::Ask(DecisionSource::Hook, reason.clone());
    }
    let read_only = call.flags.contains(SafetyFlags::READ_ONLY);
    if mode == PermissionMode::Plan && !read_only {
        return Verdict::Deny(
            DecisionSource::Mode(mode.to_string()),
            format!(
                "Plan mode allows only read-only calls, and this call of {name} is not read-only."
            ),
        );
    }
    if let Some(rule) = rules.first(RuleKind::Allow, call) {
        return Verdict::Allow(DecisionSource::Rule(rule.text.clone()));
    }
    if *hook == HookVerdict::Allow {
        return Verdict::Allow(DecisionSource::Hook);
    }
    let by_mode = DecisionSource::Mode(mode.to_string());
    let why = || {
        if !call.sandboxed {
            format!("{name} runs outside the sandbox")
        } else if call.flags.contains(SafetyFlags::DESTRUCTIVE) {
            format!("{name} may make changes that cannot be undone")
        } else {
            format!("{name} changes the workspace or the world")
        }
    };
    match mode {
        PermissionMode::BypassPermissions => Verdict::Allow(by_mode),
        // Read-only is enforced only in the sandbox: an unsandboxed tool's
        // claim is a hint, so plan mode asks.
        PermissionMode::Plan if call.sandboxed => Verdict::Allow(by_mode),
        PermissionMode::AcceptEdits
            if (read_only && call.sandboxed) || call.is_sandboxed_edit() =>
        {
            Verdict::Allow(by_mode)
        }
        PermissionMode::Default | PermissionMode::DontAsk if read_only && call.sandboxed => {
            Verdict::Allow(by_mode)
        }
        _ => Verdict::Ask(by_mode, why()),
    }
}

/// A question for the user.
#[derive(Clone, Debug, Serialize)]
pub struct PermissionRequest {
    /// The tool's name.
    pub tool_name: String,
    /// The tool use's id.
    pub tool_use_id: String,
    /// The input the call would run with.
    pub input: Value,
    /// Why the host asks.
    pub reason: String,
    /// The call's effective flags.
    pub flags: SafetyFlags,
}

/// The user's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Yes, this once.
    Allow,
    /// Yes, and to every later call of this tool in this context.
    AllowAlways,
    /// No, optionally saying why (shown to the model).
    Deny(Option<String>),
}

/// Asks the user. The embedder implements it; the CLI prompts on a
/// terminal. It may be asked by several calls at once.
#[async_trait]
pub trait PermissionPrompter: Send + Sync {
    /// Asks about one call.
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer;
}

/// A prompter for contexts with nobody to ask: it denies, saying how to
/// allow the call instead.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyPrompter;

#[async_trait]
impl PermissionPrompter for DenyPrompter {
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer {
        PermissionAnswer::Deny(Some(format!(
            "{} needs approval ({}), and there is nobody to ask. Allow it with a rule \
             (permissions.allow = [\"{}\"]) or another permission mode.",
            request.tool_name, request.reason, request.tool_name
        )))
    }
}

/// A prompter that says yes to everything (`airlock --yes`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowPrompter;

#[async_trait]
impl PermissionPrompter for AllowPrompter {
    async fn ask(&self, _request: &PermissionRequest) -> PermissionAnswer {
        PermissionAnswer::Allow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(
        name: &str,
        aliases: &[&str],
        workspace: WorkspaceAccess,
        hosts: &[&str],
    ) -> Descriptor {
        let mut d = Descriptor::new(name, "d");
        d.aliases = aliases.iter().map(|a| a.to_string()).collect();
        d.capabilities.workspace = workspace;
        d.capabilities.network_hosts = hosts.iter().map(|h| h.to_string()).collect();
        d
    }

    fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> PermissionRules {
        let s = |l: &[&str]| l.iter().map(|r| r.to_string()).collect();
        PermissionRules::from_config(&PermissionsConfig {
            allow: s(allow),
            ask: s(ask),
            deny: s(deny),
            default_mode: PermissionMode::Default,
        })
        .unwrap()
    }

    const RO: SafetyFlags = SafetyFlags::READ_ONLY;

    fn verdict(
        rules: &PermissionRules,
        mode: PermissionMode,
        d: &Descriptor,
        flags: SafetyFlags,
        input: Value,
    ) -> Verdict {
        let call = CallFacts::new(d, flags, &input, "/ws/src", Some("/ws"), true);
        decide(
            rules,
            mode,
            &call,
            &HookVerdict::None,
            &PermissionDecision::Passthrough,
        )
        .0
    }

    fn is_allow(v: &Verdict) -> bool {
        matches!(v, Verdict::Allow(_))
    }
    fn is_ask(v: &Verdict) -> bool {
        matches!(v, Verdict::Ask(..))
    }
    fn is_deny(v: &Verdict) -> bool {
        matches!(v, Verdict::Deny(..))
    }

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
    fn deny_beats_ask_beats_allow() {
        let read = tool("read", &["Read"], WorkspaceAccess::Read, &[]);
        let input = json!({"file_path": "/ws/.env"});
        let r = rules(&["read"], &["read"], &["Read(/.env)"]);
        assert!(is_deny(&verdict(
            &r,
            PermissionMode::BypassPermissions,
            &read,
            RO,
            input.clone()
        )));
        let r = rules(&["read"], &["read"], &[]);
        assert!(is_ask(&verdict(
            &r,
            PermissionMode::Default,
            &read,
            RO,
            input.clone()
        )));
        let r = rules(&["Read(/src/**)"], &[], &[]);
        let write = tool("write", &["Write"], WorkspaceAccess::ReadWrite, &[]);
        let v = verdict(
            &r,
            PermissionMode::Default,
            &write,
            SafetyFlags::DESTRUCTIVE,
            json!({"file_path": "/ws/src/a"}),
        );
        assert!(
            is_ask(&v),
            "an allow for reads does not cover writes: {v:?}"
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
    fn read_and_edit_rules_cover_their_families() {
        let write = tool("write", &[], WorkspaceAccess::ReadWrite, &[]);
        let grep = tool("grep", &[], WorkspaceAccess::Read, &[]);
        let input = json!({"path": "/ws/secret"});
        let deny_read = rules(&[], &[], &["Read(/secret)"]);
        assert!(is_deny(&verdict(
            &deny_read,
            PermissionMode::BypassPermissions,
            &grep,
            RO,
            input.clone()
        )));
        assert!(
            is_deny(&verdict(
                &deny_read,
                PermissionMode::BypassPermissions,
                &write,
                SafetyFlags::empty(),
                input.clone()
            )),
            "a Read deny also blocks writes"
        );
        let allow_edit = rules(&["Edit(/secret)"], &[], &[]);
        assert!(is_allow(&verdict(
            &allow_edit,
            PermissionMode::Default,
            &write,
            SafetyFlags::empty(),
            input.clone()
        )));
        let allow_read = rules(&["Read(/secret)"], &[], &[]);
        assert!(is_ask(&verdict(
            &allow_read,
            PermissionMode::Default,
            &write,
            SafetyFlags::empty(),
            input
        )));
    }

    #[test]
    fn domain_param_and_command_rules() {
        let fetch = tool("fetch", &["WebFetch"], WorkspaceAccess::None, &["*"]);
        let r = rules(&[], &[], &["WebFetch(domain:*.evil.com)"]);
        let v = |url: &str| {
            verdict(
                &r,
                PermissionMode::BypassPermissions,
                &fetch,
                RO,
                json!({"url": url}),
            )
        };
        assert!(is_deny(&v("https://a.evil.com/x")));
        assert!(is_deny(&v("http://user@b.evil.com:8080/")));
        assert!(is_allow(&v("https://good.com/")));

        let bash = tool("Bash", &[], WorkspaceAccess::ReadWrite, &[]);
        let r = rules(
            &["Bash(npm run test:*)", "Bash(ls *)"],
            &[],
            &["Bash(run_in_background:true)"],
        );
        let v = |input: Value| {
            verdict(
                &r,
                PermissionMode::Default,
                &bash,
                SafetyFlags::empty(),
                input,
            )
        };
        assert!(is_allow(&v(json!({"command": "npm run test --watch"}))));
        assert!(
            is_allow(&v(json!({"command": "ls"}))),
            "a trailing ` *` keeps a word boundary"
        );
        assert!(is_ask(&v(json!({"command": "lsof"}))));
        assert!(is_deny(&v(
            json!({"command": "ls", "run_in_background": true})
        )));
    }

    #[test]
    fn modes_decide_what_rules_leave_open() {
        let read = tool("read", &[], WorkspaceAccess::Read, &[]);
        let edit = tool("edit", &[], WorkspaceAccess::ReadWrite, &[]);
        let fetch = tool("fetch", &[], WorkspaceAccess::None, &["*"]);
        let none = rules(&[], &[], &[]);
        let input = json!({"file_path": "/ws/a"});
        use PermissionMode::*;
        assert!(is_allow(&verdict(&none, Default, &read, RO, input.clone())));
        assert!(is_ask(&verdict(
            &none,
            Default,
            &edit,
            SafetyFlags::empty(),
            input.clone()
        )));
        let v = verdict(
            &none,
            Default,
            &edit,
            SafetyFlags::DESTRUCTIVE,
            input.clone(),
        );
        assert!(
            matches!(&v, Verdict::Ask(_, why) if why.contains("cannot be undone")),
            "{v:?}"
        );
        assert!(is_allow(&verdict(
            &none,
            AcceptEdits,
            &edit,
            SafetyFlags::DESTRUCTIVE,
            input.clone()
        )));
        assert!(
            is_ask(&verdict(
                &none,
                AcceptEdits,
                &fetch,
                SafetyFlags::OPEN_WORLD,
                json!({"url": "https://x"})
            )),
            "acceptEdits covers edits, not the network"
        );
        assert!(is_deny(&verdict(
            &none,
            Plan,
            &edit,
            SafetyFlags::empty(),
            input.clone()
        )));
        assert!(
            is_deny(&verdict(
                &rules(&["edit"], &[], &[]),
                Plan,
                &edit,
                SafetyFlags::empty(),
                input.clone()
            )),
            "plan mode beats allow rules"
        );
        assert!(is_allow(&verdict(&none, Plan, &read, RO, input.clone())));
        assert!(is_allow(&verdict(
            &none,
            BypassPermissions,
            &edit,
            SafetyFlags::DESTRUCTIVE,
            input.clone()
        )));
        assert!(is_deny(&verdict(
            &none,
            DontAsk,
            &edit,
            SafetyFlags::empty(),
            input.clone()
        )));
        let v = verdict(
            &none,
            BypassPermissions,
            &read,
            RO | SafetyFlags::REQUIRES_USER_INTERACTION,
            input.clone(),
        );
        assert!(is_ask(&v), "requires-user-interaction always asks: {v:?}");
        let call = CallFacts::new(&read, RO, &input, "/ws", Some("/ws"), false);
        let v = decide(
            &none,
            Default,
            &call,
            &HookVerdict::None,
            &PermissionDecision::Passthrough,
        )
        .0;
        assert!(
            matches!(&v, Verdict::Ask(_, why) if why.contains("outside the sandbox")),
            "unsandboxed tools ask: {v:?}"
        );
    }

    #[test]
    fn hooks_and_the_tool_fit_in_the_order() {
        let edit = tool("edit", &[], WorkspaceAccess::ReadWrite, &[]);
        let read = tool("read", &[], WorkspaceAccess::Read, &[]);
        let none = rules(&[], &[], &[]);
        let input = json!({"file_path": "/ws/a"});
        let go = |r: &PermissionRules,
                  d: &Descriptor,
                  flags,
                  hook: HookVerdict,
                  t: PermissionDecision| {
            let call = CallFacts::new(d, flags, &input, "/ws", Some("/ws"), true);
            decide(r, PermissionMode::Default, &call, &hook, &t)
        };
        let pass = PermissionDecision::Passthrough;
        assert!(is_deny(
            &go(
                &rules(&["edit"], &[], &[]),
                &edit,
                SafetyFlags::empty(),
                HookVerdict::Deny("no".into()),
                pass.clone()
            )
            .0
        ));
        assert!(is_allow(
            &go(
                &none,
                &edit,
                SafetyFlags::empty(),
                HookVerdict::Allow,
                pass.clone()
            )
            .0
        ));
        assert!(
            is_ask(
                &go(
                    &rules(&[], &["edit"], &[]),
                    &edit,
                    SafetyFlags::empty(),
                    HookVerdict::Allow,
                    pass.clone()
                )
                .0
            ),
            "ask rules still apply after a hook allow"
        );
        assert!(is_ask(
            &go(
                &none,
                &read,
                RO,
                HookVerdict::Ask("why".into()),
                pass.clone()
            )
            .0
        ));
        assert!(is_deny(
            &go(
                &none,
                &read,
                RO,
                HookVerdict::None,
                PermissionDecision::Deny("mine".into())
            )
            .0
        ));
        assert!(is_ask(
            &go(
                &none,
                &read,
                RO,
                HookVerdict::None,
                PermissionDecision::Ask("sure?".into())
            )
            .0
        ));
        let (v, rewritten) = go(
            &none,
            &edit,
            SafetyFlags::empty(),
            HookVerdict::None,
            PermissionDecision::Allow(Some(json!({"x": 1}))),
        );
        assert!(is_ask(&v), "a tool's allow never overrides the host's ask");
        assert_eq!(rewritten, Some(json!({"x": 1})));
    }

    #[test]
    fn bare_denies_hide_tools() {
        let r = rules(&[], &[], &["fetch", "mcp__srv", "Read(x)"]);
        assert!(r.hides(&tool("fetch", &[], WorkspaceAccess::None, &[])));
        assert!(r.hides(&tool("mcp__srv__t", &[], WorkspaceAccess::None, &[])));
        assert!(!r.hides(&tool("read", &["Read"], WorkspaceAccess::Read, &[])));
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
