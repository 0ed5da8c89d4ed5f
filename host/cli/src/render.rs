//! Printing for the command line. Everything a tool controls is cleaned
//! for the terminal before it is printed. Output goes through
//! [`to_stdout`], so a reader that goes away (`airlock list | head -1`)
//! ends it quietly.

use airlock_host::Airlock;
use airlock_host::Entry;
use airlock_host::ToolResult;
use airlock_host::grants::ToolGrants;
use airlock_host::sanitize::{self, Sink};
use airlock_host::tool::ProgressEvent;
use airlock_host::{ContentBlock, Tool, ToolOrigin};
use airlock_host::{Descriptor, SafetyFlags};
use serde_json::json;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// Runs `print` on stdout and flushes it. A closed pipe is no failure (the
/// reader has what it wanted, and the output stops there); any other write
/// error is returned as a message.
pub(crate) fn to_stdout(
    print: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), String> {
    let mut out = io::stdout().lock();
    match print(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write the output: {e}"))
        }
        _ => Ok(()),
    }
}

/// Prints `text` and a newline on stdout ([`to_stdout`]; the `say!`
/// macro): a closed pipe drops it, any other write error is reported on
/// stderr.
pub(crate) fn say(text: std::fmt::Arguments<'_>) {
    if let Err(e) = to_stdout(|out| writeln!(out, "{text}")) {
        eprintln!("airlock: {e}");
    }
}

/// One-letter codes for the flags, in the order of [`SafetyFlags::NAMED`].
const FLAG_CODES: [char; 8] = ['R', 'C', 'D', 'I', 'O', 'S', 'U', 'X'];

/// The flags as a fixed-width code string, `-` for each flag not set.
pub(crate) fn flag_codes(flags: SafetyFlags) -> String {
    SafetyFlags::NAMED
        .iter()
        .zip(FLAG_CODES)
        .map(|((flag, _), code)| if flags.contains(*flag) { code } else { '-' })
        .collect()
}

fn terminal(text: &str) -> String {
    sanitize::clean(text, Sink::Terminal).text.into_owned()
}

/// What fails in a tool whose `denied` imports are linked deny-all.
fn deny_all_effect(denied: &[String]) -> String {
    let has = |package: &str| denied.iter().any(|i| i.starts_with(package));
    let mut effects = Vec::new();
    if has("wasi:sockets/") {
        effects.push("every socket and name lookup fails");
    }
    if has("wasi:http/") {
        effects.push("every HTTP request is refused");
    }
    effects.join("; ")
}
fn one_line(text: &str, max: usize) -> String {
    sanitize::clean_capped(text, Sink::Line, max)
}

fn network(d: &Descriptor) -> String {
    if d.capabilities.network_hosts.is_empty() {
        "-".into()
    } else {
        d.capabilities.network_hosts.join(",")
    }
}

/// Where a tool comes from, in a few characters: `bundled`, `built-in`,
/// `native`, `mcp:SERVER`, or the component's file name.
fn source(origin: &ToolOrigin) -> String {
    match origin {
        ToolOrigin::Bundled(_) => "bundled".into(),
        ToolOrigin::Builtin => "built-in".into(),
        ToolOrigin::Native => "native".into(),
        ToolOrigin::Mcp(server) => format!("mcp:{}", one_line(server, 30)),
        ToolOrigin::File(path) => {
            one_line(&path.file_name().unwrap_or_default().to_string_lossy(), 40)
        }
    }
}

/// Prints the tools, as a table or JSON, and the unavailable ones.
/// An API whose tool definitions `airlock list --format` prints.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Format {
    /// The Anthropic Messages API (`tools[]`).
    Anthropic,
    /// The OpenAI Responses API.
    Openai,
    /// OpenAI Chat Completions.
    OpenaiChat,
    /// MCP `tools/list` entries.
    Mcp,
}

/// Prints every tool's definition for `format` as a JSON array on stdout,
/// and what the API would refuse (or why a schema is not strict) on stderr.
pub(crate) fn definitions(
    airlock: &Airlock,
    format: Format,
    out: &mut dyn Write,
) -> io::Result<()> {
    use airlock_host::adapters::{anthropic, mcp, openai};
    let mut defs = Vec::new();
    for entry in airlock.registry().entries() {
        let d = entry.descriptor();
        let (def, problems) = match format {
            Format::Anthropic => (anthropic::tool_definition(d), anthropic::lint(d)),
            Format::Openai => (
                openai::tool_definition(d, openai::Api::Responses),
                openai::lint(d),
            ),
            Format::OpenaiChat => (
                openai::tool_definition(d, openai::Api::ChatCompletions),
                openai::lint(d),
            ),
            Format::Mcp => (mcp::tool_definition(d), mcp::lint(d)),
        };
        for problem in problems {
            eprintln!("airlock: {}: {problem}", d.name);
        }
        defs.push(def);
    }
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&defs).unwrap_or_default()
    )
}

pub(crate) fn list(airlock: &Airlock, as_json: bool, out: &mut dyn Write) -> io::Result<()> {
    let entries = airlock.registry().entries();
    let failures = airlock.registry().failures();
    if as_json {
        let tools: Vec<_> = entries
            .iter()
            .map(|e| {
                let d = e.descriptor();
                json!({
                    "name": d.name,
                    "title": d.title,
                    "description": d.description,
                    "flags": d.flags,
                    "interrupt": d.interrupt,
                    "defer_loading": d.defer_loading,
                    "capabilities": d.capabilities,
                    "version": d.version,
                    "origin": e.tool.origin(),
                    "deny_all_imports": e.tool.deny_all_imports(),
                })
            })
            .collect();
        let unavailable: Vec<_> = failures
            .iter()
            .map(|f| json!({"tool": f.tool, "origin": f.origin, "error": f.error.to_string()}))
            .collect();
        let skills = airlock.skills();
        let listed: Vec<_> = skills
            .skills
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "dir": s.dir}))
            .collect();
        let refused: Vec<_> = skills
            .failures
            .iter()
            .map(|f| json!({"dir": f.dir, "error": f.reason}))
            .collect();
        let all = json!({"tools": tools, "unavailable": unavailable,
            "skills": listed, "unavailable_skills": refused});
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&all).unwrap_or_default()
        );
    }
    let rows: Vec<[String; 6]> = entries
        .iter()
        .map(|e| {
            let d = e.descriptor();
            [
                d.name.clone(),
                flag_codes(d.flags),
                d.capabilities.workspace.to_string(),
                network(d),
                source(e.tool.origin()),
                one_line(&d.description, 70),
            ]
        })
        .collect();
    let header = [
        "TOOL",
        "FLAGS",
        "WORKSPACE",
        "NETWORK",
        "SOURCE",
        "DESCRIPTION",
    ]
    .map(String::from);
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    writeln!(
        out,
        "\nFLAGS: R read-only, C concurrency-safe, D destructive, I idempotent, O open-world, \
         S search-or-read, U requires-user-interaction, X cancels-siblings-on-error"
    )?;
    if entries.is_empty() {
        writeln!(out, "(no tools loaded)")?;
    }
    for e in entries.iter() {
        let denied = e.tool.deny_all_imports();
        if !denied.is_empty() {
            writeln!(
                out,
                "{} imports {}: linked deny-all ({})",
                e.descriptor().name,
                one_line(&denied.join(", "), 400),
                deny_all_effect(&denied)
            )?;
        }
    }
    let skills = airlock.skills();
    if !skills.is_empty() {
        let w = skills
            .skills
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0)
            .max(5);
        writeln!(out, "\n{:<w$}  DESCRIPTION", "SKILL")?;
        for skill in &skills.skills {
            let description = one_line(&skill.description, 100);
            writeln!(out, "{:<w$}  {description}", skill.name)?;
        }
    }
    for failure in failures {
        eprintln!("unavailable: {}", one_line(&failure.to_string(), 400));
    }
    for failure in &skills.failures {
        eprintln!("unavailable skill: {}", one_line(&failure.to_string(), 400));
    }
    Ok(())
}

/// Prints one tool in full.
pub(crate) fn describe(entry: &Entry, as_json: bool, out: &mut dyn Write) -> io::Result<()> {
    describe_tool(
        entry.tool.as_ref(),
        entry.descriptor(),
        Ok(&entry.grants),
        as_json,
        out,
    )
}

/// Prints a tool that loaded but is not offered (`why`): what it is and
/// what it asks for, so an operator can decide what to grant.
pub(crate) fn describe_refused(
    tool: &dyn Tool,
    why: &str,
    as_json: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    describe_tool(tool, tool.descriptor(), Err(why), as_json, out)
}

/// One tool in full, with its grants or why it is unavailable.
fn describe_tool(
    tool: &dyn Tool,
    d: &Descriptor,
    granted: Result<&ToolGrants, &str>,
    as_json: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    if as_json {
        let mut value = serde_json::to_value(d).unwrap_or_default();
        value["origin"] = serde_json::to_value(tool.origin()).unwrap_or_default();
        value["deny_all_imports"] = tool.deny_all_imports().into();
        if let Err(why) = granted {
            value["unavailable"] = why.into();
        }
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    }
    writeln!(
        out,
        "{} — {}  (version {}, {})",
        d.name,
        one_line(&d.title, 80),
        one_line(&d.version, 40),
        tool.origin()
    )?;
    if !d.aliases.is_empty() {
        writeln!(out, "aliases:     {}", d.aliases.join(", "))?;
    }
    writeln!(out, "flags:       {}", d.flags)?;
    writeln!(out, "interrupt:   {:?}", d.interrupt)?;
    writeln!(
        out,
        "asks for:    workspace {}, network {}, env {}",
        d.capabilities.workspace,
        network(d),
        if d.capabilities.env_vars.is_empty() {
            "-".into()
        } else {
            d.capabilities.env_vars.join(",")
        }
    )?;
    match granted {
        Ok(g) => {
            let workspace = match &g.workspace {
                Some((ws, access)) => {
                    format!("{} ({})", ws.guest, access.min(&d.capabilities.workspace))
                }
                None => "none granted".into(),
            };
            writeln!(
                out,
                "granted:     workspace {workspace}, network {}, env {}, timeout {} ms",
                if g.network.is_empty() {
                    "-".into()
                } else {
                    g.network.join(",")
                },
                if g.env.is_empty() {
                    "-".into()
                } else {
                    g.env.join(",")
                },
                g.timeout.as_millis()
            )?;
        }
        Err(why) => writeln!(out, "unavailable: {}", one_line(why, 400))?,
    }
    let denied = tool.deny_all_imports();
    if !denied.is_empty() {
        writeln!(
            out,
            "deny-all:    {} (linked; {})",
            one_line(&denied.join(", "), 400),
            deny_all_effect(&denied)
        )?;
    }
    writeln!(out, "max result:  {} characters", d.max_result_size)?;
    writeln!(out, "\n{}\n", terminal(&d.prompt))?;
    writeln!(
        out,
        "input schema:\n{}",
        serde_json::to_string_pretty(&d.input_schema).unwrap_or_default()
    )?;
    if let Some(schema) = &d.output_schema {
        writeln!(
            out,
            "output schema:\n{}",
            serde_json::to_string_pretty(schema).unwrap_or_default()
        )?;
    }
    Ok(())
}

/// How often progress lines go out: each one on a terminal, where a person
/// watches; at most one a second elsewhere (a log file, a pipe), where a
/// tool reporting every 100 ms would bury everything else.
pub(crate) struct Throttle {
    every: Duration,
    last: Option<Instant>,
}

impl Throttle {
    /// The throttle for stderr, as it is now (a terminal or not).
    pub(crate) fn for_stderr() -> Throttle {
        let terminal = io::IsTerminal::is_terminal(&io::stderr());
        Throttle {
            every: if terminal {
                Duration::ZERO
            } else {
                Duration::from_secs(1)
            },
            last: None,
        }
    }

    /// Whether a line may go out now (the first always may).
    pub(crate) fn admits(&mut self) -> bool {
        let now = Instant::now();
        if self.last.is_some_and(|last| now - last < self.every) {
            return false;
        }
        self.last = Some(now);
        true
    }
}

/// A progress event as one line.
pub(crate) fn progress_line(event: &ProgressEvent) -> String {
    match event.fraction {
        Some(f) => format!("  … {} ({:.0}%)", one_line(&event.message, 200), f * 100.0),
        None => format!("  … {}", one_line(&event.message, 200)),
    }
}

/// The content of a result, as text for the terminal.
pub(crate) fn content_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => terminal(t),
            ContentBlock::Json(v) => serde_json::to_string_pretty(v).unwrap_or_default(),
            ContentBlock::Image { mime_type, data } => {
                format!("[image: {mime_type}, {} bytes]", data.len())
            }
            ContentBlock::ResourceLink { uri, name, .. } => {
                format!("[{}]({})", one_line(name, 200), one_line(uri, 400))
            }
            ContentBlock::ToolReference { definition, .. } => {
                serde_json::to_string_pretty(definition).unwrap_or_default()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints a result: all of it as JSON, or the content on `out` and an
/// error on stderr.
pub(crate) fn result(result: &ToolResult, as_json: bool, out: &mut dyn Write) -> io::Result<()> {
    if as_json {
        return writeln!(out, "{}", result_json(result));
    }
    let written = match &result.outcome {
        Ok(output) => writeln!(out, "{}", content_text(&output.content)),
        Err(e) => {
            eprintln!("error ({}): {}", e.class, terminal(&e.message));
            Ok(())
        }
    };
    for refused in &result.refused_changes {
        eprintln!("note: {}", terminal(refused));
    }
    written
}

/// A result as JSON.
fn result_json(result: &ToolResult) -> String {
    let outcome = match &result.outcome {
        Ok(output) => json!({"output": output}),
        Err(e) => json!({"error": e}),
    };
    let mut value = json!({
        "id": result.id,
        "name": result.name,
        "flags": result.flags,
        "duration_ms": result.duration.as_secs_f64() * 1000.0,
        "refused_changes": result.refused_changes,
    });
    if let (Some(obj), Some(extra)) = (value.as_object_mut(), outcome.as_object()) {
        obj.extend(extra.clone());
    }
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_codes_are_positional() {
        assert_eq!(flag_codes(SafetyFlags::empty()), "--------");
        assert_eq!(
            flag_codes(SafetyFlags::READ_ONLY | SafetyFlags::SEARCH_OR_READ),
            "R----S--"
        );
    }
}
