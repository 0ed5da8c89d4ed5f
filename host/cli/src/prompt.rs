//! Asking the person at the terminal for permission. The question goes to
//! the controlling terminal (`/dev/tty`), so it works while stdin carries
//! tool uses; without a terminal on stderr nobody is asked and the call is
//! denied, with a message that says how to allow it.

use airlock_host::sanitize::{self, Sink};
use airlock_host::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use async_trait::async_trait;
use std::io::{BufRead, BufReader, IsTerminal, Write};

/// Prompts on the terminal, one question at a time.
#[derive(Debug, Default)]
pub(crate) struct TerminalPrompter {
    one_at_a_time: tokio::sync::Mutex<()>,
}

#[async_trait]
impl PermissionPrompter for TerminalPrompter {
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer {
        let _turn = self.one_at_a_time.lock().await;
        let request = request.clone();
        tokio::task::spawn_blocking(move || ask_on_terminal(&request))
            .await
            .unwrap_or_else(|e| PermissionAnswer::Deny(Some(format!("the prompt failed: {e}"))))
    }
}

fn not_interactive(request: &PermissionRequest) -> PermissionAnswer {
    PermissionAnswer::Deny(Some(format!(
        "{} needs approval ({}), and airlock is not running on a terminal. Pass --yes to allow \
         every call, choose another --mode, or add an allow rule.",
        request.tool_name, request.reason
    )))
}

/// The controlling terminal, when airlock runs on one.
fn terminal() -> Option<std::fs::File> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()
}

/// Asks `question` (a yes/no question) on the terminal; `None` when there
/// is no terminal to ask on.
pub(crate) fn confirm(question: &str) -> Option<bool> {
    let tty = terminal()?;
    let mut out = &tty;
    let _ = write!(out, "{question} [y/N]: ");
    let _ = out.flush();
    let mut answer = String::new();
    BufReader::new(&tty).read_line(&mut answer).ok()?;
    Some(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

fn ask_on_terminal(request: &PermissionRequest) -> PermissionAnswer {
    let Some(tty) = terminal() else {
        return not_interactive(request);
    };
    let mut out = &tty;
    let input = sanitize::clean_capped(&request.input.to_string(), Sink::Line, 300);
    let _ = write!(
        out,
        "\nairlock: {} wants to run: {}\n  input: {input}\n  allow? [y]es, [n]o, [a]lways for this tool: ",
        request.tool_name,
        sanitize::clean_capped(&request.reason, Sink::Line, 300),
    );
    let _ = out.flush();
    let mut answer = String::new();
    if BufReader::new(&tty).read_line(&mut answer).is_err() {
        return not_interactive(request);
    }
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => PermissionAnswer::Allow,
        "a" | "always" => PermissionAnswer::AllowAlways,
        _ => PermissionAnswer::Deny(None),
    }
}
