//! Real programs confined on the real kernel: what they may do, what is
//! held (with the error the program sees), and the whole tree stopped.
//! The test binary is its own sandbox helper (its `main` calls
//! `serve_if_asked` first), so it runs without the test harness: cases
//! are plain functions, run one after another, filtered by name.

use airlock_native::{Confinement, Helper, Refused};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PYTHON: &str = "/usr/bin/python3";

fn main() -> std::process::ExitCode {
    airlock_native::serve_if_asked();
    let cases: &[(&str, fn())] = &[
        ("probe_reports_ready", probe_reports_ready),
        (
            "the_probe_holds_wherever_the_hosts_tmpdir_is",
            the_probe_holds_wherever_the_hosts_tmpdir_is,
        ),
        (
            "grants_are_read_and_written_as_given",
            grants_are_read_and_written_as_given,
        ),
        (
            "a_read_only_call_writes_nothing",
            a_read_only_call_writes_nothing,
        ),
        (
            "nothing_outside_the_grants_is_there",
            nothing_outside_the_grants_is_there,
        ),
        (
            "no_network_and_no_host_sockets",
            no_network_and_no_host_sockets,
        ),
        (
            "granted_hosts_are_reached_through_the_proxy_only",
            granted_hosts_are_reached_through_the_proxy_only,
        ),
        ("no_privileges_survive", no_privileges_survive),
        (
            "processes_and_memory_are_bounded",
            processes_and_memory_are_bounded,
        ),
        (
            "a_fork_bomb_as_a_user_is_bounded_too",
            a_fork_bomb_as_a_user_is_bounded_too,
        ),
        ("the_whole_tree_is_killed", the_whole_tree_is_killed),
        (
            "a_program_goes_when_its_host_is_killed_outright",
            a_program_goes_when_its_host_is_killed_outright,
        ),
        (
            "git_reads_in_parallel_and_commits_only_when_writable",
            git_reads_and_commits,
        ),
        (
            "a_program_started_ahead_runs_in_the_spare_with_its_input",
            a_program_started_ahead_runs_in_the_spare_with_its_input,
        ),
        (
            "a_spare_that_died_is_replaced",
            a_spare_that_died_is_replaced,
        ),
        (
            "a_spare_goes_when_its_host_is_killed_outright",
            a_spare_goes_when_its_host_is_killed_outright,
        ),
        (
            "a_program_in_a_spare_goes_with_its_host_and_leaves_no_cgroup",
            a_program_in_a_spare_goes_with_its_host_and_leaves_no_cgroup,
        ),
        (
            "programs_that_could_be_replaced_are_refused",
            programs_that_could_be_replaced_are_refused,
        ),
        (
            "a_binary_that_is_not_a_helper_is_refused",
            a_binary_that_is_not_a_helper_is_refused,
        ),
    ];
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let (mut failed, mut ran) = (Vec::new(), 0);
    for (name, case) in cases {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let result = std::panic::catch_unwind(case);
        println!(
            "test {name} ... {}",
            if result.is_ok() { "ok" } else { "FAILED" }
        );
        if result.is_err() {
            failed.push(*name);
        }
    }
    let (passed, outcome) = (
        ran - failed.len(),
        if failed.is_empty() { "ok" } else { "FAILED" },
    );
    println!(
        "\ntest result: {outcome}. {passed} passed; {} failed",
        failed.len()
    );
    if failed.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        println!("failed: {failed:?}");
        std::process::ExitCode::FAILURE
    }
}

fn helper() -> Helper {
    Helper::current_exe().expect("the test binary is found")
}

/// A workspace with `a.txt`, and a directory beside it that is not granted
/// holding `secret.txt`.
struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("a.txt"), "a b\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "s3cret\n").unwrap();
    Scratch {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        _dir: dir,
    }
}

fn writable(ws: &Path) -> Confinement {
    let mut confinement = Confinement::new(ws);
    confinement.write(ws);
    confinement
}

fn run(confinement: &Confinement, program: &str, args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut command, _dir) = helper()
        .command(confinement, Path::new(program), &args)
        .expect("the program may run");
    command
        .stdin(Stdio::null())
        .output()
        .expect("the helper starts")
}

fn python(confinement: &Confinement, code: &str) -> (i32, String) {
    let out = run(confinement, PYTHON, &["-c", code]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn probe_reports_ready() {
    assert_eq!(helper().check(), Ok(()));
}

fn the_probe_holds_wherever_the_hosts_tmpdir_is() {
    let before = std::env::var_os("TMPDIR");
    // SAFETY: the cases run one after another on the main thread, and no
    // other thread of this binary reads the environment.
    unsafe { std::env::set_var("TMPDIR", "/var/tmp") };
    let checked = Helper::new(std::env::current_exe().unwrap()).check();
    // SAFETY: as above.
    unsafe {
        match before {
            Some(dir) => std::env::set_var("TMPDIR", dir),
            None => std::env::remove_var("TMPDIR"),
        }
    }
    assert_eq!(checked, Ok(()));
}

fn grants_are_read_and_written_as_given() {
    let s = scratch();
    let (code, text) = python(
        &writable(&s.ws),
        "import os; print(open('a.txt').read().split()); open('b.txt','w').write('new'); \
         print(os.getcwd()); print(sorted(os.environ))",
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("['a', 'b']"), "{text}");
    assert!(text.contains(&s.ws.display().to_string()), "{text}");
    assert!(
        text.contains("['HOME', 'LANG', 'LC_CTYPE', 'PATH', 'TMPDIR']")
            || text.contains("['HOME', 'LANG', 'PATH', 'TMPDIR']"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(s.ws.join("b.txt")).unwrap(), "new");
}

fn a_read_only_call_writes_nothing() {
    let s = scratch();
    let confinement = writable(&s.ws).read_only();
    let (code, text) = python(&confinement, "open('b.txt','w').write('new')");
    assert_ne!(code, 0);
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(!s.ws.join("b.txt").exists());
    let (code, text) = python(&confinement, "print(open('a.txt').read())");
    assert_eq!((code, text.trim()), (0, "a b"));
}

fn nothing_outside_the_grants_is_there() {
    let s = scratch();
    let secret = s.outside.join("secret.txt").display().to_string();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    for path in [
        secret.as_str(),
        &home,
        "/etc/shadow",
        "/proc/1/root/etc/shadow",
        "/root/.ssh",
    ] {
        let (code, text) = python(&writable(&s.ws), &format!("open({path:?}).read()"));
        assert_ne!(code, 0, "{path}: {text}");
        assert!(
            text.contains("No such file or directory")
                || text.contains("Permission denied")
                || text.contains("Is a directory"),
            "{path}: {text}"
        );
        assert!(!text.contains("s3cret"), "{text}");
    }
    // A hard link made inside the grant to a file outside it.
    let (code, text) = python(
        &writable(&s.ws),
        &format!("import os; os.link({secret:?}, 'hl')"),
    );
    assert_ne!(code, 0);
    assert!(text.contains("No such file or directory"), "{text}");
    // The private /tmp is empty, writable, and not the host's.
    let marker = std::env::temp_dir().join("airlock-native-marker");
    std::fs::write(&marker, "host").unwrap();
    let (code, text) = python(
        &writable(&s.ws),
        "import os; open('/tmp/x','w').write('1'); print(sorted(os.listdir('/tmp')))",
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("'x'") && !text.contains("airlock-native-marker"),
        "{text}"
    );
    let _ = std::fs::remove_file(marker);
}

fn no_network_and_no_host_sockets() {
    let s = scratch();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (code, text) = python(
        &writable(&s.ws),
        &format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"),
    );
    assert_ne!(code, 0);
    assert!(
        text.contains("Permission denied") || text.contains("Network is unreachable"),
        "{text}"
    );
    // A path-named unix socket outside the grants.
    let path = s.outside.join("host.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let (code, text) = python(
        &writable(&s.ws),
        &format!(
            "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?})",
            path.display().to_string()
        ),
    );
    assert_ne!(code, 0);
    assert!(text.contains("No such file or directory"), "{text}");
}

/// An HTTP server on the host's loopback answering `hello` to anything.
fn hello_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut head = Vec::new();
                let mut byte = [0];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
            });
        }
    });
    port
}

fn granted_hosts_are_reached_through_the_proxy_only() {
    let s = scratch();
    let port = hello_server();
    let proxy = airlock_native::Proxy::start(std::sync::Arc::new(
        move |method: &str, host: &str, p| match (host, p) {
            ("127.0.0.1", p) if p == port => Ok(()),
            _ => Err(format!("{method} to {host}:{p} is not granted")),
        },
    ))
    .unwrap();
    let mut confinement = writable(&s.ws);
    confinement.proxy = Some(proxy.socket());
    let code = format!(
        r#"
import os, socket, urllib.request, urllib.error
print(urllib.request.urlopen("http://127.0.0.1:{port}/x", timeout=5).read().decode())
try:
    urllib.request.urlopen("http://127.0.0.2:{port}/x", timeout=5)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)[1]
tunnel = socket.create_connection(("127.0.0.1", int(proxy)), timeout=5)
tunnel.sendall(b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")
print(tunnel.recv(100).split(b"\r\n")[0].decode())
tunnel.sendall(b"GET / HTTP/1.1\r\n\r\n")
print(tunnel.recv(100).split(b"\r\n\r\n")[1].decode())
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
except OSError as e:
    print("direct:", e)
others = [d for d in os.listdir("/proc") if d.isdigit() and int(d) not in (1, os.getpid())]
caps = [l.split()[1] for d in others for l in open(f"/proc/{{d}}/status") if l.startswith(("CapEff", "CapPrm"))]
print("forwarder:", sorted(set(caps)))
"#
    );
    let (status, text) = python(&confinement, &code);
    assert_eq!(status, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "hello", "{text}");
    assert_eq!(
        lines[1],
        format!("403 airlock: GET to 127.0.0.2:{port} is not granted"),
        "{text}"
    );
    assert_eq!(lines[2], "HTTP/1.1 200 Connection established", "{text}");
    assert_eq!(lines[3], "hello", "{text}");
    assert!(lines[4].contains("Permission denied"), "{text}");
    // The forwarder, the one other process there, holds no capability.
    assert_eq!(lines[5], "forwarder: ['0000000000000000']", "{text}");
}

fn no_privileges_survive() {
    let s = scratch();
    let (code, text) = python(
        &writable(&s.ws),
        "print([l for l in open('/proc/self/status') if l.split(':')[0] in ('CapEff','CapBnd','NoNewPrivs','Seccomp')])",
    );
    assert_eq!(code, 0, "{text}");
    for want in [
        "CapEff:\\t0000000000000000",
        "CapBnd:\\t0000000000000000",
        "NoNewPrivs:\\t1",
        "Seccomp:\\t2",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
    // ptrace, mount and a new namespace are refused.
    let (code, text) = python(
        &writable(&s.ws),
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
         print(libc.ptrace(0, 0, 0, 0), ctypes.get_errno()); \
         print(libc.mount(b'x', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno()); \
         print(libc.unshare(0x10000000), ctypes.get_errno()); \
         print(libc.syscall(0x40000000 | 521, 0, 0, 0, 0), ctypes.get_errno())",
    );
    assert_eq!(code, 0, "{text}");
    // The last is ptrace by its x32 number: EPERM from the filter, where a
    // kernel without x32 would say ENOSYS (38) and one with it would run it.
    assert_eq!(
        text.trim(),
        "-1 1\n-1 1\n-1 1\n-1 1",
        "EPERM for each: {text}"
    );
}

fn processes_and_memory_are_bounded() {
    let s = scratch();
    let mut confinement = writable(&s.ws);
    confinement.limits.processes = 32;
    confinement.limits.memory_bytes = Some(1 << 30);
    let (code, text) = python(&confinement, FORK_BOMB);
    stopped_at_32(Some(code), &text);
    let (code, text) = python(&confinement, "bytearray(3 << 30)");
    assert_ne!(code, 0);
    assert!(text.contains("MemoryError"), "{text}");
}

/// The same fork bomb, the helper started as an unprivileged user (as a
/// service that drops to its own user would): no pids cgroup can be made
/// there, and `RLIMIT_NPROC` bounds the user's processes.
fn a_fork_bomb_as_a_user_is_bounded_too() {
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    let mut confinement = Confinement::new("/tmp");
    confinement.limits.processes = 32;
    let args = ["-c".to_string(), FORK_BOMB.to_string()];
    let (mut command, root) = helper()
        .command(&confinement, Path::new(PYTHON), &args)
        .expect("the program may run");
    std::os::unix::fs::chown(root.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    let out = command
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::null())
        .output()
        .expect("the helper starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    stopped_at_32(out.status.code(), &text);
}

/// Forks until refused (each child sleeping), then prints how many it made.
const FORK_BOMB: &str = "import os, time\nn = 0\ntry:\n    while n < 400:\n        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('forked', n, 'then', e.strerror)\n";

/// Asserts that [`FORK_BOMB`] ran and was stopped at 32 processes, itself
/// included: 31 children (the helper and pid 1 are not the program's).
fn stopped_at_32(code: Option<i32>, text: &str) {
    assert_eq!(code, Some(0), "{text}");
    let forked: usize = text
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the fork bomb was not stopped: {text}"));
    assert_eq!(forked, 31, "{text}");
}

/// Whether a process whose command line holds `pattern` runs.
fn running(pattern: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A host killed with SIGKILL (no chance to kill its helpers) takes its
/// confined programs with it: the helper watches it.
fn a_program_goes_when_its_host_is_killed_outright() {
    let marker = format!("{}.75", 1000 + std::process::id() % 1000);
    let (command, _dir) = confined_sleep(&marker);
    // A stand-in for the host: a process that starts the helper, then is
    // killed outright.
    let host = Command::new(PYTHON)
        .args([
            "-c",
            "import subprocess as s, sys, time; s.Popen(sys.argv[1:], stdout=s.DEVNULL, stderr=s.DEVNULL); time.sleep(100)",
        ])
        .arg(command.get_program())
        .env_clear()
        .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    goes_with_its_host(host, &format!("sleep {marker}"));
}

/// The helper's command for `sleep SECONDS`, confined to `/tmp`.
fn confined_sleep(seconds: &str) -> (Command, airlock_native::CallDir) {
    helper()
        .command(
            &Confinement::new("/tmp"),
            Path::new("/bin/sleep"),
            &[seconds.to_string()],
        )
        .unwrap()
}

/// Once a process matching `pattern` runs, kills `host` outright and
/// waits (5 s at most) for that process to be gone.
fn goes_with_its_host(mut host: std::process::Child, pattern: &str) {
    let started = Instant::now();
    while !running(pattern) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{pattern} never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    host.kill().unwrap();
    let _ = host.wait();
    let killed = Instant::now();
    while running(pattern) {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "{pattern} outlived its host"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn the_whole_tree_is_killed() {
    let s = scratch();
    let marker = format!("{}", 1000 + std::process::id() % 1000);
    let args: Vec<String> = [
        "-c",
        &format!("setsid sleep {marker}.5 & sleep {marker}.25"),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let (mut command, _dir) = helper()
        .command(&writable(&s.ws), Path::new("/bin/sh"), &args)
        .unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let alive = running;
    assert!(
        alive(&format!("sleep {marker}.5")),
        "the detached sleep started"
    );
    // Kill the helper's process group, as the host does.
    let group = format!("-{}", child.id());
    Command::new("kill")
        .args(["-KILL", "--", &group])
        .status()
        .unwrap();
    let _ = child.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(&format!("sleep {marker}.5")) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(&format!("sleep {marker}.5")),
        "setsid escaped the kill"
    );
    assert!(!alive(&format!("sleep {marker}.25")));
}

/// This process's children that are spare helpers, waiting for a plan.
fn spares() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The parent is the second field after the command's `)`.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let waiting = environ
            .split(|b| *b == 0)
            .any(|var| var == b"AIRLOCK_SANDBOX_PLAN=stdin");
        if parent == Some(me.as_str()) && waiting && running_pid(pid) {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` runs (is not a zombie).
fn running_pid(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_string())
        })
        .is_some_and(|rest| !rest.starts_with('Z'))
}

/// A program started with `Helper::start` runs in the helper `refill`
/// started ahead of it (the same process), with what is written on its
/// stdin after the plan as its input, and its grants.
fn a_program_started_ahead_runs_in_the_spare_with_its_input() {
    use std::io::Write;
    let s = scratch();
    let helper = helper();
    helper.refill();
    helper.refill();
    let waiting = spares();
    assert_eq!(waiting.len(), 1, "one spare waits, however often refilled");
    let code = "import sys; open('out.txt', 'w').write(sys.stdin.read().upper()); print('done')";
    let (mut child, _dir) = helper
        .start(
            &writable(&s.ws),
            Path::new(PYTHON),
            &["-c".into(), code.into()],
        )
        .unwrap();
    assert_eq!(child.id(), waiting[0], "the program ran in the spare");
    child.stdin.take().unwrap().write_all(b"hello").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n", "{out:?}");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("out.txt")).unwrap(),
        "HELLO"
    );
    assert!(spares().is_empty(), "the spare was used up");
    // Still confined: what lies outside the grants is not there.
    let (mut child, _dir) = helper
        .start(
            &writable(&s.ws),
            Path::new("/bin/cat"),
            &[s.outside.join("secret.txt").display().to_string()],
        )
        .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No such file or directory"),
        "{out:?}"
    );
}

/// A spare that died before its program came is replaced by a helper
/// started then.
fn a_spare_that_died_is_replaced() {
    let helper = helper();
    helper.refill();
    let waiting = spares();
    assert_eq!(waiting.len(), 1);
    Command::new("kill")
        .args(["-KILL", &waiting[0].to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while running_pid(waiting[0]) {
        assert!(Instant::now() < deadline, "the spare was not killed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (child, _dir) = helper
        .start(
            &Confinement::new("/tmp"),
            Path::new("/bin/echo"),
            &["hi".into()],
        )
        .unwrap();
    assert_ne!(child.id(), waiting[0]);
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n", "{out:?}");
}

/// A spare whose host is killed outright, before any plan came, goes too
/// (its stdin ends).
fn a_spare_goes_when_its_host_is_killed_outright() {
    let marker = format!("spare-{}", std::process::id());
    let exe = std::env::current_exe().unwrap();
    let host = Command::new(PYTHON)
        .args([
            "-c",
            "import subprocess as s, sys, time; s.Popen(sys.argv[1:], stdin=s.PIPE, stdout=s.DEVNULL, stderr=s.DEVNULL, env={'AIRLOCK_SANDBOX_PLAN': 'stdin'}); time.sleep(100)",
        ])
        .arg(&exe)
        .arg(&marker)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    goes_with_its_host(host, &marker);
}

/// A spare running its program when its host is killed outright takes
/// the program with it and (as root) leaves and removes the pids cgroup
/// it joined, which the host would have removed.
fn a_program_in_a_spare_goes_with_its_host_and_leaves_no_cgroup() {
    let marker = format!("{}.625", 1000 + std::process::id() % 1000);
    let group = format!("airlock-sandbox-test-{}", std::process::id());
    let (command, _dir) = confined_sleep(&marker);
    let plan = command
        .get_envs()
        .find(|(k, _)| *k == "AIRLOCK_SANDBOX_PLAN")
        .and_then(|(_, v)| v)
        .unwrap()
        .to_owned();
    // A stand-in for the host: starts a spare, hands it the plan as the
    // host does, then is killed outright.
    let host = Command::new(PYTHON)
        .args([
            "-c",
            "import subprocess as s, sys, struct, time\n\
             plan = sys.argv[1].encode()\n\
             p = s.Popen(sys.argv[3:], stdin=s.PIPE, stdout=s.DEVNULL, stderr=s.DEVNULL, env={'AIRLOCK_SANDBOX_PLAN': 'stdin', 'AIRLOCK_SANDBOX_GROUP': sys.argv[2]})\n\
             p.stdin.write(struct.pack('<Q', len(plan)) + plan); p.stdin.flush()\n\
             time.sleep(100)",
        ])
        .arg(&plan)
        .arg(&group)
        .arg(std::env::current_exe().unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    goes_with_its_host(host, &format!("sleep {marker}"));
    let killed = Instant::now();
    while let Some(left) = cgroup(&group) {
        assert!(
            killed.elapsed() < Duration::from_secs(2),
            "{} outlived its host",
            left.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids cgroup `name` under this process's own, if there is one
/// (cgroup v1's pids hierarchy, or v2's).
fn cgroup(name: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    own.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let root = match controllers {
                "" => "/sys/fs/cgroup",
                c if c.split(',').any(|c| c == "pids") => "/sys/fs/cgroup/pids",
                _ => return None,
            };
            Some(
                Path::new(root)
                    .join(path.trim_start_matches('/'))
                    .join(name),
            )
        })
        .find(|group| group.exists())
}

fn git_reads_and_commits() {
    let s = scratch();
    let git = |confinement: &Confinement, args: &[&str]| {
        let mut all = vec!["-c", "user.name=t", "-c", "user.email=t@e"];
        all.extend_from_slice(args);
        let out = run(confinement, &git_path(), &all);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let rw = writable(&s.ws);
    let ro = writable(&s.ws).read_only();
    assert_eq!(git(&rw, &["init", "-q"]).0, Some(0));
    assert_eq!(git(&rw, &["add", "a.txt"]).0, Some(0));
    assert_eq!(git(&rw, &["commit", "-qm", "first"]).0, Some(0));
    std::fs::write(s.ws.join("a.txt"), "changed\n").unwrap();
    let reads: Vec<_> = (0..3)
        .map(|_| {
            let ro = ro.clone();
            std::thread::spawn(move || {
                let out = run(&ro, &git_path(), &["status", "--short"]);
                (
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout).to_string(),
                )
            })
        })
        .collect();
    for read in reads {
        assert_eq!(read.join().unwrap(), (Some(0), " M a.txt\n".to_string()));
    }
    let head = || {
        let branch = s.ws.join(".git/refs/heads").read_dir().unwrap().next();
        std::fs::read(branch.unwrap().unwrap().path()).unwrap()
    };
    let before = head();
    let index = std::fs::read(s.ws.join(".git/index")).unwrap();
    let (code, text) = git(&ro, &["commit", "-qam", "read-only"]);
    assert_eq!(code, Some(128), "{text}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert_eq!(std::fs::read(s.ws.join(".git/index")).unwrap(), index);
    assert!(!s.ws.join(".git/index.lock").exists());
    assert_eq!(before, head());
    assert_eq!(git(&rw, &["commit", "-qam", "second"]).0, Some(0));
}

fn git_path() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let git = std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|git| git.is_file())
        .expect("git is installed");
    git.display().to_string()
}

fn programs_that_could_be_replaced_are_refused() {
    let s = scratch();
    let program = s.ws.join("tool.sh");
    std::fs::write(&program, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let refused = helper()
        .command(&writable(&s.ws), &program, &[])
        .unwrap_err();
    assert!(refused.0.contains("could be replaced"), "{refused}");
    let refused = helper()
        .command(&writable(&s.ws), Path::new("git"), &[])
        .unwrap_err();
    assert!(refused.0.contains("not an absolute path"), "{refused}");
}

fn a_binary_that_is_not_a_helper_is_refused() {
    let refused: Refused = Helper::new("/bin/true").check().unwrap_err();
    assert!(refused.0.contains("is not a sandbox helper"), "{refused}");
}
