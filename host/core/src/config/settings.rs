//! Claude Code settings files (`.claude/settings.json` and friends) merged
//! into a [`Config`], so the permission rules and hooks people already
//! have apply to Airlock's tools unchanged.
//!
//! Read: `permissions.allow`, `ask`, `deny` (appended to airlock.toml's:
//! the order of evaluation is by kind, deny then ask then allow, so
//! appending changes nothing else), `permissions.defaultMode` (a later file
//! overrides an earlier one; airlock.toml's own `default_mode` overrides
//! the files it lists, a file given with `--settings` overrides
//! airlock.toml, and `--mode` overrides all), `hooks.PreToolUse` and
//! `hooks.PostToolUse` with `command` handlers (appended). A path rule
//! anchored at the project (`Read(/src/**)`, `Edit(/x)`) is anchored at
//! the settings file's project: the directory holding its `.claude`
//! directory (else the file's own directory).
//!
//! Anything a settings file says about tools that Airlock does not do is an
//! error naming the key and what to do instead: other hook types (`http`,
//! `prompt`, `agent`, `mcp_tool`), handler fields such as `if`, `async` or
//! `args`, tool events Airlock does not run (`PostToolUseFailure`,
//! `PermissionRequest`, `PermissionDenied`), the `auto` mode,
//! `additionalDirectories` (directories are granted in airlock.toml),
//! `disableAllHooks: true` (a settings file does not switch off the
//! operator's hooks), settings about MCP servers or Claude Code's own
//! sandbox, and any key Airlock does not know (a misspelt `permissions`
//! must not drop the rules in it). Silently skipping any of them could let
//! a call through that the user's settings stop. Known keys about the rest
//! of the agent (the model, the status line, hooks of non-tool events such
//! as `Stop`) are not Airlock's to apply and are returned as notes.

use super::hooks::HookMatcher;
use super::{Config, ConfigError};
use crate::host_files::{self, Links};
use crate::permissions::{PermissionMode, Rule};
use serde_json::{Map, Value};
use std::path::Path;

/// Top-level keys about tools that Airlock does not apply.
const UNSUPPORTED_TOP: &[(&str, &str)] = &[
    (
        "sandbox",
        "Airlock sandboxes every tool itself; grant directories, hosts and variables in airlock.toml",
    ),
    (
        "enableAllProjectMcpServers",
        "mount MCP servers under [mcp_servers] in airlock.toml",
    ),
    (
        "enabledMcpjsonServers",
        "mount MCP servers under [mcp_servers] in airlock.toml",
    ),
    (
        "disabledMcpjsonServers",
        "mount MCP servers under [mcp_servers] in airlock.toml",
    ),
    (
        "allowedMcpServers",
        "mount MCP servers under [mcp_servers] in airlock.toml",
    ),
    (
        "deniedMcpServers",
        "mount MCP servers under [mcp_servers] in airlock.toml",
    ),
    (
        "allowManagedHooksOnly",
        "Airlock runs the hooks of the files it is given",
    ),
    (
        "allowManagedPermissionRulesOnly",
        "Airlock applies the rules of the files it is given",
    ),
];

/// Hook events about tool calls that Airlock does not run.
const UNSUPPORTED_EVENTS: &[&str] = &[
    "PostToolUseFailure",
    "PermissionRequest",
    "PermissionDenied",
];

/// Claude Code settings about the rest of the agent, not its tools: left
/// to it.
const AGENT_KEYS: &[&str] = &[
    "model",
    "availableModels",
    "env",
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "cleanupPeriodDays",
    "companyAnnouncements",
    "forceLoginMethod",
    "forceLoginOrgUUID",
    "includeCoAuthoredBy",
    "includeGitInstructions",
    "attribution",
    "outputStyle",
    "statusLine",
    "subagentStatusLine",
    "spinnerTipsEnabled",
    "spinnerVerbs",
    "alwaysThinkingEnabled",
    "theme",
    "language",
    "autoUpdates",
    "autoUpdatesChannel",
    "enabledPlugins",
    "extraKnownMarketplaces",
    "feedbackSurveyRate",
    "respectGitignore",
    "fileSuggestion",
    "plansDirectory",
    "showTurnDuration",
    "terminalProgressBarEnabled",
    "verbose",
    "preferredNotifChannel",
    "promptSuggestionEnabled",
    "teammateMode",
];

/// Hook events of the agent loop, not of tool calls: not Airlock's.
const AGENT_EVENTS: &[&str] = &[
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Notification",
    "TaskCreated",
    "TaskCompleted",
    "TeammateIdle",
    "InstructionsLoaded",
    "ConfigChange",
    "CwdChanged",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
    "Elicitation",
    "ElicitationResult",
];

/// What a settings file gave, ready to merge.
#[derive(Debug, Default)]
struct Settings {
    allow: Vec<String>,
    ask: Vec<String>,
    deny: Vec<String>,
    mode: Option<PermissionMode>,
    pre_tool_use: Vec<HookMatcher>,
    post_tool_use: Vec<HookMatcher>,
}

/// Merges the Claude Code settings file at `path` into `config` (see the
/// module docs for what is read and what is refused), and records it in
/// `config.merged_settings`. Returns notes on what was left to the agent (keys
/// that are not about tools).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("settings.json");
/// std::fs::write(&path, r#"{"permissions": {"deny": ["WebFetch"], "defaultMode": "acceptEdits"},
///                            "model": "opus"}"#).unwrap();
/// let mut config = airlock_core::config::Config::default();
/// let notes = airlock_core::config::settings::merge(&mut config, &path).unwrap();
/// assert_eq!(config.permissions.deny, ["WebFetch"]);
/// assert_eq!(config.permissions.default_mode, airlock_core::permissions::PermissionMode::AcceptEdits);
/// assert!(notes[0].contains("model"));
///
/// std::fs::write(&path, r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "http", "url": "http://127.0.0.1:9/h"}]}]}}"#).unwrap();
/// let error = airlock_core::config::settings::merge(&mut config, &path).unwrap_err();
/// assert!(error.to_string().contains("hooks.PreToolUse[0].hooks[0].type"), "{error}");
/// ```
pub fn merge(config: &mut Config, path: &Path) -> Result<Vec<String>, ConfigError> {
    let fail = |message: String| ConfigError {
        path: path.display().to_string(),
        message,
    };
    let text = host_files::read_text_capped(path, host_files::CONFIG_BYTES, Links::Follow)
        .map_err(|e| fail(e.to_string()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| fail(format!("not a JSON settings file: {e}")))?;
    let mut notes = Vec::new();
    let mut settings = read(&value, &mut notes).map_err(fail)?;
    let project = project_of(path);
    for rule in settings
        .allow
        .iter_mut()
        .chain(&mut settings.ask)
        .chain(&mut settings.deny)
    {
        *rule = anchored(rule, &project);
    }
    let p = &mut config.permissions;
    p.allow.extend(settings.allow);
    p.ask.extend(settings.ask);
    p.deny.extend(settings.deny);
    if let Some(mode) = settings.mode {
        p.default_mode = mode;
    }
    config.hooks.pre_tool_use.extend(settings.pre_tool_use);
    config.hooks.post_tool_use.extend(settings.post_tool_use);
    config.merged_settings.push(path.to_path_buf());
    Ok(notes
        .into_iter()
        .map(|n| format!("{}: {n}", path.display()))
        .collect())
}

fn read(value: &Value, notes: &mut Vec<String>) -> Result<Settings, String> {
    let top = value
        .as_object()
        .ok_or("the settings must be a JSON object")?;
    let mut settings = Settings::default();
    let mut ignored = Vec::new();
    for (key, value) in top {
        match key.as_str() {
            "$schema" => {}
            "permissions" => read_permissions(value, &mut settings)?,
            "hooks" => read_hooks(value, &mut settings, notes)?,
            "disableAllHooks" => match value.as_bool() {
                Some(false) => {}
                Some(true) => {
                    return Err(
                        "disableAllHooks: a settings file cannot switch off Airlock's hooks; \
                                remove the hooks you do not want instead"
                            .into(),
                    );
                }
                None => return Err("disableAllHooks: must be true or false".into()),
            },
            k if AGENT_KEYS.contains(&k) => ignored.push(k),
            _ => match UNSUPPORTED_TOP.iter().find(|(k, _)| k == key) {
                Some((_, instead)) => {
                    return Err(format!("{key}: not supported by Airlock ({instead})"));
                }
                None => {
                    return Err(format!(
                        "{key}: not a setting Airlock knows; if it is misspelt, what it holds \
                         would be lost, so fix or remove it"
                    ));
                }
            },
        }
    }
    if !ignored.is_empty() {
        notes.push(format!("ignored (not about tools): {}", ignored.join(", ")));
    }
    Ok(settings)
}

fn read_permissions(value: &Value, settings: &mut Settings) -> Result<(), String> {
    let map = object(value, "permissions")?;
    for (key, value) in map {
        let at = format!("permissions.{key}");
        match key.as_str() {
            "allow" | "ask" | "deny" => {
                let rules = strings(value, &at)?;
                for (i, rule) in rules.iter().enumerate() {
                    Rule::parse(rule).map_err(|e| format!("{at}[{i}]: {e}"))?;
                }
                let list = match key.as_str() {
                    "allow" => &mut settings.allow,
                    "ask" => &mut settings.ask,
                    _ => &mut settings.deny,
                };
                list.extend(rules);
            }
            "defaultMode" => settings.mode = Some(mode(value, &at)?),
            "additionalDirectories" => {
                return Err(format!(
                    "{at}: not supported by Airlock: grant directories with `mounts` under \
                     [tools.\"*\"] in airlock.toml, or `--mount DIR`"
                ));
            }
            _ => return Err(format!("{at}: not supported by Airlock")),
        }
    }
    Ok(())
}

/// The project a settings file belongs to: the directory holding its
/// `.claude` directory, else the file's own directory.
fn project_of(path: &Path) -> std::path::PathBuf {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if dir.file_name().is_some_and(|n| n == ".claude") {
        dir.parent().map_or(dir.clone(), Path::to_path_buf)
    } else {
        dir
    }
}

/// A `Read(/path)` or `Edit(/path)` rule (anchored at the project) with its
/// path made absolute (`//project/path`); other rules as they are.
fn anchored(rule: &str, project: &Path) -> String {
    for family in ["Read(", "Edit("] {
        if let Some(rest) = rule.trim().strip_prefix(family)
            && rest.starts_with('/')
            && !rest.starts_with("//")
        {
            let root = project.to_string_lossy();
            return format!("{family}/{}{rest}", root.trim_end_matches('/'));
        }
    }
    rule.to_string()
}

fn mode(value: &Value, at: &str) -> Result<PermissionMode, String> {
    let supported = "default, acceptEdits, plan, dontAsk or bypassPermissions";
    match value.as_str() {
        Some("auto") => Err(format!(
            "{at}: \"auto\" (a model classifier deciding) is not supported by Airlock; use {supported}"
        )),
        Some(_) => serde_json::from_value(value.clone())
            .map_err(|_| format!("{at}: {value} is not a mode; use {supported}")),
        None => Err(format!("{at}: must be a string ({supported})")),
    }
}

fn read_hooks(
    value: &Value,
    settings: &mut Settings,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let events = object(value, "hooks")?;
    for (event, groups) in events {
        let at = format!("hooks.{event}");
        let list = match event.as_str() {
            "PreToolUse" => &mut settings.pre_tool_use,
            "PostToolUse" => &mut settings.post_tool_use,
            e if UNSUPPORTED_EVENTS.contains(&e) => {
                return Err(format!(
                    "{at}: Airlock does not run {e} hooks (only PreToolUse and PostToolUse)"
                ));
            }
            e if AGENT_EVENTS.contains(&e) => {
                notes.push(format!(
                    "{at}: an event of the agent loop, not of tool calls; not run by Airlock"
                ));
                continue;
            }
            _ => return Err(format!("{at}: not a hook event Airlock knows")),
        };
        let groups = groups
            .as_array()
            .ok_or_else(|| format!("{at}: must be a list of matcher groups"))?;
        for (i, group) in groups.iter().enumerate() {
            list.push(matcher_group(group, &format!("{at}[{i}]"))?);
        }
    }
    Ok(())
}

/// One `{matcher, hooks: [...]}` group, each handler checked.
fn matcher_group(group: &Value, at: &str) -> Result<HookMatcher, String> {
    let map = object(group, at)?;
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "matcher" | "hooks"))
    {
        return Err(format!("{at}.{key}: not supported by Airlock"));
    }
    let handlers = map
        .get("hooks")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{at}.hooks: must be a list of handlers"))?;
    let mut clean = Vec::new();
    for (i, handler) in handlers.iter().enumerate() {
        clean.push(handler_of(handler, &format!("{at}.hooks[{i}]"))?);
    }
    let mut group = map.clone();
    group.insert("hooks".into(), Value::Array(clean));
    serde_json::from_value(Value::Object(group)).map_err(|e| format!("{at}: {e}"))
}

/// A `command` handler, with the fields that change nothing for a tool
/// host (`statusMessage`) dropped.
fn handler_of(handler: &Value, at: &str) -> Result<Value, String> {
    let map = object(handler, at)?;
    match map.get("type").and_then(Value::as_str) {
        Some("command") => {}
        Some(other) => {
            let instead = match other {
                "http" => "; call the endpoint from a command hook (`curl -sS --json @- URL`)",
                "wasm" => "; wasm hooks are configured in airlock.toml",
                _ => "",
            };
            return Err(format!(
                "{at}.type: the hook type {other:?} is not supported by Airlock (settings files may \
                 use \"command\"){instead}"
            ));
        }
        None => return Err(format!("{at}.type: missing (\"command\")")),
    }
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "type" | "command" | "timeout" => {
                out.insert(key.clone(), value.clone());
            }
            "statusMessage" => {}
            "if" => {
                return Err(format!(
                    "{at}.if: conditions on hooks are not supported by Airlock; narrow the matcher, \
                     or test the input in the hook"
                ));
            }
            _ => return Err(format!("{at}.{key}: not supported by Airlock")),
        }
    }
    Ok(Value::Object(out))
}

fn object<'v>(value: &'v Value, at: &str) -> Result<&'v Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{at}: must be an object"))
}

fn strings(value: &Value, at: &str) -> Result<Vec<String>, String> {
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|i| i.as_str().map(String::from))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| format!("{at}: must be a list of strings"))
}

#[cfg(test)]
mod tests {
    use super::super::hooks::HookSpec;
    use super::*;
    use serde_json::json;

    fn error(settings: Value) -> String {
        read(&settings, &mut Vec::new()).unwrap_err()
    }

    #[test]
    fn the_references_rules_and_command_hooks_are_read() {
        let mut notes = Vec::new();
        let s = read(
            &json!({
                "permissions": {"allow": ["Bash(npm run test *)", "Read(./src/**)"],
                                "ask": ["Bash(git push *)"],
                                "deny": ["Read(./.env)", "WebFetch(domain:*.example.com)", "mcp__memory"],
                                "defaultMode": "acceptEdits"},
                "hooks": {"PreToolUse": [{"matcher": "Edit|Write",
                                          "hooks": [{"type": "command", "command": "/p/check.sh",
                                                     "timeout": 60, "statusMessage": "Checking"}]}],
                          "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},
                "model": "opus",
                "statusLine": {"type": "command", "command": "x"},
                "disableAllHooks": false
            }),
            &mut notes,
        )
        .unwrap();
        assert_eq!(s.allow.len(), 2);
        assert_eq!(s.deny.len(), 3);
        assert_eq!(s.mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(s.pre_tool_use[0].matcher.as_deref(), Some("Edit|Write"));
        assert_eq!(
            s.pre_tool_use[0].hooks,
            [HookSpec::Command {
                command: "/p/check.sh".into(),
                timeout: Some(60)
            }]
        );
        assert!(notes.iter().any(|n| n.contains("hooks.Stop")), "{notes:?}");
        assert!(
            notes.iter().any(|n| n.contains("model, statusLine")),
            "{notes:?}"
        );
    }

    #[test]
    fn project_anchored_path_rules_are_anchored_at_the_settings_project() {
        let root = Path::new("/home/u/proj");
        assert_eq!(
            anchored("Read(/src/**)", root),
            "Read(//home/u/proj/src/**)"
        );
        assert_eq!(anchored("Edit(/x.ts)", root), "Edit(//home/u/proj/x.ts)");
        assert_eq!(anchored("Read(//etc/**)", root), "Read(//etc/**)");
        assert_eq!(anchored("Read(./.env)", root), "Read(./.env)");
        assert_eq!(anchored("Bash(/bin/ls *)", root), "Bash(/bin/ls *)");
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join(".claude");
        std::fs::create_dir(&claude).unwrap();
        let project = dir.path().canonicalize().unwrap();
        assert_eq!(project_of(&claude.join("settings.json")), project);
        assert_eq!(project_of(&dir.path().join("s.json")), project);
    }

    #[test]
    fn what_is_not_supported_is_named() {
        let cases = [
            (
                json!({"hooks": {"PreToolUse": [{"matcher": "mcp__memory__.*", "hooks": [{"type": "http", "url": "http://127.0.0.1:8080/hook"}]}]}}),
                "hooks.PreToolUse[0].hooks[0].type: the hook type \"http\"",
            ),
            (
                json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "if": "Bash(git *)"}]}]}}),
                "hooks.PreToolUse[0].hooks[0].if",
            ),
            (
                json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "async": true}]}]}}),
                "hooks.PreToolUse[0].hooks[0].async: not supported",
            ),
            (
                json!({"hooks": {"PermissionRequest": []}}),
                "Airlock does not run PermissionRequest hooks",
            ),
            (
                json!({"hooks": {"PreToolUs": []}}),
                "hooks.PreToolUs: not a hook event",
            ),
            (
                json!({"permissions": {"defaultMode": "auto"}}),
                "\"auto\" (a model classifier deciding) is not supported",
            ),
            (
                json!({"permissions": {"defaultMode": "yolo"}}),
                "\"yolo\" is not a mode",
            ),
            (
                json!({"permissions": {"additionalDirectories": ["../x"]}}),
                "--mount DIR",
            ),
            (
                json!({"permissions": {"deny": ["Bash(unclosed"]}}),
                "permissions.deny[0]: the rule \"Bash(unclosed\" has no closing parenthesis",
            ),
            (
                json!({"permissions": {"allow": "Read"}}),
                "must be a list of strings",
            ),
            (
                json!({"sandbox": {"enabled": true}}),
                "sandbox: not supported",
            ),
            (
                json!({"permission": {"deny": ["Read"]}}),
                "permission: not a setting Airlock knows",
            ),
            (
                json!({"disableAllHooks": true}),
                "cannot switch off Airlock's hooks",
            ),
            (json!([1]), "must be a JSON object"),
        ];
        for (settings, expected) in cases {
            let e = error(settings.clone());
            assert!(e.contains(expected), "{settings}: {e}");
        }
    }
}
