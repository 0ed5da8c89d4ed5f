//! `airlock run`: feeds tool uses to the streaming executor, as they
//! arrive, and prints one JSON line per result, in order.
//!
//! Input (a file or stdin), one JSON value per line:
//! - tool uses: `{"id", "name", "input"}`;
//! - or a recorded Anthropic event stream: the events' JSON, raw or as SSE
//!   `data:` lines (`event:` lines and blank lines are skipped). A tool-use
//!   block whose JSON does not parse gets an `is_error` result.
//!
//! Either kind may carry `"t_ms"`, the time since the stream began; with
//! `--replay-timing` each line is fed at its time, as a model would stream
//! it. Output: `{"tool_use_id", "is_error", "content"}` per result;
//! `--timeline FILE` writes `{"tool_use_id", "event", "t_ms"}` lines
//! (queued, started, finished).

use airlock_host::ToolUse;
use airlock_host::adapters::anthropic::StreamAssembler;
use airlock_host::{ExecutorEvent, ExecutorHandle};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

/// Runs the executor over `input` (`-` for stdin). Returns whether every
/// use succeeded, or why the input could not be used.
pub(crate) async fn uses_from(
    airlock: &airlock_host::Airlock,
    input: &str,
    replay_timing: bool,
    timeline: Option<&Path>,
) -> Result<bool, String> {
    let reader: Box<dyn tokio::io::AsyncRead + Unpin + Send> = if input == "-" {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(
            tokio::fs::File::open(input)
                .await
                .map_err(|e| format!("cannot open {input}: {e}"))?,
        )
    };
    let mut timeline = match timeline {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
        )),
        None => None,
    };

    let mut executor = airlock.executor(airlock.context());
    let handle = executor.handle();
    let interrupt = interrupt_on_ctrl_c(&handle);
    // The loop runs as a task of its own, on the runtime's workers beside
    // the scheduler's task, rather than on the thread blocked in `main`:
    // a result then wakes a task on the same worker instead of another
    // thread (about 13,600 futex calls for 2,000 `cd` uses before, 240
    // after).
    let looping = tokio::spawn(async move {
        let feeding = feed(&handle, reader, replay_timing);
        let mut all_ok = true;
        let mut fed: Option<Result<(), String>> = None;
        tokio::pin!(feeding);
        loop {
            tokio::select! {
                result = &mut feeding, if fed.is_none() => {
                    handle.close();
                    fed = Some(result);
                }
                event = executor.next() => {
                    let Some(event) = event else { break };
                    all_ok &= print_event(&event, timeline.as_mut());
                }
            }
        }
        (all_ok, fed, timeline)
    });
    let outcome = looping.await;
    interrupt.abort();
    let (all_ok, fed, mut timeline) =
        outcome.map_err(|e| format!("the executor's loop failed: {e}"))?;
    if let Some(file) = &mut timeline {
        file.flush()
            .map_err(|e| format!("cannot write the timeline: {e}"))?;
    }
    fed.unwrap_or(Ok(()))?;
    Ok(all_ok)
}

/// Interrupts the executor on Ctrl-C.
fn interrupt_on_ctrl_c(handle: &ExecutorHandle) -> tokio::task::JoinHandle<()> {
    let handle = handle.clone();
    super::signals::handle_interrupt_here();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("airlock: interrupted");
            super::signals::note_interrupt();
            handle.interrupt();
        }
    })
}

/// Prints a result line or a timeline line; returns false for a failed use.
fn print_event(
    event: &ExecutorEvent,
    timeline: Option<&mut std::io::BufWriter<std::fs::File>>,
) -> bool {
    match event {
        ExecutorEvent::Result(result) => {
            let line = json!({
                "tool_use_id": result.id,
                "is_error": result.is_error(),
                "content": result.text(),
            });
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
            !result.is_error()
        }
        ExecutorEvent::Progress(p) => {
            eprintln!("{}", super::render::progress_line(p));
            true
        }
        // Already in the host's log (stderr, at the level `-v` or `AIRLOCK_LOG` asks).
        ExecutorEvent::Log(_) => true,
        ExecutorEvent::Queued { tool_use_id, at }
        | ExecutorEvent::Started { tool_use_id, at }
        | ExecutorEvent::Finished { tool_use_id, at } => {
            if let Some(file) = timeline {
                let name = match event {
                    ExecutorEvent::Queued { .. } => "queued",
                    ExecutorEvent::Started { .. } => "started",
                    _ => "finished",
                };
                let ms = (at.as_secs_f64() * 1_000_000.0).round() / 1000.0;
                let _ = writeln!(
                    file,
                    "{}",
                    json!({"tool_use_id": tool_use_id, "event": name, "t_ms": ms})
                );
            }
            true
        }
    }
}

/// Reads the input line by line and feeds the executor.
async fn feed(
    executor: &ExecutorHandle,
    reader: Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    replay_timing: bool,
) -> Result<(), String> {
    let mut lines = tokio::io::BufReader::new(reader).lines();
    let mut assembler = StreamAssembler::new();
    let started = Instant::now();
    let mut number = 0usize;
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| format!("cannot read the input: {e}"))?
    {
        number += 1;
        let text = line.trim();
        let text = text.strip_prefix("data:").map_or(text, str::trim);
        if text.is_empty() || text.starts_with("event:") || text.starts_with(':') {
            continue;
        }
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("line {number} is not JSON: {e}"))?;
        if replay_timing && let Some(ms) = value.get("t_ms").and_then(Value::as_f64) {
            let due = started + Duration::from_secs_f64(ms.max(0.0) / 1000.0);
            tokio::time::sleep_until(due.into()).await;
        }
        if value.get("type").and_then(Value::as_str).is_some() {
            if let Some(assembled) = assembler.push(&value) {
                assembled.feed(executor);
            }
        } else if let (Some(name), Some(input)) = (
            value.get("name").and_then(Value::as_str),
            value.get("input"),
        ) {
            let id = value
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("use-{number}"), str::to_string);
            executor.add(ToolUse::new(id, name, input.clone()));
        } else {
            return Err(format!(
                "line {number} is neither a tool use ({{\"id\", \"name\", \"input\"}}) nor an Anthropic stream event"
            ));
        }
    }
    Ok(())
}
