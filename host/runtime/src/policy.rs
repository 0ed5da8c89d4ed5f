//! The permission decision: may this call go ahead?
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
//! allow what the host would ask about. An ask goes to the user; every
//! denial is recorded in the context.

use airlock_core::descriptor::{Descriptor, SafetyFlags};
use airlock_core::permissions::{CallFacts, PermissionMode, PermissionsConfig, Rule, RuleKind};
use airlock_core::tool::PermissionDecision;
use serde::Serialize;
use serde_json::Value;
use std::fmt;

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
        self.deny.iter().any(|r| r.names_whole_tool(descriptor))
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
            DecisionSource::Rule(rule.text().to_string()),
            format!(
                "Permission to use {name} was denied by the rule {}.",
                rule.text()
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
            DecisionSource::Rule(rule.text().to_string()),
            format!("the rule {} asks before {name} runs", rule.text()),
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
        return Verdict::Allow(DecisionSource::Rule(rule.text().to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_core::descriptor::WorkspaceAccess;
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
}
