//! `airlock demo`: the main job on the bundled tools. It copies a small
//! sample project into a temporary workspace, starts a one-page HTTP server
//! on loopback (the only host `fetch` is granted), and runs a scripted
//! sequence of calls through the same pipeline every front end uses,
//! printing each call, its effective flags and its result. Some calls are
//! meant to be refused; the demo fails if any outcome is not the expected one.

use super::render;
use crate::Airlock;
use crate::config::{Config, ToolConfig};
use crate::pipeline::{CallControl, ToolUse};
use crate::tool::ProgressSink;
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The sample project: (path, content).
const SAMPLE: &[(&str, &str)] = &[
    (
        "README.md",
        "# greeter\n\nA tiny sample project for the Airlock demo.\n\nRun it with `cargo run`.\n",
    ),
    (
        "Cargo.toml",
        "[package]\nname = \"greeter\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    ),
    (
        "src/main.rs",
        "fn main() {\n    println!(\"{}\", greeter::greet(\"world\"));\n}\n",
    ),
    (
        "src/lib.rs",
        "/// Returns a greeting for `name`.\npub fn greet(name: &str) -> String {\n    format!(\"Hello, {name}!\")\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn greets() {\n        assert_eq!(super::greet(\"a\"), \"Hello, a!\");\n    }\n}\n",
    ),
    (".gitignore", "target/\n"),
    (
        "target/debug/generated.rs",
        "fn generated_and_ignored() {}\n",
    ),
];

const PAGE: &str = "Hello from a loopback server. Airlock let this request through because the \
                    operator granted fetch the host 127.0.0.1.\n";

/// How many lines of each result the demo prints.
const SHOWN_LINES: usize = 12;

struct Step {
    tool: &'static str,
    input: Value,
    expect_ok: bool,
    why: &'static str,
}

fn script(port: u16) -> Vec<Step> {
    let step = |tool, input, expect_ok, why| Step {
        tool,
        input,
        expect_ok,
        why,
    };
    vec![
        step(
            "ls",
            json!({}),
            true,
            "list the workspace (the cwd starts there)",
        ),
        step(
            "glob",
            json!({"pattern": "**/*.rs"}),
            true,
            "find Rust files, newest first (.gitignore does not apply)",
        ),
        step(
            "grep",
            json!({"pattern": "fn \\w+", "output_mode": "content", "-n": true}),
            true,
            "search contents with ripgrep's engine (.gitignore applies: target/ is skipped)",
        ),
        step(
            "read",
            json!({"file_path": "src/lib.rs"}),
            true,
            "read a file; the read is recorded",
        ),
        step(
            "edit",
            json!({"file_path": "src/lib.rs", "old_string": "Hello, {name}!", "new_string": "Hello, {name}! Welcome to Airlock."}),
            true,
            "edit the file just read",
        ),
        step(
            "edit",
            json!({"file_path": "src/main.rs", "old_string": "world", "new_string": "moon"}),
            false,
            "edit a file that was never read: refused",
        ),
        step(
            "write",
            json!({"file_path": "notes/todo.md", "content": "- try the demo\n"}),
            true,
            "write a new file (atomically, creating notes/)",
        ),
        step(
            "cd",
            json!({"path": "src"}),
            true,
            "change the working directory (a context change)",
        ),
        step(
            "ls",
            json!({}),
            true,
            "relative paths now resolve against src/",
        ),
        step(
            "read",
            json!({"file_path": "../README.md", "limit": 3}),
            true,
            "read with a relative path and a limit",
        ),
        step(
            "sleep",
            json!({"ms": 300}),
            true,
            "wait, reporting progress",
        ),
        step(
            "fetch",
            json!({"url": format!("http://127.0.0.1:{port}/hello")}),
            true,
            "fetch from the one host the operator granted",
        ),
        step(
            "fetch",
            json!({"url": "https://example.com/"}),
            false,
            "fetch from a host nobody granted: refused before any connection",
        ),
        step(
            "read",
            json!({"file_path": "/etc/passwd"}),
            false,
            "read outside the workspace: refused",
        ),
        step(
            "grep",
            json!({"pattern": "(unclosed"}),
            false,
            "an invalid regular expression: refused by the tool's own validation",
        ),
    ]
}

/// Runs the demo.
pub(crate) async fn run() -> ExitCode {
    match demo().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(super::EXIT_CALL_FAILED),
        Err(e) => {
            eprintln!("airlock demo: {e:#}");
            ExitCode::from(super::EXIT_CONFIG)
        }
    }
}

async fn demo() -> anyhow::Result<bool> {
    let workspace = tempfile::Builder::new().prefix("airlock-demo-").tempdir()?;
    for (path, content) in SAMPLE {
        let path = workspace.path().join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let server = tokio::spawn(serve(listener));

    let mut config = Config {
        workspace: Some(workspace.path().to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.tools.insert(
        "fetch".into(),
        ToolConfig {
            network: vec!["127.0.0.1".into()],
            ..ToolConfig::default()
        },
    );
    let started = Instant::now();
    let airlock = Airlock::new(config).await?;
    println!(
        "Airlock demo: {} bundled tools loaded in {} ms; workspace {}",
        airlock.registry().len(),
        started.elapsed().as_millis(),
        airlock.context().cwd()
    );
    for failure in airlock.registry().failures() {
        println!("  unavailable: {failure}");
    }
    println!("Grants: the workspace read-write; fetch may reach 127.0.0.1 only; nothing else.\n");

    let steps = script(port);
    let mut cx = airlock.context();
    let mut surprises = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        println!("[{}/{}] {} {}", i + 1, steps.len(), step.tool, step.input);
        println!("      why: {}", step.why);
        let (progress, mut events) = ProgressSink::channel(16);
        let printer = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                println!("    {}", render::progress_line(&event));
            }
        });
        let cwd_before = cx.cwd().to_string();
        let tool_use = ToolUse::new(format!("demo-{}", i + 1), step.tool, step.input.clone());
        let result = airlock
            .call_with(
                &mut cx,
                tool_use,
                CallControl {
                    progress,
                    ..CallControl::default()
                },
            )
            .await;
        let _ = printer.await;
        if let Some(flags) = result.flags {
            println!("      flags: {} ({flags})", render::flag_codes(flags));
        }
        let ms = result.duration.as_secs_f64() * 1000.0;
        let text = match &result.outcome {
            Ok(output) => {
                println!("      ok in {ms:.1} ms");
                render::content_text(&output.content)
            }
            Err(e) => {
                println!("      refused in {ms:.1} ms ({})", e.class);
                e.message.clone()
            }
        };
        print_indented(&text);
        if cx.cwd() != cwd_before {
            println!("      context: the cwd is now {}", cx.cwd());
        }
        if result.outcome.is_ok() != step.expect_ok {
            surprises.push(format!(
                "step {} ({}) {} but was expected to {}",
                i + 1,
                step.tool,
                if result.outcome.is_ok() {
                    "succeeded"
                } else {
                    "failed"
                },
                if step.expect_ok { "succeed" } else { "fail" }
            ));
        }
        println!();
    }
    server.abort();

    let refused = steps.iter().filter(|s| !s.expect_ok).count();
    if surprises.is_empty() {
        println!(
            "Done: {} calls, {} succeeded and {refused} were refused, all as expected.",
            steps.len(),
            steps.len() - refused
        );
        Ok(true)
    } else {
        for s in &surprises {
            println!("UNEXPECTED: {s}");
        }
        Ok(false)
    }
}

fn print_indented(text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(SHOWN_LINES) {
        println!("      | {line}");
    }
    if lines.len() > SHOWN_LINES {
        println!("      | … ({} more lines)", lines.len() - SHOWN_LINES);
    }
}

/// Answers every request on `listener` with [`PAGE`].
async fn serve(listener: tokio::net::TcpListener) {
    while let Ok((mut stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 << 10 {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PAGE}",
                PAGE.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
