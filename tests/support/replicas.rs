//! Airlock replicas for the scale-out tests and benches: a workspace and
//! tool directory with the bundled `read`, `edit`, `cd` and `sleep`, a configuration
//! naming a context store, and `airlock mcp --http` processes on free
//! loopback ports, each waited for until `/ready`, killed when dropped.
//! Needs `debian` and `balance` beside it.

use airlock_host::bundled::BUNDLED;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A workspace with `a.txt` and `sub/b.txt`, a tool directory with the
/// bundled `read`, `edit`, `cd` and `sleep`, and a configuration allowing edits,
/// with `store` as the context store.
pub fn setup(dir: &Path, store: &str) -> (PathBuf, PathBuf) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join("sub/b.txt"), "beta\n").unwrap();
    std::fs::write(ws.join("c.txt"), "gamma\n").unwrap();
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for tool in ["read", "edit", "cd", "sleep"] {
        let package = format!("airlock-tool-{tool}");
        let (_, bytes) = BUNDLED.iter().find(|(p, _)| *p == package).unwrap();
        std::fs::write(tools.join(format!("{tool}.wasm")), bytes).unwrap();
    }
    let config = dir.join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "bundled_tools = false\ntool_dirs = [{tools:?}]\nworkspace = {ws:?}\n\
             [permissions]\nallow = [\"edit\"]\n[contexts]\nstore = {store:?}\n"
        ),
    )
    .unwrap();
    (ws, config)
}

/// `airlock ARGS` under `config`, with an empty HOME and the artifact
/// cache the MCP tests share.
pub fn airlock(home: &Path, config: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_airlock"));
    command
        .args(args)
        .env("HOME", home)
        .env("AIRLOCK_CONFIG", config)
        .env("XDG_CACHE_HOME", airlock_tests::cache_home())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_STATE_HOME");
    command
}

/// An `airlock mcp --http` replica.
pub struct Replica {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Replica {
    /// Starts one under `config`, with `home` as HOME.
    pub fn start(home: &Path, config: &Path) -> Replica {
        Replica::start_on(home, config, crate::balance::free_port())
    }

    /// Starts one on `port` (one that stood there before, behind a
    /// balancer that still names it).
    pub fn start_on(home: &Path, config: &Path, port: u16) -> Replica {
        let child = airlock(
            home,
            config,
            &["mcp", "--http", &format!("127.0.0.1:{port}")],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let replica = Replica { child, port };
        let deadline = Instant::now() + Duration::from_secs(300);
        while !replica.ready() {
            assert!(Instant::now() < deadline, "replica {port} never ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        replica
    }

    fn ready(&self) -> bool {
        self.get("/ready").starts_with("HTTP/1.1 200")
    }

    /// What it answers a `GET` of `path`, head and body (empty when it
    /// cannot be reached).
    pub fn get(&self, path: &str) -> String {
        use std::io::Read;
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let _ = write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        );
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        reply
    }

    /// Sends it SIGTERM (what Kubernetes sends a pod it stops).
    pub fn terminate(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on the replica's own pid, which it has not
        // reaped yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    /// Waits at most `within` for it to exit: its status, if it did.
    pub fn exited(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}
