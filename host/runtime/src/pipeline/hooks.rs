//! Pre- and post-tool hooks in Claude Code's format.
//!
//! Configuration (`hooks.PreToolUse` / `hooks.PostToolUse`): a list of
//! `{matcher, hooks: [{type, ...}]}`. The matcher is tested against the
//! tool's name and aliases: `*`, empty or absent matches every tool; a
//! value of letters, digits, `_`, `-`, spaces, `,` and `|` is a list of
//! exact names (`Write|Edit`); anything else is an unanchored regex.
//!
//! A `command` hook is a shell command, run outside the sandbox (it is the
//! operator's own code, as in Claude Code), with the event as JSON on stdin
//! (`session_id`, `cwd`, `permission_mode`, `hook_event_name`,
//! `tool_name`, `tool_input`, `tool_use_id`; `tool_response` and
//! `duration_ms` after the call). Exit 0 proceeds, and stdout starting with
//! `{` is its JSON answer; exit 2 blocks, with stderr as the reason; any
//! other exit, or a timeout, is a non-blocking error. A `wasm` hook is a
//! component exporting `airlock:tool/hook`, sandboxed like a tool (nothing
//! granted) and answering the same JSON.
//!
//! All hooks matching an event run in parallel; identical handlers run
//! once. Pre-tool answers combine deny over ask over allow; the first
//! `updatedInput` (in configuration order) replaces the whole input.

use crate::policy::HookVerdict;
use airlock_core::config::hooks::{DEFAULT_TIMEOUT_SECS, HookMatcher, HookSpec, HooksConfig};
use airlock_core::error::LoadError;
use airlock_core::host_files::{self, Links};
use airlock_core::sanitize::{self, Sink};
use airlock_engine::{Engine, WasmHook};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most bytes read from a command hook's stdout or stderr.
const MAX_HOOK_OUTPUT: u64 = 1 << 20;
/// The most characters of a hook's text kept (Claude Code's cap).
const MAX_HOOK_TEXT: usize = 10_000;

enum Matcher {
    All,
    Names(Vec<String>),
    Regex(regex::Regex),
}

impl Matcher {
    fn parse(text: Option<&str>) -> Result<Matcher, LoadError> {
        let text = text.unwrap_or("").trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        let plain = text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | ',' | '|'));
        if plain {
            return Ok(Matcher::Names(
                text.split(['|', ','])
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty())
                    .collect(),
            ));
        }
        regex::Regex::new(text).map(Matcher::Regex).map_err(|e| {
            LoadError::Grants(format!(
                "the hook matcher {text:?} is not a valid regex: {e}"
            ))
        })
    }

    fn matches<'a>(&self, mut names: impl Iterator<Item = &'a str>) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(list) => names.any(|n| list.iter().any(|l| l == n)),
            Matcher::Regex(re) => names.any(|n| re.is_match(n)),
        }
    }
}

#[derive(Clone)]
enum Handler {
    Command {
        command: String,
        timeout: Duration,
    },
    Wasm {
        hook: Arc<WasmHook>,
        timeout: Duration,
    },
}

/// What one handler answered.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    /// Exit 0, with the JSON answer if there was one.
    Proceed(Option<Value>),
    /// Exit 2, with the reason.
    Block(String),
    /// A non-blocking error: it is logged, and the hook has no say.
    Failed(String),
}

/// One matcher and its handlers, loaded.
#[derive(Clone)]
struct Group {
    matcher: Arc<Matcher>,
    handlers: Vec<(HookSpec, Handler)>,
}

/// The hooks, loaded.
#[derive(Clone, Default)]
pub struct Hooks {
    pre: Vec<Group>,
    post: Vec<Group>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("pre", &self.pre.len())
            .field("post", &self.post.len())
            .finish()
    }
}

/// What the pre-tool hooks decided.
#[derive(Clone, Debug, PartialEq)]
pub struct PreOutcome {
    /// Their verdict on permission.
    pub verdict: HookVerdict,
    /// A replacement input.
    pub updated_input: Option<Value>,
    /// Context for the model.
    pub additional_context: Vec<String>,
}

/// What the post-tool hooks decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PostOutcome {
    /// Why the result is blocked, if it is.
    pub block: Option<String>,
    /// A replacement for the tool's output.
    pub updated_output: Option<Value>,
    /// Context for the model.
    pub additional_context: Vec<String>,
}

/// The parts of an event every hook gets.
#[derive(Clone, Debug)]
pub struct HookEvent<'a> {
    /// The agent's session.
    pub session_id: &'a str,
    /// The agent's cwd.
    pub cwd: &'a str,
    /// The permission mode.
    pub permission_mode: String,
    /// The tool's registered name.
    pub tool_name: &'a str,
    /// The tool's aliases (used for matching only).
    pub aliases: &'a [String],
    /// The input.
    pub tool_input: &'a Value,
    /// The tool use's id.
    pub tool_use_id: &'a str,
    /// The sub-agent's id, if any.
    pub agent_id: Option<&'a str>,
    /// The workspace, for `CLAUDE_PROJECT_DIR`.
    pub project_dir: Option<&'a str>,
}

impl HookEvent<'_> {
    fn json(&self, name: &str, extra: Option<(Value, u64)>) -> Value {
        let mut event = json!({
            "session_id": self.session_id,
            "cwd": self.cwd,
            "permission_mode": self.permission_mode,
            "hook_event_name": name,
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
            "tool_use_id": self.tool_use_id,
        });
        if let Some(agent) = self.agent_id {
            event["agent_id"] = json!(agent);
        }
        if let Some((response, ms)) = extra {
            event["tool_response"] = response;
            event["duration_ms"] = json!(ms);
        }
        event
    }
}

impl Hooks {
    /// No hooks.
    pub fn none() -> Hooks {
        Hooks::default()
    }

    /// Loads the configured hooks, compiling wasm hooks on `engine`.
    pub async fn load(config: &HooksConfig, engine: &Engine) -> Result<Hooks, LoadError> {
        Ok(Hooks {
            pre: load_groups(&config.pre_tool_use, engine).await?,
            post: load_groups(&config.post_tool_use, engine).await?,
        })
    }

    /// Whether any hook is configured.
    pub fn is_empty(&self) -> bool {
        self.pre.is_empty() && self.post.is_empty()
    }

    /// Runs the pre-tool hooks for `event`.
    pub async fn pre_tool_use(&self, event: &HookEvent<'_>) -> PreOutcome {
        let answers = run_matching(&self.pre, event, || event.json("PreToolUse", None)).await;
        let mut outcome = PreOutcome {
            verdict: HookVerdict::None,
            updated_input: None,
            additional_context: Vec::new(),
        };
        let mut asks = Vec::new();
        let mut denies = Vec::new();
        let mut allowed = false;
        for answer in answers {
            match answer {
                Answer::Block(reason) => denies.push(reason),
                Answer::Failed(why) => {
                    tracing::warn!(tool = event.tool_name, "PreToolUse hook failed: {why}")
                }
                Answer::Proceed(None) => {}
                Answer::Proceed(Some(out)) => {
                    let specific = out
                        .get("hookSpecificOutput")
                        .cloned()
                        .unwrap_or(Value::Null);
                    let reason = text_field(&specific, "permissionDecisionReason")
                        .or_else(|| text_field(&out, "reason"))
                        .unwrap_or_else(|| "a PreToolUse hook decided so".into());
                    let decision = specific
                        .get("permissionDecision")
                        .and_then(Value::as_str)
                        .or_else(|| match out.get("decision").and_then(Value::as_str) {
                            Some("approve") => Some("allow"),
                            Some("block") => Some("deny"),
                            _ => None,
                        });
                    match decision {
                        Some("deny") => denies.push(reason),
                        Some("ask") => asks.push(reason),
                        Some("allow") => allowed = true,
                        Some(other) => tracing::warn!(
                            tool = event.tool_name,
                            "PreToolUse hook answered permissionDecision {other:?}, which Airlock does not support; ignored"
                        ),
                        None => {}
                    }
                    if out.get("continue") == Some(&Value::Bool(false)) {
                        denies.push(
                            text_field(&out, "stopReason")
                                .unwrap_or_else(|| "a hook stopped the agent".into()),
                        );
                    }
                    if outcome.updated_input.is_none()
                        && let Some(input) = specific.get("updatedInput").filter(|v| v.is_object())
                    {
                        outcome.updated_input = Some(input.clone());
                    }
                    if let Some(context) = text_field(&specific, "additionalContext") {
                        outcome.additional_context.push(context);
                    }
                }
            }
        }
        outcome.verdict = if !denies.is_empty() {
            HookVerdict::Deny(denies.join("\n"))
        } else if !asks.is_empty() {
            HookVerdict::Ask(asks.join("\n"))
        } else if allowed {
            HookVerdict::Allow
        } else {
            HookVerdict::None
        };
        outcome
    }

    /// Runs the post-tool hooks for `event`, after a call that produced
    /// `response` in `duration_ms`.
    pub async fn post_tool_use(
        &self,
        event: &HookEvent<'_>,
        response: Value,
        duration_ms: u64,
    ) -> PostOutcome {
        let answers = run_matching(&self.post, event, move || {
            event.json("PostToolUse", Some((response, duration_ms)))
        })
        .await;
        let mut outcome = PostOutcome::default();
        let mut blocks = Vec::new();
        for answer in answers {
            match answer {
                Answer::Block(reason) => blocks.push(reason),
                Answer::Failed(why) => {
                    tracing::warn!(tool = event.tool_name, "PostToolUse hook failed: {why}")
                }
                Answer::Proceed(None) => {}
                Answer::Proceed(Some(out)) => {
                    if out.get("decision").and_then(Value::as_str) == Some("block") {
                        blocks.push(
                            text_field(&out, "reason")
                                .unwrap_or_else(|| "a PostToolUse hook blocked the result".into()),
                        );
                    }
                    let specific = out
                        .get("hookSpecificOutput")
                        .cloned()
                        .unwrap_or(Value::Null);
                    if outcome.updated_output.is_none() {
                        outcome.updated_output = specific
                            .get("updatedToolOutput")
                            .or_else(|| specific.get("updatedMCPToolOutput"))
                            .cloned();
                    }
                    if let Some(context) = text_field(&specific, "additionalContext") {
                        outcome.additional_context.push(context);
                    }
                }
            }
        }
        if !blocks.is_empty() {
            outcome.block = Some(blocks.join("\n"));
        }
        outcome
    }
}

async fn load_groups(groups: &[HookMatcher], engine: &Engine) -> Result<Vec<Group>, LoadError> {
    let mut out = Vec::new();
    for group in groups {
        let matcher = Arc::new(Matcher::parse(group.matcher.as_deref())?);
        let mut handlers = Vec::new();
        for spec in &group.hooks {
            let handler = match spec {
                HookSpec::Command { command, timeout } => Handler::Command {
                    command: command.clone(),
                    timeout: Duration::from_secs(timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)),
                },
                HookSpec::Wasm { component, timeout } => {
                    let bytes = host_files::read_capped(
                        component,
                        engine.limits().component_bytes,
                        Links::Follow,
                    )
                    .map_err(|e| {
                        LoadError::Io(format!("cannot read the hook {}: {e}", component.display()))
                    })?;
                    Handler::Wasm {
                        hook: Arc::new(WasmHook::load(engine, bytes).await?),
                        timeout: Duration::from_secs(timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)),
                    }
                }
            };
            handlers.push((spec.clone(), handler));
        }
        out.push(Group { matcher, handlers });
    }
    Ok(out)
}

/// Runs every distinct handler whose matcher matches, in parallel, on the
/// JSON `payload` builds (built only when one matches), and returns their
/// answers in configuration order.
async fn run_matching(
    groups: &[Group],
    event: &HookEvent<'_>,
    payload: impl FnOnce() -> Value,
) -> Vec<Answer> {
    let names = || std::iter::once(event.tool_name).chain(event.aliases.iter().map(String::as_str));
    let mut chosen: Vec<&(HookSpec, Handler)> = Vec::new();
    for group in groups {
        if group.matcher.matches(names()) {
            for h in &group.handlers {
                if !chosen.iter().any(|c| c.0 == h.0) {
                    chosen.push(h);
                }
            }
        }
    }
    if chosen.is_empty() {
        return Vec::new();
    }
    let payload = payload().to_string();
    let runs = chosen
        .into_iter()
        .map(|(_, handler)| run_handler(handler, &payload, event.project_dir));
    futures::future::join_all(runs).await
}

async fn run_handler(handler: &Handler, payload: &str, project_dir: Option<&str>) -> Answer {
    match handler {
        Handler::Command { command, timeout } => {
            run_command(command, payload, *timeout, project_dir).await
        }
        Handler::Wasm { hook, timeout } => match hook.handle(payload, *timeout).await {
            Ok(airlock_engine::HookAnswer::Proceed(out)) => {
                parse_output(out.as_deref().unwrap_or(""))
            }
            Ok(airlock_engine::HookAnswer::Block(reason)) => Answer::Block(clean(&reason)),
            Err(e) => Answer::Failed(format!("the wasm hook failed: {e}")),
        },
    }
}

async fn run_command(
    command: &str,
    payload: &str,
    timeout: Duration,
    project_dir: Option<&str>,
) -> Answer {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = project_dir {
        cmd.env("CLAUDE_PROJECT_DIR", dir)
            .env("AIRLOCK_PROJECT_DIR", dir);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Answer::Failed(format!("cannot start `{command}`: {e}")),
    };
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Answer::Failed("the hook's pipes are missing".into());
    };
    let run = async {
        // A hook that exits without reading its input is not an error.
        let feed = async {
            let _ = stdin.write_all(payload.as_bytes()).await;
            drop(stdin);
        };
        let ((), out, err) = tokio::join!(feed, read_capped(stdout), read_capped(stderr));
        let status = child.wait().await;
        (status, out, err)
    };
    let (status, out, err) = match tokio::time::timeout(timeout, run).await {
        Ok(r) => r,
        Err(_) => {
            return Answer::Failed(format!(
                "`{command}` took longer than {} s",
                timeout.as_secs()
            ));
        }
    };
    let stderr = clean(&String::from_utf8_lossy(&err));
    match status.map(|s| s.code()) {
        Ok(Some(0)) => parse_output(&String::from_utf8_lossy(&out)),
        Ok(Some(2)) => Answer::Block(if stderr.trim().is_empty() {
            "blocked by a hook".into()
        } else {
            stderr.trim().to_string()
        }),
        Ok(code) => Answer::Failed(format!(
            "`{command}` exited with {}: {}",
            code.map_or("a signal".into(), |c| format!("code {c}")),
            stderr.trim()
        )),
        Err(e) => Answer::Failed(format!("`{command}` could not be waited for: {e}")),
    }
}

/// Reads a pipe to its end, keeping at most [`MAX_HOOK_OUTPUT`] bytes.
async fn read_capped(pipe: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = pipe.take(MAX_HOOK_OUTPUT).read_to_end(&mut buf).await;
    buf
}

/// Exit 0: stdout that starts with `{` is the JSON answer.
fn parse_output(stdout: &str) -> Answer {
    let trimmed = stdout.trim();
    if !trimmed.starts_with('{') {
        return Answer::Proceed(None);
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => Answer::Proceed(Some(v)),
        Err(e) => Answer::Failed(format!("the hook printed invalid JSON: {e}")),
    }
}

fn clean(text: &str) -> String {
    sanitize::clean_capped(text, Sink::Model, MAX_HOOK_TEXT)
}

fn text_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_follow_claude_codes_rules() {
        let names = |n: &'static [&'static str]| n.iter().copied();
        assert!(Matcher::parse(None).unwrap().matches(names(&["x"])));
        assert!(Matcher::parse(Some("*")).unwrap().matches(names(&["x"])));
        let list = Matcher::parse(Some("Write|Edit, read")).unwrap();
        assert!(list.matches(names(&["write", "Write"])));
        assert!(list.matches(names(&["read"])));
        assert!(!list.matches(names(&["readme"])), "names match exactly");
        let re = Matcher::parse(Some("mcp__.*__write.*")).unwrap();
        assert!(re.matches(names(&["mcp__fs__write_file"])));
        assert!(!re.matches(names(&["mcp__fs__read"])));
        assert!(Matcher::parse(Some("(bad")).is_err());
    }

    #[test]
    fn output_is_json_only_when_it_looks_like_json() {
        assert_eq!(parse_output("just text"), Answer::Proceed(None));
        assert_eq!(
            parse_output(" {\"a\":1}\n"),
            Answer::Proceed(Some(json!({"a": 1})))
        );
        assert!(matches!(parse_output("{oops"), Answer::Failed(_)));
    }

    #[test]
    fn unknown_handler_types_are_errors() {
        let err = serde_json::from_value::<HooksConfig>(json!({
            "PreToolUse": [{"matcher": "x", "hooks": [{"type": "http", "url": "http://x"}]}]
        }))
        .unwrap_err();
        assert!(err.to_string().contains("unknown variant `http`"), "{err}");
    }

    fn event<'a>(input: &'a Value, aliases: &'a [String]) -> HookEvent<'a> {
        HookEvent {
            session_id: "s",
            cwd: "/ws",
            permission_mode: "default".into(),
            tool_name: "write",
            aliases,
            tool_input: input,
            tool_use_id: "t1",
            agent_id: None,
            project_dir: Some("/ws"),
        }
    }

    fn command_hooks(pre: &[(&str, &str)], post: &[(&str, &str)]) -> Hooks {
        command_hooks_within(pre, post, Duration::from_secs(5))
    }

    fn command_hooks_within(
        pre: &[(&str, &str)],
        post: &[(&str, &str)],
        timeout: Duration,
    ) -> Hooks {
        let group = |list: &[(&str, &str)]| {
            list.iter()
                .map(|(matcher, command)| Group {
                    matcher: Arc::new(Matcher::parse(Some(matcher)).unwrap()),
                    handlers: vec![(
                        HookSpec::Command {
                            command: command.to_string(),
                            timeout: None,
                        },
                        Handler::Command {
                            command: command.to_string(),
                            timeout,
                        },
                    )],
                })
                .collect()
        };
        Hooks {
            pre: group(pre),
            post: group(post),
        }
    }

    #[tokio::test]
    async fn command_hooks_block_allow_ask_and_rewrite() {
        let input = json!({"file_path": "/ws/a"});
        let aliases = vec!["Write".to_string()];
        let e = event(&input, &aliases);

        let blocked = command_hooks(
            &[(
                "Write",
                "cat >/dev/null; echo 'no writes today' >&2; exit 2",
            )],
            &[],
        );
        assert_eq!(
            blocked.pre_tool_use(&e).await.verdict,
            HookVerdict::Deny("no writes today".into())
        );

        let rewrite = command_hooks(
            &[(
                "*",
                r#"cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"file_path":"/ws/b"},"additionalContext":"rewritten"}}'"#,
            )],
            &[],
        );
        let out = rewrite.pre_tool_use(&e).await;
        assert_eq!(out.verdict, HookVerdict::Allow);
        assert_eq!(out.updated_input, Some(json!({"file_path": "/ws/b"})));
        assert_eq!(out.additional_context, ["rewritten"]);

        let mixed = command_hooks(
            &[
                (
                    "*",
                    r#"echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'"#,
                ),
                (
                    "write",
                    r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check it"}}'"#,
                ),
            ],
            &[],
        );
        assert_eq!(
            mixed.pre_tool_use(&e).await.verdict,
            HookVerdict::Ask("check it".into())
        );

        let failing = command_hooks_within(
            &[("*", "exit 1"), ("*", "sleep 10")],
            &[],
            Duration::from_millis(200),
        );
        assert_eq!(
            failing.pre_tool_use(&e).await.verdict,
            HookVerdict::None,
            "errors and timeouts decide nothing"
        );

        let stdin_seen = command_hooks(
            &[(
                "*",
                r#"e=$(cat); case "$e" in *'"hook_event_name":"PreToolUse"'*'"tool_use_id":"t1"'*|*'"tool_use_id":"t1"'*'"hook_event_name":"PreToolUse"'*) exit 0;; esac; exit 2"#,
            )],
            &[],
        );
        assert_eq!(
            stdin_seen.pre_tool_use(&e).await.verdict,
            HookVerdict::None,
            "the event arrives on stdin"
        );
    }

    #[tokio::test]
    async fn post_hooks_block_replace_and_add_context() {
        let input = json!({});
        let e = event(&input, &[]);
        let hooks = command_hooks(
            &[],
            &[
                (
                    "*",
                    r#"echo '{"decision":"block","reason":"leaks a secret"}'"#,
                ),
                (
                    "*",
                    r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"ran tests","updatedToolOutput":{"stdout":"[redacted]"}}}'"#,
                ),
            ],
        );
        let out = hooks
            .post_tool_use(&e, json!({"content": "secret"}), 5)
            .await;
        assert_eq!(out.block.as_deref(), Some("leaks a secret"));
        assert_eq!(out.updated_output, Some(json!({"stdout": "[redacted]"})));
        assert_eq!(out.additional_context, ["ran tests"]);
    }
}
