//! `airlock test [DIR]`: a tool project's `tests.jsonl` run against its
//! built component in the real sandbox, as its users' calls will run.
//!
//! Each line of `tests.jsonl` is one call and what it must give:
//!
//! ```text
//! {"name": "counts words", "input": {"text": "one two"}, "expect": {"text": "2 words"}}
//! {"input": {"path": "a.txt"}, "files": {"a.txt": "hi\n"}, "expect": {"contains": "hi"}}
//! {"input": {"text": ""}, "expect": {"error": "invalid_input"}}
//! ```
//!
//! `expect` holds one or more of `text` (the result's text, exactly, ends
//! trimmed), `contains` (a part of it), `structured` (the structured output,
//! as JSON) and `error` (the error's class, e.g. `invalid_input`, `ENOENT`,
//! `tool_error`; with `contains`, a part of its message). Each call runs
//! alone in a fresh context, in a fresh temporary workspace granted
//! read-write and holding `files`, with every permission answered yes (the
//! project's own tool), loaded alone (no bundled tools or MCP servers);
//! the other grants are the command line's.

use crate::render::content_text;
use airlock_host::{AllowPrompter, Config, ToolOrigin, ToolUse};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// One line of `tests.jsonl`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What it checks; the line number when absent.
    name: Option<String>,
    /// The tool's input.
    input: Value,
    /// Files in the call's workspace: relative path → text.
    #[serde(default)]
    files: BTreeMap<String, String>,
    expect: Expect,
}

/// What the call must give.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    text: Option<String>,
    contains: Option<String>,
    structured: Option<Value>,
    error: Option<String>,
}

/// Runs `DIR/tests.jsonl` against the one component in `DIR`: a line per
/// call (`ok` or `FAIL`, and why), then the count; exits 1 when any failed.
pub(crate) async fn test(dir: &Path, config: Config) -> ExitCode {
    match run(dir, config).await {
        Ok((passed, 0)) => {
            say!("{passed} passed");
            ExitCode::SUCCESS
        }
        Ok((passed, failed)) => {
            say!("{passed} passed, {failed} failed");
            ExitCode::from(crate::EXIT_CALL_FAILED)
        }
        Err(e) => crate::author::fail(e),
    }
}

async fn run(dir: &Path, config: Config) -> Result<(usize, usize), String> {
    let component = component_in(dir)?;
    let cases = cases(&dir.join("tests.jsonl"))?;
    let tools = tempfile::tempdir().map_err(|e| format!("cannot make a directory: {e}"))?;
    std::fs::copy(&component, tools.path().join("tool.wasm"))
        .map_err(|e| format!("cannot read {}: {e}", component.display()))?;
    let (mut passed, mut failed) = (0, 0);
    for (line, case) in cases {
        let name = case.name.clone().unwrap_or_else(|| format!("line {line}"));
        match one(&case, tools.path(), &config).await {
            Ok(()) => {
                passed += 1;
                say!("ok    {name}");
            }
            Err(why) => {
                failed += 1;
                say!("FAIL  {name}: {why}");
            }
        }
    }
    Ok((passed, failed))
}

/// The component `airlock build` left in `dir`: its one `*.wasm`.
fn component_in(dir: &Path) -> Result<PathBuf, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    found.sort();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "there is no component in {}: build it first (airlock build {})",
            dir.display(),
            dir.display()
        )),
        several => Err(format!(
            "{} holds several components ({}): keep the one `airlock build` makes",
            dir.display(),
            several
                .iter()
                .filter_map(|p| p.file_name())
                .map(|n| n.to_string_lossy())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The cases of `file`, with their line numbers; blank lines are skipped.
fn cases(file: &Path) -> Result<Vec<(usize, Case)>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        format!(
            "{}: {e} (write a line per call: {{\"input\": {{...}}, \"expect\": {{\"text\": \"...\"}}}})",
            file.display()
        )
    })?;
    let cases: Vec<(usize, Case)> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .map(|case| (i + 1, case))
                .map_err(|e| format!("{}, line {}: {e}", file.display(), i + 1))
        })
        .collect::<Result<_, _>>()?;
    if cases.is_empty() {
        return Err(format!("{} holds no calls", file.display()));
    }
    Ok(cases)
}

/// Runs one case: `Ok` when the call gave what it expects.
async fn one(case: &Case, tools: &Path, config: &Config) -> Result<(), String> {
    let workspace = tempfile::tempdir().map_err(|e| format!("cannot make a workspace: {e}"))?;
    for (path, text) in &case.files {
        let relative = Path::new(path);
        if !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(format!(
                "files: {path:?} is not a path inside the workspace"
            ));
        }
        let file = workspace.path().join(relative);
        file.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file, text))
            .map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    let mut config = config.clone();
    config.workspace = Some(workspace.path().to_path_buf());
    let airlock = crate::author::load_alone(tools, config)
        .await?
        .with_prompter(Arc::new(AllowPrompter));
    let component = ToolOrigin::File(tools.join("tool.wasm"));
    let tool = airlock
        .registry()
        .entries()
        .into_iter()
        .find(|e| e.tool.origin() == &component)
        .map(|e| e.descriptor().name.clone());
    let Some(tool) = tool else {
        let why = airlock.registry().failures().first().map_or_else(
            || "it is switched off in the configuration".to_string(),
            |f| f.error.to_string(),
        );
        return Err(format!("the component does not load: {why}"));
    };
    let mut cx = airlock.context();
    let result = airlock
        .call(&mut cx, ToolUse::new("test-1", tool, case.input.clone()))
        .await;
    let expect = &case.expect;
    match (&result.outcome, &expect.error) {
        (Ok(output), None) => {
            let text = content_text(&output.content);
            if let Some(want) = &expect.text
                && text.trim_end() != want.trim_end()
            {
                return Err(format!("the text is {text:?}, not {want:?}"));
            }
            if let Some(part) = &expect.contains
                && !text.contains(part.as_str())
            {
                return Err(format!("the text {text:?} does not hold {part:?}"));
            }
            if let Some(want) = &expect.structured
                && output.structured.as_ref() != Some(want)
            {
                return Err(format!(
                    "the structured output is {}, not {want}",
                    output
                        .structured
                        .as_ref()
                        .map_or("none".into(), Value::to_string)
                ));
            }
            Ok(())
        }
        (Ok(output), Some(class)) => Err(format!(
            "it succeeded ({:?}), where an error of class {class} was expected",
            content_text(&output.content)
        )),
        (Err(e), None) => Err(format!("it failed: {} ({})", e.message, e.class)),
        (Err(e), Some(class)) => {
            if e.class.as_str() != class {
                return Err(format!(
                    "the error's class is {}, not {class}: {}",
                    e.class, e.message
                ));
            }
            match &expect.contains {
                Some(part) if !e.message.contains(part.as_str()) => {
                    Err(format!("the error {:?} does not hold {part:?}", e.message))
                }
                _ => Ok(()),
            }
        }
    }
}
