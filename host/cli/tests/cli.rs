//! The `airlock` binary, run as a user runs it: exit codes, output, and the
//! demo. Each run gets an empty HOME so no user configuration or tool
//! directory leaks in.

use std::path::Path;
use std::process::{Command, Output};

#[path = "../../../tests/support/python.rs"]
mod python;

#[path = "../../../tests/support/componentize_py.rs"]
mod componentize_py;

#[path = "../../../tests/support/node.rs"]
mod node;

#[path = "../../../tests/support/debian.rs"]
mod debian;
#[path = "../../../tests/support/registry.rs"]
mod registry;

#[cfg(feature = "mcp")]
#[path = "../../../tests/support/modern.rs"]
#[allow(dead_code, reason = "shared with other tests, which use all of it")]
mod modern;

/// The audit trail: calls and changes recorded, verified, tampering found.
#[path = "parts/audit.rs"]
mod audit;

/// Skills: served over MCP, given by the `skill` tool, their scripts run.
#[cfg(feature = "mcp")]
#[path = "parts/skills.rs"]
mod skills;

/// The `airlock` binary with `args`, HOME set to `home`, the artifact cache
/// the tests share ([`airlock_tests::cache_home`]) and none of the user's
/// configuration in its environment.
fn command(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_airlock"));
    command
        .args(args)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", airlock_tests::cache_home())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("AIRLOCK_CONFIG")
        .env_remove("AIRLOCK_LOG");
    command
}

fn airlock(home: &Path, args: &[&str]) -> Output {
    command(home, args)
        .output()
        .expect("the airlock binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `command` at a terminal of its own (a pseudo-terminal that is its
/// controlling terminal, its stdin, stdout and stderr). Once the terminal
/// shows `prompt` and has echo turned off, types `typed`. Returns the exit
/// status and all the terminal showed.
#[cfg(unix)]
fn at_terminal(
    mut command: Command,
    prompt: &str,
    typed: &str,
) -> (std::process::ExitStatus, String) {
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: openpty only writes the two descriptors it opens, owned below.
    let opened = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both are open and owned by nothing else.
    let (leader, follower) =
        unsafe { (OwnedFd::from_raw_fd(leader), OwnedFd::from_raw_fd(follower)) };
    command
        .stdin(follower.try_clone().unwrap())
        .stdout(follower.try_clone().unwrap())
        .stderr(follower);
    // SAFETY: setsid and ioctl are async-signal-safe; stdin is the
    // follower by the time this runs.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("the airlock binary runs");
    // The parent's copies of the follower go, so reading ends once the
    // child's do.
    drop(command);
    let echoes = |fd: i32| {
        // SAFETY: a zeroed termios is a valid buffer for tcgetattr.
        let mut mode: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is the open leader; the follower's mode is read.
        unsafe { libc::tcgetattr(fd, &mut mode) == 0 && mode.c_lflag & libc::ECHO != 0 }
    };
    let mut terminal = std::fs::File::from(leader);
    let (mut shown, mut buffer, mut typed_yet) = (Vec::new(), [0u8; 4096], false);
    // A read fails (EIO) once the child and its descriptors are gone.
    while let Ok(n @ 1..) = terminal.read(&mut buffer) {
        shown.extend_from_slice(&buffer[..n]);
        if !typed_yet && text(&shown).contains(prompt) {
            let asked = std::time::Instant::now();
            while echoes(terminal.as_raw_fd()) {
                assert!(
                    asked.elapsed().as_secs() < 10,
                    "echo stays on: {}",
                    text(&shown)
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            terminal.write_all(typed.as_bytes()).unwrap();
            typed_yet = true;
        }
    }
    (child.wait().unwrap(), text(&shown))
}

/// On a terminal a compile is a spinner, left as one line ("compiled …
/// in … s") once done, with no log lines for it; off a terminal it is the
/// log's two lines.
#[cfg(unix)]
#[test]
fn a_compile_is_a_spinner_on_a_terminal_and_log_lines_elsewhere() {
    let home = tempfile::tempdir().unwrap();
    let tools = home.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::copy(airlock_tests::guests::SOCKETS, tools.join("sockets.wasm")).unwrap();
    let config = home.path().join("airlock.toml");
    std::fs::write(
        &config,
        format!("bundled_tools = false\ntool_dirs = [{tools:?}]\n"),
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap(), "list"];
    let mut at_first = command(home.path(), &args);
    at_first.env("XDG_CACHE_HOME", home.path().join("cache"));
    let (status, shown) = at_terminal(at_first, "\u{1}", "");
    assert!(status.success(), "{shown}");
    assert!(shown.contains("sockets.wasm in "), "{shown}");
    assert!(!shown.contains("INFO"), "{shown}");

    let out = command(home.path(), &args)
        .env("XDG_CACHE_HOME", home.path().join("another cache"))
        .output()
        .unwrap();
    let said = text(&out.stderr);
    assert!(
        said.contains("INFO compiling") && said.contains("sockets.wasm in "),
        "{said}"
    );
}

#[test]
fn list_and_describe_name_the_imports_linked_deny_all() {
    let home = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    std::fs::copy(
        airlock_tests::guests::SOCKETS,
        tools.path().join("sockets.wasm"),
    )
    .unwrap();
    let dir = tools.path().to_str().unwrap();
    let out = airlock(home.path(), &["--tools", dir, "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("sockets imports wasi:")
                && l.contains("wasi:sockets/")
                && l.contains("wasi:http/")
                && l.ends_with(
                    "linked deny-all (every socket and name lookup fails; every HTTP request is \
                     refused)"
                )),
        "{stdout}"
    );
    let out = airlock(home.path(), &["--tools", dir, "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sockets = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "sockets")
        .unwrap();
    let denied = sockets["deny_all_imports"].as_array().unwrap();
    assert!(denied.len() >= 5, "{denied:?}");
    let out = airlock(home.path(), &["--tools", dir, "describe", "sockets"]);
    assert!(
        text(&out.stdout).contains("deny-all:    wasi:http/types"),
        "{}",
        text(&out.stdout)
    );
    let out = airlock(home.path(), &["describe", "read"]);
    assert!(!text(&out.stdout).contains("deny-all"));
}

#[test]
fn list_shows_the_bundled_tools_and_why_fetch_is_unavailable() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for tool in ["cd", "edit", "glob", "grep", "ls", "read", "sleep", "write"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(tool)),
            "{tool} missing from\n{stdout}"
        );
    }
    assert!(stdout.contains("RC-I-S--"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("unavailable: fetch") && stderr.contains("wasi:http/"),
        "{stderr}"
    );

    let out = airlock(
        home.path(),
        &["--allow-host", "example.com", "list", "--json"],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"fetch"), "{names:?}");
    assert_eq!(json["unavailable"], serde_json::json!([]));
}

#[test]
fn list_prints_each_apis_tool_definitions_and_what_they_lack() {
    let home = tempfile::tempdir().unwrap();
    let defs = |format: &str| {
        let out = airlock(home.path(), &["list", "--format", format]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let defs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let read = defs
            .iter()
            .find(|d| d["name"] == "read" || d["function"]["name"] == "read")
            .cloned()
            .unwrap_or_else(|| panic!("no read in {defs:?}"));
        // What the API lacks, without the first start's compile lines.
        let problems: String = text(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("airlock:"))
            .map(|l| format!("{l}\n"))
            .collect();
        (read, problems)
    };
    let (read, problems) = defs("anthropic");
    assert_eq!(read["input_schema"]["type"], "object", "{read}");
    assert!(problems.is_empty(), "{problems}");
    let (read, problems) = defs("mcp");
    assert_eq!(read["annotations"]["readOnlyHint"], true, "{read}");
    assert!(problems.is_empty(), "{problems}");
    let (read, problems) = defs("openai");
    assert_eq!(read["type"], "function");
    assert_eq!(read["strict"], false, "read has optional fields: {read}");
    assert!(
        problems.contains("airlock: read: not strict: /: not required"),
        "{problems}"
    );
    let (read, _) = defs("openai-chat");
    assert_eq!(read["function"]["parameters"]["type"], "object", "{read}");
    let out = airlock(home.path(), &["list", "--format", "gemini"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn describe_prints_the_prompt_schema_and_grants() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["describe", "read"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("\"file_path\"") && stdout.contains("cat -n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("granted:     workspace none granted"),
        "{stdout}"
    );
    let out = airlock(home.path(), &["describe", "nope"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(text(&out.stderr).contains("no tool is named \"nope\""));

    // A tool refused for want of a grant still shows what it asks for,
    // then why it is not offered.
    let out = airlock(home.path(), &["describe", "fetch"]);
    assert_eq!(out.status.code(), Some(4));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("\"url\"")
            && stdout.contains("unavailable: ")
            && stdout.contains("wasi:http"),
        "{stdout}"
    );
    let out = airlock(home.path(), &["describe", "--json", "fetch"]);
    let described: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(described["unavailable"].is_string(), "{described}");
    assert_eq!(described["name"], "fetch", "{described}");
}

#[test]
fn call_runs_a_tool_and_exits_by_outcome() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let dir = ws.path().to_str().unwrap();
    // A first start (an artifact cache of its own), then the next.
    let airlock = |home: &Path, args: &[&str]| {
        command(home, args)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .output()
            .unwrap()
    };

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "read",
            r#"{"file_path":"a.txt"}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "     1\talpha\n     2\tbeta\n");
    // A first start compiles the tools for seconds, and says so (it was
    // silent); the next finds them cached.
    let said = text(&out.stderr);
    assert!(
        said.contains("compiling bundled (airlock-tool-read) for this machine")
            && said.contains("once: then it is cached")
            && said.contains("compiled bundled (airlock-tool-read) in"),
        "{said}"
    );

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "read",
            r#"{"file_path":"missing.txt"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error (ENOENT):"),
        "nothing compiled the second time: {}",
        text(&out.stderr)
    );

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "--read-only",
            "call",
            "write",
            r#"{"file_path":"a.txt","content":"x"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "alpha\nbeta\n"
    );

    let out = airlock(
        home.path(),
        &["--workspace", dir, "call", "read", "{not json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not usable JSON"));

    let out = airlock(
        home.path(),
        &["call", "fetch", r#"{"url":"http://127.0.0.1/"}"#],
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("fetch is unavailable"),
        "{}",
        text(&out.stderr)
    );

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "read",
            r#"{"file_path":"a.txt"}"#,
            "--json",
        ],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["name"], "read");
    assert_eq!(
        json["flags"],
        serde_json::json!([
            "read-only",
            "concurrency-safe",
            "idempotent",
            "search-or-read"
        ])
    );

    // Progress to a pipe or a file: at most a line a second, not one per
    // report (`sleep` reports every 100 ms).
    let out = airlock(home.path(), &["call", "sleep", r#"{"ms":2500}"#]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = text(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("  …"))
        .count();
    assert!(
        (1..=4).contains(&lines),
        "{lines} lines: {}",
        text(&out.stderr)
    );
}

/// Airlocks started at once over one empty cache (replicas, several MCP
/// clients) compile each component once: the others wait for it and say so.
#[test]
fn airlocks_started_at_once_compile_a_tool_once() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let read = ["--workspace", ws.path().to_str().unwrap(), "call", "read"];
    let started: Vec<_> = (0..3)
        .map(|_| {
            command(home.path(), &read)
                .arg(r#"{"file_path":"a.txt"}"#)
                .env("XDG_CACHE_HOME", home.path().join(".cache"))
                .stderr(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut said = String::new();
    for child in started {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "     1\talpha\n");
        said += &text(&out.stderr);
    }
    // Each compiled by one of them (a start compiles every tool, the one
    // called first), and the others said they waited.
    let mut compiles = std::collections::BTreeMap::<&str, usize>::new();
    for line in said.lines() {
        let compiled = line.split_once("compiling bundled (").map(|(_, rest)| rest);
        if let Some((tool, _)) = compiled.and_then(|rest| rest.split_once(") for this machine")) {
            *compiles.entry(tool).or_default() += 1;
        }
    }
    assert!(compiles.contains_key("airlock-tool-read"), "{said}");
    assert!(compiles.values().all(|&n| n == 1), "{compiles:?}\n{said}");
    assert!(
        said.contains("waiting for another Airlock compiling bundled (")
            && said.contains("), compiled by another Airlock (waited "),
        "{said}"
    );
}

/// `airlock doctor` gives a line per finding, `ok` or `--` with what to do;
/// the cache line follows what a start compiled.
#[test]
fn doctor_reports_what_this_machine_gives() {
    let home = tempfile::tempdir().unwrap();
    // A cache of its own, whatever the environment names.
    let airlock = |home: &Path, args: &[&str]| {
        command(home, args)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .output()
            .unwrap()
    };
    let lines =
        |out: &Output| -> Vec<String> { text(&out.stdout).lines().map(String::from).collect() };
    let out = airlock(home.path(), &["doctor"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let found = lines(&out);
    let labels = [
        "configuration",
        "tools",
        "lock",
        "cache",
        "native",
        "wasm target",
        "python tools",
        "js tools",
    ];
    assert_eq!(found.len(), labels.len(), "{found:#?}");
    for (line, label) in found.iter().zip(labels) {
        assert!(
            (line.starts_with("ok  ") || line.starts_with("--  ")) && line[4..].starts_with(label),
            "{line}"
        );
    }
    assert!(found[3].contains("0 compiled components"), "{}", found[3]);
    assert!(airlock(home.path(), &["list"]).status.success());
    let found = lines(&airlock(home.path(), &["doctor"]));
    assert!(
        found[3].starts_with("ok") && !found[3].contains(": 0 compiled"),
        "{}",
        found[3]
    );
}

/// `airlock config` names the file read and gives every key in effect with
/// where its value comes from: the command line, the file, or the default.
#[test]
fn config_shows_each_keys_value_and_source() {
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        "[limits]\ntimeout_ms = 5000\n\n[tools.fetch]\nnetwork = [\"example.com\"]\n",
    );
    let file = home.path().join(".config/airlock/airlock.toml");
    let ws = tempfile::tempdir().unwrap();
    let dir = ws.path().to_str().unwrap();
    let out = airlock(
        home.path(),
        &["--workspace", dir, "--allow-host", "x.org", "config"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for line in [
        format!("read:    {}", file.display()),
        format!("limits.timeout_ms = 5000    # {}", file.display()),
        format!(
            "tools.\"fetch\".network = \"example.com\"    # {}",
            file.display()
        ),
        "tools.\"*\".network = \"x.org\"    # command line".to_string(),
        format!("workspace = \"{dir}\"    # command line"),
        "limits.memory_mib = 256    # default".to_string(),
    ] {
        assert!(shown.lines().any(|l| l == line), "no {line:?} in:\n{shown}");
    }
}

/// Errors that say what to do next: the first call without a workspace
/// names the flag that gives one, and `tool_search` is explained rather
/// than reported as no tool.
#[test]
fn errors_say_what_to_do_next() {
    let home = tempfile::tempdir().unwrap();
    // What the first call without a workspace meets says which flag gives one.
    let out = airlock(
        home.path(),
        &["call", "read", r#"{"file_path": "/etc/hostname"}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("granted no directories")
            && text(&out.stderr).contains("hint: give the tool a directory with --workspace DIR"),
        "{}",
        text(&out.stderr)
    );
    // tool_search is not missing: it comes when tools are deferred.
    let out = airlock(home.path(), &["describe", "tool_search"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("tool_search is offered only when some tools are deferred"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bad_configuration_exits_with_3() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("airlock.toml");
    std::fs::write(&config, "[limits]\ntimeout = 1\n").unwrap();
    let out = airlock(home.path(), &["--config", config.to_str().unwrap(), "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("unknown field `timeout`"),
        "{}",
        text(&out.stderr)
    );
    // A typo: placed, and the key meant named.
    std::fs::write(&config, "[limits]\nmemory_mb = 3\n").unwrap();
    let out = airlock(home.path(), &["--config", config.to_str().unwrap(), "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains(
            "airlock.toml: line 2, column 1: unknown field `memory_mb`; did you mean `memory_mib`?"
        ),
        "{}",
        text(&out.stderr)
    );
    // A tool section naming no tool: its grants would apply to nothing.
    std::fs::write(&config, "[tools.fecth]\nnetwork = [\"example.com\"]\n").unwrap();
    let out = airlock(home.path(), &["--config", config.to_str().unwrap(), "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning: [tools.fecth] in ")
            && text(&out.stderr).contains("names no tool (did you mean [tools.fetch]?)"),
        "{}",
        text(&out.stderr)
    );
    // A tool switched off is a tool, not a typo.
    std::fs::write(&config, "[tools.bash]\nenabled = false\n").unwrap();
    let out = airlock(home.path(), &["--config", config.to_str().unwrap(), "list"]);
    assert!(
        out.status.success() && !text(&out.stderr).contains("names no tool"),
        "{}",
        text(&out.stderr)
    );
    // Named as ./airlock.toml, it is the one read: nothing to point out.
    let out = command(home.path(), &["--config", "airlock.toml", "list"])
        .current_dir(home.path())
        .output()
        .unwrap();
    assert!(
        !text(&out.stderr).contains("is not read"),
        "{}",
        text(&out.stderr)
    );
    // A project's own airlock.toml is not read, and that is said.
    let out = command(home.path(), &["list"])
        .current_dir(home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "warning: {} is not read (a project's own configuration never grants itself \
             anything); to use it, pass --config",
            config.display()
        )),
        "{}",
        text(&out.stderr)
    );
    // A time limit no call could meet: refused, not every call failing.
    std::fs::write(&config, "[limits]\ntimeout_ms = 0\n").unwrap();
    let out = airlock(home.path(), &["--config", config.to_str().unwrap(), "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("limits.timeout_ms must be at least 1"),
        "{}",
        text(&out.stderr)
    );
    let out = airlock(home.path(), &["--timeout-ms", "0", "list"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad flag value is a bad command line"
    );
    assert!(
        text(&out.stderr).contains("--timeout-ms"),
        "{}",
        text(&out.stderr)
    );
    // A URL where a host goes: refused as a bad command line, naming the
    // host (every tool was unavailable, naming a key never written).
    let out = airlock(
        home.path(),
        &["--allow-host", "http://example.com/x", "list"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("give a host, not a URL: --allow-host example.com"),
        "{}",
        text(&out.stderr)
    );
    let out = airlock(home.path(), &["--allow-env", "A-B", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // A tool directory named on the command line that is not there.
    let out = airlock(home.path(), &["--tools", "/nope", "list"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--tools /nope: there is no such directory"),
        "{}",
        text(&out.stderr)
    );
    let out = airlock(home.path(), &["--workspace", "/proc", "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("never granted"),
        "{}",
        text(&out.stderr)
    );
    // `--workspace ~` would let a tool rewrite Airlock's configuration.
    let home_dir = home.path().canonicalize().unwrap();
    let out = airlock(
        home.path(),
        &["--workspace", home_dir.to_str().unwrap(), "list"],
    );
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("configuration directory")
            && stderr.contains(&home_dir.join(".config/airlock").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_claude_code_settings_file_applies_and_what_it_cannot_do_is_named() {
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("settings.json");
    std::fs::write(
        &settings,
        r#"{"model": "opus", "permissions": {"deny": ["glob"], "defaultMode": "plan"}}"#,
    )
    .unwrap();
    let out = airlock(
        home.path(),
        &["--settings", settings.to_str().unwrap(), "list", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains("\"read\""), "{listed}");
    // The workspace holds neither the settings file nor the home's
    // configuration directory (no writable grant may).
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let a = ws.join("a.txt");
    std::fs::write(&a, "x").unwrap();
    let ws = ws.to_str().unwrap();
    let write = format!(r#"{{"file_path": "{}", "content": "y"}}"#, a.display());
    let out = airlock(
        home.path(),
        &[
            "--settings",
            settings.to_str().unwrap(),
            "--workspace",
            ws,
            "call",
            "write",
            &write,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Plan mode"),
        "{}",
        text(&out.stderr)
    );
    let out = airlock(
        home.path(),
        &[
            "--settings",
            settings.to_str().unwrap(),
            "--workspace",
            ws,
            "call",
            "glob",
            r#"{"pattern": "*"}"#,
        ],
    );
    assert!(
        text(&out.stderr).contains("No such tool available: glob"),
        "a bare deny hides the tool: {}",
        text(&out.stderr)
    );

    std::fs::write(&settings, r#"{"permissions": {"defaultMode": "auto"}}"#).unwrap();
    let out = airlock(
        home.path(),
        &["--settings", settings.to_str().unwrap(), "list"],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("permissions.defaultMode: \"auto\""),
        "{}",
        text(&out.stderr)
    );
}

/// `bash` runs the native programs the operator granted (`--allow-program`),
/// each confined by the call's grants: `git status` lines are read-only and
/// run side by side; a commit writes in a read-write call and fails in a
/// read-only one, leaving HEAD and the index as they were; programs mix with
/// builtins in pipelines; a program not granted is not found; a program a
/// tool could overwrite is refused at load.
#[cfg(target_os = "linux")]
#[test]
fn bash_runs_granted_programs_confined_by_the_calls_grants() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "a.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@e",
        "commit",
        "-qm",
        "first",
    ]);
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    let dir = ws.to_str().unwrap();
    let granted = [
        "--workspace",
        dir,
        "--allow-program",
        "git",
        "--allow-program",
        "/usr/bin/python3",
        "--mode",
        "bypassPermissions",
    ];
    let bash = |command: &str| {
        serde_json::json!({"name": "bash", "input": {"command": command}}).to_string() + "\n"
    };
    let lines = [
        bash("git status --short"),
        bash("git status --short"),
        bash("git log --oneline | wc -l"),
        bash("python3 -c 'print(40 + 2)' | wc -c"),
        bash(
            "git -c user.name=t -c user.email=t@e commit -qam second && git log --oneline | wc -l",
        ),
    ]
    .concat();
    let mut args = granted.to_vec();
    args.push("run");
    let out = airlock_with_stdin(home.path(), &args, &lines);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let results = json_lines(&out.stdout);
    let content: Vec<&str> = results
        .iter()
        .map(|r| r["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        content,
        [" M a.txt\n", " M a.txt\n", "1\n", "3\n", "2\n"],
        "{results:?}"
    );

    // Past its time a program is killed with its helper while the host
    // goes on: it never writes `late.txt`.
    {
        use std::io::{BufRead, Write};
        let mut args = granted.to_vec();
        args.push("run");
        let mut host = command(home.path(), &args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let late = "python3 -c 'import time; time.sleep(1.5); open(\"late.txt\", \"w\")'";
        let line = serde_json::json!({"name": "bash", "input": {"command": late, "timeout": 500}});
        let mut stdin = host.stdin.take().unwrap();
        writeln!(stdin, "{line}").unwrap();
        let mut result = String::new();
        std::io::BufReader::new(host.stdout.take().unwrap())
            .read_line(&mut result)
            .unwrap();
        assert!(result.contains("time limit of 500 ms"), "{result}");
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(
            !ws.join("late.txt").exists(),
            "the program outlived its time"
        );
        drop(stdin);
        host.wait().unwrap();
    }

    let head = git(&["rev-parse", "HEAD"]);
    let index = std::fs::read(ws.join(".git/index")).unwrap();
    std::fs::write(ws.join("a.txt"), "three\n").unwrap();
    let mut args = granted.to_vec();
    let commit = r#"{"command":"git -c user.name=t -c user.email=t@e commit -qam third"}"#;
    args.extend(["--read-only", "call", "bash", commit]);
    let out = airlock(home.path(), &args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("Read-only file system"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(git(&["rev-parse", "HEAD"]), head);
    assert_eq!(std::fs::read(ws.join(".git/index")).unwrap(), index);
    assert!(!ws.join(".git/index.lock").exists());

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "bash",
            r#"{"command":"git status"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("git: command not found: Airlock's bash runs its builtins and no programs from the machine"),
        "{}",
        text(&out.stderr)
    );

    let tool = ws.join("tool.sh");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "--allow-program",
            tool.to_str().unwrap(),
            "list",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("could be replaced"),
        "{}",
        text(&out.stderr)
    );
}

/// The toolchains an agent runs, granted to `bash` and confined: pytest on
/// a small project (its packages installed into the workspace, the
/// system's python3 granted, since a program inside a writable grant is
/// not), `node -e`, and cargo with its toolchain's directories mounted
/// read-only (`HOME` is private, so rustup is told where they are).
#[cfg(target_os = "linux")]
#[test]
fn bash_runs_the_toolchains_an_agent_uses() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    std::fs::write(ws.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    std::fs::write(
        ws.join("test_calc.py"),
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_fails():\n    assert add(2, 2) == 5\n",
    )
    .unwrap();
    let deps = ws.join(".deps");
    python::pip_install(python::python(), "pytest==8.3.5", Some(&deps)).unwrap();
    let dir = ws.to_str().unwrap();
    let cargo_home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap()));
    let rustup_home = std::env::var("RUSTUP_HOME")
        .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap()));
    let cargo = format!("{cargo_home}/bin/cargo");
    // The toolchain this test runs under (rustup sets it for cargo's
    // children), so rustup needs no default of its own.
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN").unwrap_or_else(|_| "1.95.0".into());
    let bash = |command: String| {
        serde_json::json!({"name": "bash", "input": {"command": command}}).to_string() + "\n"
    };
    let lines = [
        bash(
            "PYTHONPATH=.deps python3 -m pytest -q -p no:cacheprovider test_calc.py | tail -n 1"
                .into(),
        ),
        bash("node -e 'console.log(6 * 7)'".into()),
        bash(format!(
            "RUSTUP_HOME={rustup_home} CARGO_HOME={cargo_home} RUSTUP_TOOLCHAIN={toolchain} \
             cargo --version | cut -d ' ' -f 1"
        )),
    ]
    .concat();
    let out = airlock_with_stdin(
        home.path(),
        &[
            "--workspace",
            dir,
            "--mode",
            "bypassPermissions",
            "--allow-program",
            "/usr/bin/python3",
            "--allow-program",
            "node",
            "--allow-program",
            &cargo,
            "--mount",
            &cargo_home,
            "--mount",
            &rustup_home,
            "run",
        ],
        &lines,
    );
    let results = json_lines(&out.stdout);
    let content: Vec<&str> = results
        .iter()
        .map(|r| r["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        results.len(),
        3,
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(content[0].contains("1 failed, 1 passed"), "{content:?}");
    assert_eq!(content[1], "42\n", "{content:?}");
    assert_eq!(content[2], "cargo\n", "{content:?}");
}

/// Each workspace keeps its context between `airlock call`s, as an agent's
/// loop keeps one: `call read` then `call edit` works, as does a `cd` the
/// next call sees; `--fresh` starts clean (the read is forgotten, so the
/// edit is refused); another workspace has a context of its own.
#[test]
fn calls_in_a_workspace_share_its_context_until_fresh() {
    let home = tempfile::tempdir().unwrap();
    let (ws, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::fs::write(ws.path().join("sub/a.txt"), "hello world\n").unwrap();
    std::fs::write(other.path().join("a.txt"), "hello world\n").unwrap();
    let call = |ws: &Path, args: &[&str]| {
        let mut all = vec!["--workspace", ws.to_str().unwrap(), "--yes", "call"];
        all.extend_from_slice(args);
        airlock(home.path(), &all)
    };
    let edit = |from: &str, to: &str| {
        serde_json::json!({"file_path": "a.txt", "old_string": from, "new_string": to}).to_string()
    };
    assert!(
        call(ws.path(), &["cd", r#"{"path":"sub"}"#])
            .status
            .success()
    );
    let out = call(ws.path(), &["read", r#"{"file_path":"a.txt"}"#]);
    assert!(
        out.status.success(),
        "the cd was kept: {}",
        text(&out.stderr)
    );
    let out = call(ws.path(), &["edit", &edit("world", "there")]);
    assert!(
        out.status.success(),
        "the read was kept: {}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("sub/a.txt")).unwrap(),
        "hello there\n"
    );

    let out = call(other.path(), &["edit", &edit("world", "there")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("has not been read yet"),
        "{}",
        text(&out.stderr)
    );

    let out = call(
        ws.path(),
        &[
            "edit",
            "--fresh",
            r#"{"file_path":"sub/a.txt","old_string":"there","new_string":"x"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("has not been read yet"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_demo_runs_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["demo"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("all as expected"), "{stdout}");
    // The git turns run where git is installed and programs can be
    // confined (this machine kind), and say why not elsewhere.
    let git_ran = stdout.contains("[28/28]") && stdout.contains("Read-only file system");
    assert!(
        git_ran || stdout.contains("the git turns are skipped"),
        "{stdout}"
    );
    assert!(stdout.contains("a shell in the sandbox"), "{stdout}");
    assert!(
        stdout.contains("# Skill: release-check") && stdout.contains("README.md: present"),
        "{stdout}"
    );
    assert!(stdout.contains("timeline of turn 1"), "{stdout}");
}

fn airlock_with_stdin(home: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = command(home, args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the airlock binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn json_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    text(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn calls_that_need_permission_are_denied_without_a_terminal() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let dir = ws.path().to_str().unwrap();
    let write = r#"{"file_path":"n.txt","content":"x"}"#;
    let out = airlock(home.path(), &["--workspace", dir, "call", "write", write]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--yes"), "{}", text(&out.stderr));
    assert!(!ws.path().join("n.txt").exists());
    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "--mode",
            "plan",
            "--yes",
            "call",
            "write",
            write,
        ],
    );
    assert!(
        text(&out.stderr).contains("Plan mode"),
        "{}",
        text(&out.stderr)
    );
    let out = airlock(
        home.path(),
        &["--workspace", dir, "--yes", "call", "write", write],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(ws.path().join("n.txt").exists());
    let out = airlock(home.path(), &["--mode", "yolo", "list"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn run_executes_json_lines_in_order() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let input = concat!(
        r#"{"id":"1","name":"read","input":{"file_path":"a.txt"}}"#,
        "\n",
        r#"{"id":"2","name":"read","input":{"file_path":"missing.txt"}}"#,
        "\n",
        "\n",
        r#"{"name":"ls","input":{}}"#,
        "\n",
    );
    let out = airlock_with_stdin(
        home.path(),
        &["--workspace", ws.path().to_str().unwrap(), "run"],
        input,
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "one use failed: {}",
        text(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2", "use-4"]);
    assert_eq!(lines[0]["is_error"], false);
    assert_eq!(lines[0]["content"], "     1\talpha");
    assert_eq!(lines[1]["is_error"], true);
    assert!(
        lines[1]["content"]
            .as_str()
            .unwrap()
            .contains("does not exist")
    );

    let out = airlock_with_stdin(home.path(), &["run"], "not json\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("line 1 is not JSON"));
}

#[test]
fn run_replays_a_recorded_anthropic_stream_with_a_timeline() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/lib.rs"), "pub fn greet() {}\n").unwrap();
    let timeline = home.path().join("timeline.jsonl");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/agent-turn.jsonl"
    );
    let out = airlock(
        home.path(),
        &[
            "--workspace",
            ws.path().to_str().unwrap(),
            "run",
            fixture,
            "--replay-timing",
            "--timeline",
            timeline.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = json_lines(&out.stdout);
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["toolu_01", "toolu_02", "toolu_03"]);
    assert!(
        lines[1]["content"]
            .as_str()
            .unwrap()
            .contains("pub fn greet")
    );

    let events = json_lines(&std::fs::read(&timeline).unwrap());
    let at = |id: &str, event: &str| {
        events
            .iter()
            .find(|e| e["tool_use_id"] == id && e["event"] == event)
            .and_then(|e| e["t_ms"].as_f64())
            .unwrap_or_else(|| panic!("no {event} for {id}"))
    };
    // The grep started while the sleep (1.5 s from 0.38 s) was still running,
    // long before the message ended at 1.8 s: streaming, not waiting.
    assert!(at("toolu_02", "started") < at("toolu_01", "finished"));
    assert!(at("toolu_02", "started") < 1700.0);
    assert!(at("toolu_01", "started") < 600.0);
}

#[test]
fn run_answers_a_block_with_broken_json_with_an_error() {
    let home = tempfile::tempdir().unwrap();
    let stream = concat!(
        r#"event: content_block_start"#,
        "\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_x","name":"sleep","input":{}}}"#,
        "\n",
        "\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ms\": 1"}}"#,
        "\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n",
        r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_y","name":"sleep","input":{}}}"#,
        "\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"ms\": 1}"}}"#,
        "\n",
        r#"data: {"type":"content_block_stop","index":1}"#,
        "\n",
        r#"data: {"type":"message_stop"}"#,
        "\n",
    );
    let out = airlock_with_stdin(home.path(), &["run"], stream);
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.len(), 2, "{}", text(&out.stderr));
    assert_eq!(lines[0]["tool_use_id"], "toolu_x");
    assert_eq!(lines[0]["is_error"], true);
    assert!(
        lines[0]["content"]
            .as_str()
            .unwrap()
            .contains("INVALID_JSON: {\"ms\": 1")
    );
    assert_eq!(lines[1]["is_error"], false);
}

/// A signal stops a command that waits on its input (`call TOOL -` with
/// stdin left open), with 128 + its number; one that was ignored when
/// airlock started (`nohup`) stays ignored.
#[cfg(unix)]
#[test]
fn a_signal_stops_a_command_waiting_on_stdin_unless_it_was_ignored() {
    use std::process::{Child, Stdio};
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let (_, sleep) = airlock_host::bundled::BUNDLED
        .iter()
        .find(|(package, _)| *package == "airlock-tool-sleep")
        .expect("the sleep tool is bundled");
    std::fs::write(tools.path().join("sleep.wasm"), sleep).unwrap();
    let start = |wrapper: Option<&str>| -> Child {
        let airlock = env!("CARGO_BIN_EXE_airlock");
        let mut command = Command::new(wrapper.unwrap_or(airlock));
        if wrapper.is_some() {
            command.arg(airlock);
        }
        command
            .arg("--no-bundled")
            .arg("--tools")
            .arg(tools.path())
            .args(["call", "sleep", "-"])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("AIRLOCK_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let signal = |child: &Child, name: &str| {
        let sent = Command::new("kill")
            .args([format!("-{name}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    let exit_code = |child: &mut Child| {
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if start.elapsed() > Duration::from_secs(10) {
                child.kill().unwrap();
                panic!("airlock still runs 10 s after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let loaded = Duration::from_secs(2);

    let mut waiting = start(None);
    std::thread::sleep(loaded);
    signal(&waiting, "TERM");
    assert_eq!(exit_code(&mut waiting), Some(143));

    let mut nohup = start(Some("nohup"));
    std::thread::sleep(loaded);
    signal(&nohup, "HUP");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        nohup.try_wait().unwrap().is_none(),
        "SIGHUP, ignored under nohup, stopped airlock"
    );
    signal(&nohup, "TERM");
    assert_eq!(exit_code(&mut nohup), Some(143));
}

/// Ctrl-C during `call` or `run` cancels the call, which is reported,
/// and the command exits 130, as a shell reports an interrupted command.
#[test]
fn ctrl_c_cancels_the_call_reports_it_and_exits_130() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let long = r#"{"ms": 20000}"#;
    let line = format!(r#"{{"id": "a", "name": "sleep", "input": {long}}}"#);
    for args in [vec!["call", "sleep", long], vec!["run", "-"]] {
        let mut child = command(home.path(), &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(line.as_bytes()).unwrap();
        }
        // Interrupted once the call runs: `sleep` reports progress.
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        {
            use std::io::BufRead;
            let mut line = String::new();
            while stderr.read_line(&mut line).unwrap() > 0 {
                seen.push_str(&line);
                if line.starts_with("  …") {
                    break;
                }
                line.clear();
            }
        }
        let started = Instant::now();
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?}");
        assert_eq!(out.status.code(), Some(130), "{args:?}: {seen}{rest}");
        assert!(rest.contains("airlock: interrupted"), "{args:?}: {rest}");
        // `call` reports on stderr, `run` as its result line on stdout.
        let reported = format!("{rest}{}", text(&out.stdout));
        assert!(
            reported.contains("error (cancelled)") || reported.contains(r#""is_error":true"#),
            "{args:?}: the cancelled call is reported: {reported}"
        );
    }
}

/// The help names every command in a line each, with examples in the long
/// form; `--version` says the commit, the wasmtime and the features; the
/// completion scripts and the manual page come out whole.
#[test]
fn help_version_completions_and_the_manual_page() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["-h"]);
    assert!(out.status.success());
    let short = text(&out.stdout);
    assert!(
        short.starts_with("Runs the tools of AI agents sandboxed"),
        "{short}"
    );
    let commands: Vec<&str> = short
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap()
        .lines()
        .collect();
    for name in [
        "list",
        "call",
        "mcp",
        "install",
        "publish",
        "completions",
        "man",
    ] {
        assert!(
            commands.iter().any(|l| l.trim_start().starts_with(name)),
            "{name} missing from {short}"
        );
    }
    assert!(
        commands.iter().all(|l| l.len() <= 100),
        "a command's summary is not one short line: {commands:#?}"
    );
    let long = text(&airlock(home.path(), &["--help"]).stdout);
    assert!(
        long.contains("Examples:\n  airlock demo") && long.contains("Exit codes:"),
        "{long}"
    );

    let version = text(&airlock(home.path(), &["--version"]).stdout);
    let lines: Vec<&str> = version.lines().collect();
    assert!(
        lines[0].starts_with("airlock 0.") && lines[0].contains('('),
        "{version}"
    );
    assert!(lines[1].starts_with("wasmtime 48."), "{version}");
    assert!(lines[2].starts_with("features: mcp"), "{version}");

    for (shell, mark) in [
        ("bash", "complete -F _airlock"),
        ("zsh", "#compdef airlock"),
        ("fish", "complete -c airlock"),
    ] {
        let out = airlock(home.path(), &["completions", shell]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(mark),
            "{shell}: {}",
            text(&out.stdout)
        );
    }
    let out = airlock(home.path(), &["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a bad command line"
    );
    let page = text(&airlock(home.path(), &["man"]).stdout);
    assert!(
        page.contains(".TH airlock 1")
            && page.contains("airlock\\-install(1)")
            && page.contains("Exit codes:"),
        "{page}"
    );
}

/// A reader that goes away before the output is written (`airlock list |
/// head -1`) ends it quietly: no panic about the broken pipe, whichever
/// command printed, and the command's own outcome as the exit code.
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::process::Stdio;
    let home = tempfile::tempdir().unwrap();
    let key = home.path().join("signing.key");
    let project = home.path().join("word-count");
    let commands: [(&[&str], bool); 17] = [
        (&["--help"], true),
        (&["config"], true),
        (&["doctor"], true),
        (&["--version"], true),
        (&["completions", "bash"], true),
        (&["man"], true),
        (&["list", "--format", "mcp"], true),
        (&["list"], true),
        (&["list", "--json"], true),
        (&["describe", "grep"], true),
        (&["call", "sleep", r#"{"ms": 0}"#], true),
        (&["approve", "grep"], true),
        (&["tools"], true),
        (&["keygen", key.to_str().unwrap()], true),
        (
            &["new", "word-count", "--dir", project.to_str().unwrap()],
            true,
        ),
        (&["remove", "no-such-tool"], false),
        (&["demo"], true),
    ];
    for (args, succeeds) in commands {
        let mut child = command(home.path(), args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before airlock has loaded its tools, so every write fails.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(out.status.success(), succeeds, "{args:?}: {stderr}");
        assert!(out.status.code().is_some(), "{args:?} ended by a signal");
    }
}

/// `-vv` is Airlock's own debug log: the compiler's internals stay at
/// warnings unless `AIRLOCK_LOG` asks for them (a first call's compile
/// once printed 900,000 lines of them).
#[test]
fn verbose_logs_are_airlocks_not_the_compilers() {
    let home = tempfile::tempdir().unwrap();
    let out = command(home.path(), &["-vv", "call", "sleep", r#"{"ms":0}"#])
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let logged = text(&out.stderr);
    let lines = logged.lines().count();
    assert!(
        lines < 2_000 && !logged.contains("timing:") && !logged.contains("regalloc"),
        "{lines} lines, the compiler's among them: {}",
        &logged[..logged.len().min(2_000)]
    );
}

/// Logs written to a file (stderr not a terminal) carry no colour codes.
#[test]
fn logs_written_to_a_file_carry_no_colour_codes() {
    let home = tempfile::tempdir().unwrap();
    // A key about the rest of the agent is noted at `-v`.
    let settings = home.path().join("settings.json");
    std::fs::write(&settings, r#"{"model": "opus"}"#).unwrap();
    let log = home.path().join("airlock.log");
    let args = ["-v", "--settings", settings.to_str().unwrap(), "list"];
    let status = command(home.path(), &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("INFO") && logged.contains("model"),
        "the note is logged: {logged}"
    );
    assert!(!logged.contains('\x1b'), "{logged:?}");
}

/// `airlock approve` shows the tool and records its component's digest in
/// the approvals file of the user's configuration directory, also for a
/// component this command line's grants do not let load; a tool that is
/// not there is exit 4.
#[test]
fn approve_records_the_digest_of_the_code_in_place() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["approve", "sleep"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("sleep") && stdout.contains("approved sleep"),
        "{stdout}"
    );
    let approvals_file = home.path().join(".config/airlock/approved.json");
    let approvals: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&approvals_file).unwrap()).unwrap();
    let digest = approvals["tools"]["sleep"][0].as_str().unwrap();
    assert_eq!(digest.len(), 64, "{approvals}");
    assert!(stdout.contains(digest), "{stdout}");

    let out = airlock(home.path(), &["approve", "no-such-tool"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));

    // Approval is about code: a component that asks for more than this
    // command line grants (here a network grant) is approved by its file's
    // digest, without the grants restated, and told why it does not load.
    let tools = home.path().join(".local/share/airlock/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let file = tools.join("exfil.wasm");
    std::fs::copy(airlock_tests::guests::EXFIL, &file).unwrap();
    let out = airlock(home.path(), &["approve", "exfil"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("needs a network grant") && stdout.contains("approved exfil"),
        "{stdout}"
    );
    let approvals: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&approvals_file).unwrap()).unwrap();
    let digest = blake3::hash(&std::fs::read(&file).unwrap())
        .to_hex()
        .to_string();
    assert_eq!(
        approvals["tools"]["exfil"][0],
        digest.as_str(),
        "{approvals}"
    );
}

/// `airlock` as a tool author outside any checkout runs it, with the real
/// toolchain (HOME is a temp dir, so cargo's and rustup's homes are passed
/// on) and a target directory shared between runs.
fn author(home: &Path, dir: &Path, args: &[&str]) -> Output {
    let real_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let home_of = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .or_else(|| real_home.as_ref().map(|h| h.join(default)))
            .expect("HOME or the toolchain's home is set")
    };
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("out-of-tree");
    command(home, args)
        .current_dir(dir)
        .env("CARGO_HOME", home_of("CARGO_HOME", ".cargo"))
        .env("RUSTUP_HOME", home_of("RUSTUP_HOME", ".rustup"))
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("the airlock binary runs")
}

#[test]
fn a_rust_tool_goes_from_new_to_a_call_outside_the_repository() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| author(home.path(), work.path(), args);
    let out = run(&["new", "word-count"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("airlock build word-count"));
    let sdk = home
        .path()
        .join(".local/share/airlock/sdk/rust/airlock-sdk-0.1.0");
    assert!(sdk.join("wit/tool.wit").is_file() && sdk.join("sdk/Cargo.toml").is_file());
    assert_eq!(
        run(&["new", "word-count"]).status.code(),
        Some(1),
        "never overwrites"
    );

    let out = run(&["build", "word-count"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("the tool word-count v0.1.0: Counts the words in a text."),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["test", "word-count"]);
    assert!(
        out.status.success() && text(&out.stdout).ends_with("3 passed\n"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = run(&["install", "word-count/word_count.wasm"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let installed = home
        .path()
        .join(".local/share/airlock/tools/word-count.wasm");
    assert!(installed.is_file(), "{}", text(&out.stdout));
    let out = run(&["call", "word-count", r#"{"text": "one two three"}"#]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "3 words");

    let lib = work.path().join("word-count/src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        source.replace("split_whitespace()", "no_such_method()"),
    )
    .unwrap();
    let out = run(&["build", "word-count"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no_such_method") && stderr.contains("cargo could not build the tool"),
        "{stderr}"
    );
    let out = run(&["install", "word-count/src/lib.rs"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("does not load"));
}

/// `airlock build` installs nothing: it names what is missing and the
/// command that installs it.
#[test]
fn build_names_the_missing_toolchain_and_how_to_install_it() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("p");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("Cargo.toml"), "[package]\nname = \"p\"\n").unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let build = |path: &Path| {
        command(home.path(), &["build", project.to_str().unwrap()])
            .env("PATH", path)
            .output()
            .unwrap()
    };
    let out = build(&bin);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Rust is not installed")
            && text(&out.stderr).contains("rustup.rs"),
        "{}",
        text(&out.stderr)
    );
    for (tool, script) in [
        ("cargo", "#!/bin/sh\nexit 0\n"),
        ("rustc", "#!/bin/sh\necho /nonexistent/wasm32-wasip2/lib\n"),
    ] {
        let file = bin.join(tool);
        std::fs::write(&file, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = build(&bin);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("rustup target add wasm32-wasip2"),
        "{}",
        text(&out.stderr)
    );
}

/// `airlock new --lang LANG word-count`, then build, install and call it
/// from `work`, with `bin` first on PATH, as a tool author would.
fn new_build_install_call(home: &Path, work: &Path, bin: &Path, lang: &str) {
    let path = std::env::join_paths(
        std::iter::once(bin.to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let run = |args: &[&str]| {
        command(home, args)
            .current_dir(work)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let out = run(&["new", "--lang", lang, "word-count"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("airlock install word-count/word-count.wasm"),
        "{}",
        text(&out.stdout)
    );
    if lang == "python" {
        // Counted through `Counter.most_common(n)`, which imports `heapq`
        // in its body: a module the app never imports itself, which the
        // component lacked (ModuleNotFoundError at the first call). And
        // returned as a dataclass: structured output, whose schema is
        // derived from the return type (it was dropped without a word).
        let app = work.join("word-count/app.py");
        let source = std::fs::read_to_string(&app).unwrap();
        let counted = "from collections import Counter\n".to_string()
            + &source
                .replace(
                    "@tool(",
                    "@dataclass\nclass Counted:\n    words: int\n\n\n@tool(",
                )
                .replace(
                    "cx: Context) -> Output:\n    return Output.text(f\"{len(input.text.split())} words\")",
                    "cx: Context) -> Counted:\n    \
                     return Counted(sum(n for _, n in Counter(input.text.split()).most_common(100)))",
                );
        assert!(
            counted.contains("most_common"),
            "the scaffold changed: {source}"
        );
        std::fs::write(&app, counted).unwrap();
        let tests = work.join("word-count/tests.jsonl");
        let expected = std::fs::read_to_string(&tests)
            .unwrap()
            .replace(r#""text": "3 words""#, r#""structured": {"words": 3}"#)
            .replace(r#""text": "0 words""#, r#""structured": {"words": 0}"#);
        std::fs::write(&tests, expected).unwrap();
    }
    for args in [
        &["build", "word-count"][..],
        &["test", "word-count"],
        &["install", "word-count/word-count.wasm"],
    ] {
        let out = run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    // The scaffold's tests pass in the sandbox; one that cannot, fails.
    let tests = work.join("word-count/tests.jsonl");
    let mut lines = std::fs::read_to_string(&tests).unwrap();
    lines.push_str(r#"{"name": "one word is not two", "input": {"text": "one"}, "expect": {"text": "2 words"}}"#);
    std::fs::write(&tests, lines).unwrap();
    let out = run(&["test", "word-count"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("ok    counts the words")
            && text(&out.stdout).contains("FAIL  one word is not two: the text is")
            && text(&out.stdout).ends_with("3 passed, 1 failed\n"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["call", "word-count", r#"{"text": "one two  three"}"#]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    if lang != "python" {
        assert_eq!(text(&out.stdout).trim(), "3 words");
        return;
    }
    assert_eq!(text(&out.stdout).trim(), r#"{"words": 3}"#);
    let out = run(&["call", "--json", "word-count", r#"{"text": "a b"}"#]);
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        result["output"]["structured"],
        serde_json::json!({"words": 2}),
        "{result}"
    );
    let out = run(&["describe", "--json", "word-count"]);
    let described: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        described["output_schema"]["properties"]["words"]["type"], "integer",
        "{described}"
    );
}

#[test]
fn a_python_tool_goes_from_new_to_a_call_outside_the_repository() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let venv_bin = componentize_py::componentize_py()
        .parent()
        .unwrap()
        .to_path_buf();
    new_build_install_call(home.path(), work.path(), &venv_bin, "python");
    // Without componentize-py, build says how to install it.
    let out = command(home.path(), &["build", "word-count"])
        .current_dir(work.path())
        .env("PATH", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("python3 -m pip install componentize-py==0.25.1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_js_tool_goes_from_new_to_a_call_outside_the_repository() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // Node and npm on PATH, as a user has them.
    let node = node::node().unwrap_or_else(|e| panic!("{e}"));
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&node.node, bin.join("node")).unwrap();
    let npm = bin.join("npm");
    std::fs::write(
        &npm,
        format!(
            "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
            node.node.display(),
            node.npm.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&npm, std::fs::Permissions::from_mode(0o755)).unwrap();
    new_build_install_call(home.path(), work.path(), &bin, "js");
    // Without Node, build says how to install it.
    let out = command(home.path(), &["build", "word-count"])
        .current_dir(work.path())
        .env("PATH", home.path().join("nothing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("node is not installed"),
        "{}",
        text(&out.stderr)
    );
}

/// Writes `~/.config/airlock/airlock.toml` under `home` with `text`.
fn write_config(home: &Path, text: &str) {
    let dir = home.join(".config/airlock");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("airlock.toml"), text).unwrap();
}

/// `airlock.lock` under `home`, read as `airlock` there reads it.
fn read_lock(home: &Path) -> Result<airlock_host::lock::Lockfile, String> {
    airlock_host::lock::Lockfile::read(
        &home.join(".config/airlock/airlock.lock"),
        Some(&home.join(".local/share/airlock/tools")),
    )
}

/// A tool published to a real registry on loopback and installed by its
/// tag: refused until a `[[trust]]` rule covers the registry and the
/// operator approves what it asks for; then pulled by digest, pinned in
/// airlock.lock, listed by `airlock tools`, called; a file changed after it
/// was installed is refused at load naming both digests; `--locked`
/// reinstalls exactly what is pinned and refuses a tag that moved; an
/// update asking for more needs approving again; a blob tampered with in
/// the registry is refused at install; `airlock remove` takes it out.
#[test]
fn a_tool_goes_through_a_registry_pinned_and_verified() {
    let registry = registry::Registry::start();
    let home = tempfile::tempdir().unwrap();
    let source = home.path().join("patient.wasm");
    std::fs::copy(airlock_tests::guests::PATIENT, &source).unwrap();
    let reference = format!("oci://{}/airlock/patient:1.0.0", registry.addr);
    let net = ["--insecure-registry"];
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(net);
        airlock(home.path(), &all)
    };
    let out = airlock(
        home.path(),
        &["publish", source.to_str().unwrap(), &reference],
    );
    assert_eq!(out.status.code(), Some(1), "plain HTTP needs the flag");
    assert!(
        text(&out.stderr).contains("needs --insecure-registry"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["publish", source.to_str().unwrap(), &reference]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let published = text(&out.stdout);
    let manifest = |said: &str| {
        said.lines()
            .find_map(|l| l.trim().strip_prefix("manifest "))
            .unwrap_or_else(|| panic!("no manifest digest in {said}"))
            .to_string()
    };
    assert!(
        published.contains("--insecure-registry"),
        "the install line it prints needs the flag the push did: {published}"
    );
    // The same bytes under another tag, later: the same manifest.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let again = format!("oci://{}/airlock/patient:1.0.0-again", registry.addr);
    let out = run(&["publish", source.to_str().unwrap(), &again]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(manifest(&text(&out.stdout)), manifest(&published));

    let installed = home.path().join(".local/share/airlock/tools/patient.wasm");
    let out = run(&["install", &reference, "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no [[trust]] rule") && !installed.exists(),
        "{}",
        text(&out.stderr)
    );
    write_config(
        home.path(),
        &format!(
            "[[trust]]\nsource = \"oci://{}/airlock\"\nunsigned = true\n",
            registry.addr
        ),
    );
    let out = run(&["install", &reference]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("run again with --yes") && !installed.exists(),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("it asks for:"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("this configuration grants it:")
            && text(&out.stdout).contains("unsigned (accepted"),
        "{}",
        text(&out.stdout)
    );
    let lock_path = home.path().join(".config/airlock/airlock.lock");
    let lock = read_lock(home.path()).unwrap();
    let entry = lock.get("patient").expect("pinned").clone();
    let lock_text = std::fs::read_to_string(&lock_path).unwrap();
    assert!(
        lock_text.contains("file = \"patient.wasm\"")
            && !lock_text.contains(&*home.path().to_string_lossy()),
        "the lock names its files relative to the tool directory:\n{lock_text}"
    );
    let bytes = std::fs::read(&source).unwrap();
    assert_eq!(entry.source, reference);
    assert!(
        entry.pinned.contains("/airlock/patient@sha256:"),
        "{}",
        entry.pinned
    );
    assert_eq!(entry.blake3, blake3::hash(&bytes).to_hex().to_string());
    assert!(entry.descriptor_blake3.is_some());
    assert_eq!(entry.signed_by, None);
    assert_eq!(entry.file, installed);
    assert_eq!(std::fs::read(&installed).unwrap(), bytes);

    let out = airlock(home.path(), &["call", "patient", r#"{"ms": 0}"#]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = airlock(home.path(), &["tools"]);
    assert!(
        text(&out.stdout).contains(&format!("from     {reference}"))
            && text(&out.stdout).contains("(as pinned)"),
        "{}",
        text(&out.stdout)
    );

    // Changed on disk after it was installed: refused at load; installing
    // again (nothing more asked for) needs no approval.
    let mut changed = bytes.clone();
    changed.extend_from_slice(b"\0\x04\x03abc");
    std::fs::write(&installed, &changed).unwrap();
    let out = airlock(home.path(), &["list"]);
    let listed = text(&out.stdout) + &text(&out.stderr);
    assert!(
        listed.contains(&format!(
            "its BLAKE3 is {}, but airlock.lock pins {}",
            blake3::hash(&changed).to_hex(),
            entry.blake3
        )),
        "{listed}"
    );
    let out = run(&["install", &reference]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&installed).unwrap(), bytes);

    // --locked: what is pinned, exactly, and nothing else.
    std::fs::remove_file(&installed).unwrap();
    let out = run(&["install", "--locked"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&installed).unwrap(), bytes);

    // The lock travels: under another HOME, --locked installs into that
    // HOME's tool directory, and that copy is the one checked and loaded.
    let second = tempfile::tempdir().unwrap();
    let second_config = second.path().join(".config/airlock");
    std::fs::create_dir_all(&second_config).unwrap();
    for file in ["airlock.toml", "airlock.lock"] {
        std::fs::copy(
            home.path().join(".config/airlock").join(file),
            second_config.join(file),
        )
        .unwrap();
    }
    let out = airlock(
        second.path(),
        &["install", "--locked", "--insecure-registry"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let copy = second
        .path()
        .join(".local/share/airlock/tools/patient.wasm");
    assert!(
        text(&out.stdout).contains(&format!("installed {}", copy.display())),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(std::fs::read(&copy).unwrap(), bytes);
    std::fs::write(&copy, b"\0asm\x0d\0\x01\0").unwrap();
    let out = airlock(second.path(), &["list"]);
    assert!(
        (text(&out.stdout) + &text(&out.stderr)).contains("but airlock.lock pins"),
        "the second HOME's copy is checked against the lock: {}",
        text(&out.stdout)
    );
    // A file of a pinned name in another tool directory (a service whose
    // tool_dirs name the first HOME's) is checked too.
    let elsewhere = second.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("patient.wasm"), b"\0asm\x0d\0\x01\0").unwrap();
    let out = airlock(
        second.path(),
        &["--tools", elsewhere.to_str().unwrap(), "list"],
    );
    let listed = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(
        listed.matches("but airlock.lock pins").count(),
        2,
        "both copies are checked: {listed}"
    );
    let other = format!("oci://{}/airlock/other:1", registry.addr);
    let out = run(&["install", "--locked", &other]);
    assert!(
        text(&out.stderr).contains("is not in airlock.lock"),
        "{}",
        text(&out.stderr)
    );

    // The tag moves to a component that asks for more (the workspace,
    // read-write): --locked refuses it, and it is not applied unapproved.
    // The review shows every directory the configuration grants it.
    let data = home.path().join("data");
    std::fs::create_dir(&data).unwrap();
    write_config(
        home.path(),
        &format!(
            "[[trust]]\nsource = \"oci://{}/airlock\"\nunsigned = true\n\n\
             [[tools.fsprobe.mounts]]\nhost = \"{}\"\naccess = \"read-write\"\n",
            registry.addr,
            data.display()
        ),
    );
    let bigger = home.path().join("fsprobe.wasm");
    std::fs::copy(airlock_tests::guests::FSPROBE, &bigger).unwrap();
    let out = run(&["publish", bigger.to_str().unwrap(), &reference]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["install", "--locked", &reference]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("but airlock.lock pins {}", entry.manifest_digest)),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["install", &reference]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("asks for more than the version airlock.lock pins")
            && text(&out.stdout).contains("+ workspace read-write")
            && text(&out.stdout).contains(&format!(
                "it replaces patient ({}), which {reference} named before",
                entry.pinned
            ))
            && text(&out.stdout).contains(&format!(
                "directories  read-write ({}, seen as",
                data.display()
            )),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !home
            .path()
            .join(".local/share/airlock/tools/fsprobe.wasm")
            .exists()
    );
    let out = run(&["install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lock = read_lock(home.path()).unwrap();
    assert_eq!(lock.get("fsprobe").unwrap().asks, ["workspace read-write"]);
    // It takes the place of the tool the tag named before: one source
    // pins one tool.
    assert!(
        text(&out.stdout).contains(&format!(
            "replaced patient ({}), which {reference} named before: {} removed",
            entry.pinned,
            installed.display()
        )),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(lock.tools.len(), 1, "{lock:?}");
    assert!(!installed.exists());

    // The tag moves back to a tool that asks for less: a tool in another's
    // place still needs approving.
    let out = run(&["publish", source.to_str().unwrap(), &reference]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["install", &reference]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("it replaces fsprobe (")
            && text(&out.stderr).contains("run again with --yes"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let lock = read_lock(home.path()).unwrap();
    assert!(lock.get("fsprobe").is_some() && lock.get("patient").is_none());

    // A second install while one holds the lock is refused, not interleaved.
    let guard =
        std::fs::File::create(home.path().join(".config/airlock/airlock.lock.guard")).unwrap();
    guard.lock().unwrap();
    let out = run(&["install", &entry.pinned]);
    assert!(
        text(&out.stderr).contains("another airlock is installing"),
        "{}",
        text(&out.stderr)
    );
    drop(guard);

    // A layer tampered with in the registry: refused, nothing installed.
    let blob = registry.blob_file(&entry.layer_digest);
    let mut tampered = std::fs::read(&blob).unwrap();
    *tampered.last_mut().unwrap() ^= 1;
    std::fs::write(&blob, &tampered).unwrap();
    let out = run(&["install", &entry.pinned]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&entry.layer_digest),
        "{}",
        text(&out.stderr)
    );
    assert!(!installed.exists());

    let out = airlock(home.path(), &["remove", "fsprobe"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lock = read_lock(home.path()).unwrap();
    assert!(lock.get("fsprobe").is_none());
}

/// Signatures: a tool signed with one key is refused when the operator
/// trusts another, and installed (its signer recorded and shown) when it
/// trusts that key; an unsigned one is refused from a source that needs
/// signatures; a registry that does not answer is given up on in time.
#[test]
fn signatures_decide_what_installs() {
    let registry = registry::Registry::start();
    let home = tempfile::tempdir().unwrap();
    let keys = home.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    for name in ["publisher", "stranger"] {
        let path = keys.join(name);
        let out = airlock(home.path(), &["keygen", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = airlock(
        home.path(),
        &["keygen", keys.join("publisher").to_str().unwrap()],
    );
    assert!(
        text(&out.stderr).contains("exists"),
        "{}",
        text(&out.stderr)
    );
    let source = home.path().join("patient.wasm");
    std::fs::copy(airlock_tests::guests::PATIENT, &source).unwrap();
    let signed = format!("oci://{}/acme/patient:1", registry.addr);
    let unsigned = format!("oci://{}/acme/fsprobe:1", registry.addr);
    let publisher = keys.join("publisher");
    // `airlock publish FILE REFERENCE [--sign KEY]` to the test's registry,
    // with COSIGN_PASSWORD as given (unset without one).
    let publishing = |file: &Path, reference: &str, key: Option<&Path>, password: Option<&str>| {
        let mut args = vec!["publish", file.to_str().unwrap(), reference];
        if let Some(key) = key {
            args.extend(["--sign", key.to_str().unwrap()]);
        }
        args.push("--insecure-registry");
        let mut command = command(home.path(), &args);
        match password {
            Some(password) => command.env("COSIGN_PASSWORD", password),
            None => command.env_remove("COSIGN_PASSWORD"),
        };
        command
    };
    let out = publishing(&source, &signed, Some(&publisher), None)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("signed by sha256:"),
        "{}",
        text(&out.stdout)
    );
    // Another component: the same bytes published within the same second
    // would be the same manifest, which the signature covers.
    let other = home.path().join("fsprobe.wasm");
    std::fs::copy(airlock_tests::guests::FSPROBE, &other).unwrap();
    let out = publishing(&other, &unsigned, None, None).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    let trust = |key: &str| {
        write_config(
            home.path(),
            &format!(
                "[[trust]]\nsource = \"oci://{}/acme\"\nkeys = [\"{}\"]\n",
                registry.addr,
                keys.join(format!("{key}.pub")).display()
            ),
        );
    };
    let install = |reference: &str| {
        airlock(
            home.path(),
            &["install", reference, "--yes", "--insecure-registry"],
        )
    };
    let installed = home.path().join(".local/share/airlock/tools/patient.wasm");
    trust("stranger");
    let out = install(&signed);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("none of them by a key") && !installed.exists(),
        "{}",
        text(&out.stderr)
    );
    trust("publisher");
    let out = install(&unsigned);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not signed")
            && !home
                .path()
                .join(".local/share/airlock/tools/fsprobe.wasm")
                .exists(),
        "{}",
        text(&out.stderr)
    );
    let out = install(&signed);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lock = read_lock(home.path()).unwrap();
    let signer = lock.get("patient").unwrap().signed_by.clone().unwrap();
    assert!(signer.contains("publisher.pub"), "{signer}");
    let out = airlock(home.path(), &["tools"]);
    assert!(text(&out.stdout).contains(&signer), "{}", text(&out.stdout));

    // A key `cosign generate-key-pair` made, opened with COSIGN_PASSWORD as
    // cosign opens it (host/oci/tests/fixtures: its password is `qwerty`).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../oci/tests/fixtures");
    let cosign_key = fixtures.join("cosign-qwerty.key");
    let cosigned = format!("oci://{}/acme/cosigned:1", registry.addr);
    let publish_with = |password| {
        publishing(&other, &cosigned, Some(&cosign_key), password)
            .output()
            .unwrap()
    };
    let out = publish_with(None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("set COSIGN_PASSWORD"),
        "{}",
        text(&out.stderr)
    );
    let out = publish_with(Some("qwerty!"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("the password does not open it"),
        "{}",
        text(&out.stderr)
    );
    // Without COSIGN_PASSWORD, at a terminal, it asks, as cosign does; what
    // is typed is not shown (the key is named as cosign names it, so the
    // password shows nowhere in the output unless echoed).
    #[cfg(unix)]
    {
        let user_key = keys.join("cosign.key");
        std::fs::copy(&cosign_key, &user_key).unwrap();
        for (typed, published) in [("qwerty!\n", false), ("qwerty\n", true)] {
            let prompt = "Enter password for private key: ";
            let (status, shown) = at_terminal(
                publishing(&other, &cosigned, Some(&user_key), None),
                prompt,
                typed,
            );
            assert_eq!(status.success(), published, "{shown}");
            assert!(!shown.contains("qwerty"), "{shown}");
            let said = if published {
                "signed by"
            } else {
                "the password does not open it"
            };
            assert!(shown.contains(said), "{shown}");
        }
    }
    let out = publish_with(Some("qwerty"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    write_config(
        home.path(),
        &format!(
            "[[trust]]\nsource = \"oci://{}/acme\"\nkeys = [\"{}\", \"{}\"]\n",
            registry.addr,
            keys.join("publisher.pub").display(),
            fixtures.join("cosign-qwerty.pub").display()
        ),
    );
    let out = install(&cosigned);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lock = read_lock(home.path()).unwrap();
    let signer = lock.get("fsprobe").unwrap().signed_by.clone().unwrap();
    assert!(signer.contains("cosign-qwerty.pub"), "{signer}");

    // A registry that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    write_config(
        home.path(),
        &format!("[[trust]]\nsource = \"oci://127.0.0.1:{port}\"\nunsigned = true\n"),
    );
    let out = airlock(
        home.path(),
        &[
            "install",
            &format!("oci://127.0.0.1:{port}/acme/patient:1"),
            "--yes",
            "--insecure-registry",
            "--registry-timeout",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("did not finish within 1 s"),
        "{}",
        text(&out.stderr)
    );
    drop(silent);
}

/// `patient`, installed signed by acme's key from `oci://REG/acme` and
/// updated there (signed by the same key, asking for no more: applied
/// without asking, as before), then taken over by another `patient` (other
/// bytes) published at `oci://REG/{path}`, signed by `signer`'s key or
/// unsigned, which `change` says how it differs in. Installing that is a
/// new decision: without `--yes` and off a terminal it is refused, the
/// review showing both tools' source, signer and digest; `--locked`
/// refuses it; airlock.lock and the file stay as they were. With `--yes`
/// it replaces the pinned tool, and says so.
fn a_pinned_tool_taken_over(path: &str, signer: Option<&str>, change: &str) {
    let registry = registry::Registry::start();
    let home = tempfile::tempdir().unwrap();
    let keys = home.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    for name in ["acme", "beta"] {
        let out = airlock(home.path(), &["keygen", keys.join(name).to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let key = |name: &str| keys.join(format!("{name}.pub")).display().to_string();
    write_config(
        home.path(),
        &format!(
            "[[trust]]\nsource = \"oci://{reg}/acme\"\nkeys = [\"{acme}\", \"{beta}\"]\n\n\
             [[trust]]\nsource = \"oci://{reg}/acme/unsigned\"\nunsigned = true\n\n\
             [[trust]]\nsource = \"oci://{reg}/beta\"\nkeys = [\"{beta}\"]\n",
            reg = registry.addr,
            acme = key("acme"),
            beta = key("beta"),
        ),
    );
    // The same tool, `patient`, as other bytes each time (a custom section
    // of its own), published to `reference`, signed by `signer` if any;
    // returns the manifest's digest.
    let publish = |reference: &str, variant: &str, signer: Option<&str>| {
        let mut bytes = std::fs::read(airlock_tests::guests::PATIENT).unwrap();
        bytes.extend_from_slice(&[0, 4, 3]);
        bytes.extend_from_slice(variant.as_bytes());
        let file = home.path().join(format!("patient-{variant}.wasm"));
        std::fs::write(&file, &bytes).unwrap();
        let mut args = vec!["publish", file.to_str().unwrap(), reference];
        let signing = signer.map(|s| keys.join(s));
        if let Some(path) = &signing {
            args.extend(["--sign", path.to_str().unwrap()]);
        }
        args.push("--insecure-registry");
        let out = airlock(home.path(), &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("manifest "))
            .unwrap_or_else(|| panic!("no manifest digest in {stdout}"))
            .to_string()
    };
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.push("--insecure-registry");
        airlock(home.path(), &all)
    };
    let pinned = || {
        read_lock(home.path())
            .unwrap()
            .get("patient")
            .expect("patient is pinned")
            .clone()
    };
    let installed = home.path().join(".local/share/airlock/tools/patient.wasm");

    let first = format!("oci://{}/acme/patient:1", registry.addr);
    publish(&first, "one", Some("acme"));
    let out = run(&["install", &first, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let update = format!("oci://{}/acme/patient:2", registry.addr);
    let update_digest = publish(&update, "two", Some("acme"));
    let out = run(&["install", &update]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("it replaces"),
        "{}",
        text(&out.stdout)
    );
    let before = pinned();
    assert_eq!(
        (before.source.as_str(), before.manifest_digest.as_str()),
        (update.as_str(), update_digest.as_str())
    );
    let old_signer = before.signed_by.clone().expect("signed by acme");
    assert!(old_signer.contains("acme.pub"), "{old_signer}");
    let bytes = std::fs::read(&installed).unwrap();

    let reference = format!("oci://{}/{path}", registry.addr);
    let digest = publish(&reference, "new", signer);
    let new_signer = signer.map_or("none (unsigned)".to_string(), |s| {
        format!("{} ({})", fingerprint(&key(s)), key(s))
    });
    let out = run(&["install", &reference]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "it replaces patient as airlock.lock pins it, {change}:"
        )) && stdout.contains(&format!("from     {update}"))
            && stdout.contains(&format!("pinned   {}", before.pinned))
            && before.pinned.ends_with(&update_digest)
            && stdout.contains(&format!("signer   {old_signer}"))
            && stdout.contains(&format!("from     {reference}"))
            && stdout.contains(&format!("@{digest}\n"))
            && stdout.contains(&format!("signer   {new_signer}"))
            && stdout.contains("it asks for:")
            && stderr.contains("run again with --yes"),
        "{stdout}{stderr}"
    );
    let out = run(&["install", "--locked", &reference]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--locked changes nothing"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(pinned(), before);
    assert_eq!(std::fs::read(&installed).unwrap(), bytes);

    let out = run(&["install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!(
            "it replaces patient as airlock.lock pins it, {change}:"
        )),
        "{}",
        text(&out.stdout)
    );
    let after = pinned();
    assert_eq!(
        (after.source.as_str(), after.manifest_digest.as_str()),
        (reference.as_str(), digest.as_str())
    );
    let out = airlock(home.path(), &["tools"]);
    assert!(
        text(&out.stdout).contains(&format!("from     {reference}"))
            && text(&out.stdout).contains(&format!("signer   {new_signer}")),
        "{}",
        text(&out.stdout)
    );
}

/// The issue's case: a signed tool, and the unsigned source's tool of its
/// name.
#[test]
fn an_unsigned_source_does_not_silently_replace_a_signed_tool() {
    a_pinned_tool_taken_over(
        "acme/unsigned/patient:1",
        None,
        "from another source and unsigned",
    );
}

#[test]
fn another_trusted_source_and_key_do_not_silently_replace_a_pinned_tool() {
    a_pinned_tool_taken_over(
        "beta/patient:1",
        Some("beta"),
        "from another source and signed by another key",
    );
}

#[test]
fn another_trusted_key_does_not_silently_replace_a_pinned_tool() {
    a_pinned_tool_taken_over("acme/patient:3", Some("beta"), "signed by another key");
}

/// The fingerprint `airlock` names the public key in `path` by.
fn fingerprint(path: &str) -> String {
    let pem = std::fs::read_to_string(path).unwrap();
    airlock_oci::PublicKey::from_pem(&pem)
        .unwrap()
        .fingerprint()
}

/// A first start whose stderr is a pipe the reader closed (a client that
/// read one line and went) still compiles its tools: the compile lines
/// that cannot be written are dropped. They made each compile panic, and
/// the failure was remembered in the cache, so every later start found
/// no tools ("the compiler thread failed").
#[test]
fn a_closed_stderr_neither_fails_a_compile_nor_poisons_the_cache() {
    let home = tempfile::tempdir().unwrap();
    let mut child = command(home.path(), &["list"])
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    let listed = text(&out.stdout);
    assert!(
        listed.contains("read") && listed.contains("bash"),
        "{listed}"
    );
    let out = command(home.path(), &["list"])
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("compiler thread"), "{stderr}");
    assert!(text(&out.stdout).contains("bash"), "{}", text(&out.stdout));
}
