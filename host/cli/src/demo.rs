//! `airlock demo`: the main job on the bundled tools. It copies a small
//! sample project into a temporary workspace, starts a one-page HTTP server
//! on loopback (the only host `fetch` is granted), and plays seven model
//! turns through the streaming executor, the path every front end uses:
//! reads that overlap, edits that run alone, a skill loaded and its script
//! run from its read-only folder, a `cd` whose context change the next
//! calls see, a shell, waiting and the network, and refusals; then, where
//! `git` is installed and this system can confine programs, two turns of
//! the machine's `git` run by `bash` under the same grants (a commit, and
//! a reviewer's read-only view whose commit the kernel refuses). It prints
//! each result with its effective flags and a timeline of each turn; some
//! calls are meant to be refused, and the demo fails if any outcome is not
//! the expected one.

use super::render;
use airlock_host::Airlock;
use airlock_host::Config;
use airlock_host::ExecutorEvent;
use airlock_host::PermissionMode;
use airlock_host::ToolUse;
use airlock_host::WorkspaceAccess;
use airlock_host::config::ToolConfig;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The demo's skill: instructions, and a script they name.
const SKILL: &[(&str, &str)] = &[
    (
        "release-check/SKILL.md",
        "---\nname: release-check\ndescription: Checks a project is ready to release.\n---\n\
         Run `bash /skills/release-check/scripts/check.sh` in the project, then fix what it \
         reports.\n",
    ),
    (
        "release-check/scripts/check.sh",
        "test -f README.md && echo 'README.md: present' || echo 'README.md: missing'\n\
         echo \"source files: $(find . -name '*.rs' | wc -l)\"\n",
    ),
];

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
    (".gitignore", "target/\n.env\n"),
    (".env", "API_KEY=do-not-leak\n"),
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
}

struct Turn {
    title: &'static str,
    steps: Vec<Step>,
    /// Played by the reviewer: the same tools with the workspace read-only.
    reviewer: bool,
}

/// Who commits in the demo's repository.
const GIT_USER: &str = "-c user.name=demo -c user.email=demo@example.invalid";

fn script(port: u16) -> Vec<Turn> {
    let ok = |tool, input| Step {
        tool,
        input,
        expect_ok: true,
    };
    let refused = |tool, input| Step {
        tool,
        input,
        expect_ok: false,
    };
    vec![
        Turn {
            reviewer: false,
            title: "the model explores: four reads in one message run side by side",
            steps: vec![
                ok("ls", json!({})),
                ok("glob", json!({"pattern": "**/*.rs"})),
                ok(
                    "grep",
                    json!({"pattern": "fn \\w+", "output_mode": "content", "-n": true}),
                ),
                ok("read", json!({"file_path": "src/lib.rs"})),
            ],
        },
        Turn {
            reviewer: false,
            title: "the model edits: edits run alone, in order; an unread file is refused",
            steps: vec![
                ok(
                    "edit",
                    json!({"file_path": "src/lib.rs", "old_string": "Hello, {name}!", "new_string": "Hello, {name}! Welcome to Airlock."}),
                ),
                refused(
                    "edit",
                    json!({"file_path": "src/main.rs", "old_string": "world", "new_string": "moon"}),
                ),
                ok(
                    "write",
                    json!({"file_path": "notes/todo.md", "content": "- try the demo\n"}),
                ),
            ],
        },
        Turn {
            reviewer: false,
            title: "a skill: its instructions loaded, its script run from its read-only folder",
            steps: vec![
                ok("skill", json!({"skill": "release-check"})),
                ok(
                    "bash",
                    json!({"command": "bash /skills/release-check/scripts/check.sh"}),
                ),
                refused(
                    "bash",
                    json!({"command": "echo tampered >> /skills/release-check/SKILL.md"}),
                ),
            ],
        },
        Turn {
            reviewer: false,
            title: "a context change: the calls after `cd` see the new working directory",
            steps: vec![
                ok("cd", json!({"path": "src"})),
                ok("ls", json!({})),
                ok("read", json!({"file_path": "../README.md", "limit": 3})),
            ],
        },
        Turn {
            reviewer: false,
            title: "a shell in the sandbox: reading lines run side by side, a writing one alone",
            steps: vec![
                ok("bash", json!({"command": "grep -c fn *.rs"})),
                ok(
                    "bash",
                    json!({"command": "find ../src -type f | sort | head -n 4"}),
                ),
                ok(
                    "bash",
                    json!({"command": "echo '- try the shell' >> ../notes/todo.md && cat ../notes/todo.md"}),
                ),
                refused("bash", json!({"command": "python3 --version"})),
            ],
        },
        Turn {
            reviewer: false,
            title: "waiting and the network: fetch reaches only the granted host",
            steps: vec![
                ok("sleep", json!({"ms": 300})),
                ok(
                    "fetch",
                    json!({"url": format!("http://127.0.0.1:{port}/hello")}),
                ),
                refused("fetch", json!({"url": "https://example.com/"})),
            ],
        },
        Turn {
            reviewer: false,
            title: "refusals: outside the workspace, a deny rule, an invalid regex",
            steps: vec![
                refused("read", json!({"file_path": "/etc/passwd"})),
                refused("read", json!({"file_path": "../.env"})),
                refused("grep", json!({"pattern": "(unclosed"})),
            ],
        },
    ]
}

/// The turns of the machine's `git`, granted to `bash`: the main agent
/// reads and commits; a reviewer, whose workspace is read-only, reads and
/// is refused its commit.
fn git_script() -> Vec<Turn> {
    let bash = |command: String, expect_ok| Step {
        tool: "bash",
        input: json!({ "command": command }),
        expect_ok,
    };
    vec![
        Turn {
            title: "the machine's git, confined to the call's grants: reads side by side, a commit alone",
            reviewer: false,
            steps: vec![
                bash("git status --short".into(), true),
                bash("git log --oneline".into(), true),
                bash(
                    format!(
                        "git add -A && git {GIT_USER} commit -qm 'the demo edits' && git log --oneline"
                    ),
                    true,
                ),
            ],
        },
        Turn {
            title: "a reviewer with the workspace read-only: git reads; the kernel refuses its commit",
            reviewer: true,
            steps: vec![
                bash("git log --oneline | head -n 1".into(), true),
                bash(
                    format!("git {GIT_USER} commit --allow-empty -qm review"),
                    false,
                ),
            ],
        },
    ]
}

/// Whether the git turns can run here: `git` on PATH, and programs
/// confined (else why not, for the demo to say).
fn git_available() -> Result<(), String> {
    let found = std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        return Err("git is not installed".into());
    }
    let helper = airlock_host::native::Helper::at(None).map_err(|e| e.to_string())?;
    helper.check().map_err(|e| e.to_string())
}

/// Makes the workspace a repository with one commit of the sample, from
/// the host's side (as the user's own checkout would be).
fn init_repository(workspace: &std::path::Path) -> anyhow::Result<()> {
    let git = |args: &[&str]| -> anyhow::Result<()> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(workspace)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    git(&["init", "-q"])?;
    git(&["add", "README.md", "Cargo.toml", "src", ".gitignore"])?;
    let mut commit: Vec<&str> = GIT_USER.split(' ').collect();
    commit.extend(["commit", "-qm", "the sample project"]);
    git(&commit)
}

/// Runs the demo.
pub(crate) async fn play() -> ExitCode {
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

    // One skill, in a directory of the demo's own (the user's skills are
    // not read, so the demo plays the same everywhere).
    let skills = tempfile::Builder::new()
        .prefix("airlock-demo-skills-")
        .tempdir()?;
    for (path, content) in SKILL {
        let path = skills.path().join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    let mut config = Config {
        workspace: Some(workspace.path().to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.skills.dirs = Some(vec![skills.path().to_path_buf()]);
    config.skills.claude = false;
    config.tools.insert(
        "fetch".into(),
        ToolConfig {
            network: vec!["127.0.0.1".into()],
            ..ToolConfig::default()
        },
    );
    config.permissions.default_mode = PermissionMode::AcceptEdits;
    config.permissions.deny = vec!["Read(/.env)".into()];
    let git = git_available();
    if git.is_ok() {
        let shell = config.tools.entry("bash".into()).or_default();
        shell.programs = vec!["git".into()];
    }
    let mut reviewing = config.clone();
    reviewing.workspace_access = WorkspaceAccess::Read;
    let started = Instant::now();
    let airlock = Airlock::new(config).await?;
    let mut cx = airlock.context();
    say!(
        "Airlock demo: {} tools loaded in {} ms; workspace {}",
        airlock.registry().len(),
        started.elapsed().as_millis(),
        cx.cwd()
    );
    for failure in airlock.registry().failures() {
        say!("  unavailable: {failure}");
    }
    let programs = match &git {
        Ok(()) => "bash may run the machine's git, confined by each call's grants".to_string(),
        Err(why) => format!("no programs (the git turns are skipped: {why})"),
    };
    say!(
        "Grants: the workspace read-write; fetch may reach 127.0.0.1 only; {programs}; \
         nothing else.\n\
         Permissions: acceptEdits mode; the rule Read(/.env) denies reading the .env file.\n"
    );

    let mut turns = script(port);
    let reviewer = match git {
        Ok(()) => {
            init_repository(workspace.path())?;
            turns.extend(git_script());
            Some(Airlock::new(reviewing).await?)
        }
        Err(_) => None,
    };
    let total: usize = turns.iter().map(|t| t.steps.len()).sum();
    let mut surprises = Vec::new();
    let mut n = 0;
    for (t, turn) in turns.iter().enumerate() {
        say!("Turn {}: {}", t + 1, turn.title);
        let reviewer = reviewer.as_ref().filter(|_| turn.reviewer);
        let mut executor = match reviewer {
            Some(reviewer) => reviewer.executor(reviewer.context()),
            None => airlock.executor(cx.clone()),
        };
        for (i, step) in turn.steps.iter().enumerate() {
            executor.add(ToolUse::new(
                format!("t{}-{}", t + 1, i + 1),
                step.tool,
                step.input.clone(),
            ));
        }
        executor.close();
        let mut spans: HashMap<String, (Duration, Duration)> = HashMap::new();
        let mut i = 0;
        while let Some(event) = executor.next().await {
            match event {
                ExecutorEvent::Progress(p) => say!("    {}", render::progress_line(&p)),
                ExecutorEvent::Started { tool_use_id, at } => {
                    spans.entry(tool_use_id).or_insert((at, at)).0 = at;
                }
                ExecutorEvent::Finished { tool_use_id, at } => {
                    spans.entry(tool_use_id).or_insert((at, at)).1 = at;
                }
                ExecutorEvent::Queued { .. } | ExecutorEvent::Log(_) => {}
                ExecutorEvent::Result(result) => {
                    let step = &turn.steps[i];
                    i += 1;
                    n += 1;
                    say!("  [{n}/{total}] {} {}", step.tool, step.input);
                    if let Some(flags) = result.flags {
                        say!("      flags: {} ({flags})", render::flag_codes(flags));
                    }
                    let ms = result.duration.as_secs_f64() * 1000.0;
                    let text = match &result.outcome {
                        Ok(output) => {
                            say!("      ok in {ms:.1} ms");
                            render::content_text(&output.content)
                        }
                        Err(e) => {
                            say!("      refused in {ms:.1} ms ({})", e.class);
                            e.message.clone()
                        }
                    };
                    print_indented(&text);
                    if result.outcome.is_ok() != step.expect_ok {
                        surprises.push(format!(
                            "call {n} ({}) {} but was expected to {}",
                            step.tool,
                            if result.outcome.is_ok() {
                                "succeeded"
                            } else {
                                "failed"
                            },
                            if step.expect_ok { "succeed" } else { "fail" }
                        ));
                    }
                }
            }
        }
        let after = executor.into_context().await;
        if reviewer.is_none() {
            cx = after;
        }
        print_timeline(turn, t + 1, &spans);
        say!("      context: the cwd is {}\n", cx.cwd());
    }
    server.abort();

    let refused = turns
        .iter()
        .flat_map(|t| &t.steps)
        .filter(|s| !s.expect_ok)
        .count();
    if surprises.is_empty() {
        say!(
            "Done: {total} calls, {} succeeded and {refused} were refused, all as expected.",
            total - refused
        );
        Ok(true)
    } else {
        for s in &surprises {
            say!("UNEXPECTED: {s}");
        }
        Ok(false)
    }
}

/// Draws when each call of a turn ran, on a shared time axis.
fn print_timeline(turn: &Turn, t: usize, spans: &HashMap<String, (Duration, Duration)>) {
    const WIDTH: f64 = 40.0;
    let end = spans
        .values()
        .map(|s| s.1)
        .max()
        .unwrap_or_default()
        .as_secs_f64()
        .max(1e-3);
    say!("      timeline of turn {t} ({:.1} ms):", end * 1000.0);
    for (i, step) in turn.steps.iter().enumerate() {
        let Some((from, to)) = spans.get(&format!("t{t}-{}", i + 1)) else {
            continue;
        };
        let a = (from.as_secs_f64() / end * WIDTH).round() as usize;
        let b = ((to.as_secs_f64() / end * WIDTH).round() as usize).max(a + 1);
        let bar: String = (0..WIDTH as usize)
            .map(|c| if c >= a && c < b { '#' } else { '.' })
            .collect();
        say!(
            "        {:<6} {bar} {:>7.1} → {:>7.1} ms",
            step.tool,
            from.as_secs_f64() * 1000.0,
            to.as_secs_f64() * 1000.0
        );
    }
}

fn print_indented(text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(SHOWN_LINES) {
        say!("      | {line}");
    }
    if lines.len() > SHOWN_LINES {
        say!("      | … ({} more lines)", lines.len() - SHOWN_LINES);
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
