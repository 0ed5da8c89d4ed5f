//! Real servers for the scale-out tests, each a process of its own on a
//! free loopback port with its files in a temp dir, stopped when dropped:
//! Redis (Debian's `redis-server`, nothing saved to disk) and nginx
//! (Debian's `nginx`, round-robin over the given backends, no stickiness,
//! each response naming the backend that served it in `X-Upstream`; one
//! process, no workers, so killing it stops it).

use crate::debian::{self, Program};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where the packages are unpacked when the programs are not installed.
const UNPACKED: &str = env!("CARGO_TARGET_TMPDIR");

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn wait_for(port: u16, what: &str) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what} did not listen on {port} within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn redis_server() -> &'static Program {
    static PROGRAM: OnceLock<Result<Program, String>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            debian::program(
                "redis-server",
                &["redis-server", "redis-tools", "liblzf1", "libjemalloc2"],
                &Path::new(UNPACKED).join("redis"),
            )
        })
        .as_ref()
        .unwrap_or_else(|message| panic!("{message}"))
}

fn nginx() -> &'static Program {
    static PROGRAM: OnceLock<Result<Program, String>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            debian::program(
                "nginx",
                &["nginx", "libpcre2-8-0"],
                &Path::new(UNPACKED).join("nginx"),
            )
        })
        .as_ref()
        .unwrap_or_else(|message| panic!("{message}"))
}

/// A Redis server.
pub struct Redis {
    child: Child,
    _dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The arguments it was started with beside the port and the files.
    args: Vec<String>,
}

impl Redis {
    /// Starts one, and waits until it accepts connections.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// Starts one with more arguments (`--requirepass PW`, `--appendonly
    /// yes`).
    pub fn start_with(args: &[&str]) -> Redis {
        let dir = tempfile::tempdir().expect("a temp dir");
        let port = free_port();
        let child = Redis::spawn(dir.path(), port, args);
        Redis {
            child,
            _dir: dir,
            port,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// A server on `port` keeping nothing on disk unless `args` say
    /// otherwise, once it accepts connections.
    fn spawn(dir: &Path, port: u16, args: &[impl AsRef<std::ffi::OsStr>]) -> Child {
        let child = redis_server()
            .command()
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        wait_for(port, "redis-server");
        child
    }

    /// Kills it and starts it again on the same port: it comes back empty
    /// (unless it keeps an append-only file), and the connections clients
    /// held are closed.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Redis::spawn(self._dir.path(), self.port, &self.args);
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops it now.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// nginx balancing over backends.
pub struct Nginx {
    child: Child,
    _dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Nginx {
    /// Starts nginx on a free port, passing every request round-robin to
    /// `backends` (ports on 127.0.0.1): a backend that refuses the
    /// connection is skipped for the next one.
    pub fn start(backends: &[u16]) -> Nginx {
        let dir = tempfile::tempdir().expect("a temp dir");
        let port = free_port();
        let d = dir.path().display();
        let servers: String = backends
            .iter()
            .map(|p| format!("    server 127.0.0.1:{p} max_fails=1 fail_timeout=10s;\n"))
            .collect();
        let config = format!(
            "daemon off;\nmaster_process off;\n\
             pid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000;\n\
               client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
               upstream airlock {{\n{servers}    keepalive 8;\n  }}\n\
               server {{\n    listen 127.0.0.1:{port};\n\
                 location / {{\n      proxy_pass http://airlock;\n\
                   proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n\
                   proxy_set_header Host $http_host;\n      proxy_buffering off;\n\
                   proxy_read_timeout 300s;\n\
                   proxy_next_upstream error timeout;\n\
                   add_header X-Upstream $upstream_addr always;\n    }}\n  }}\n}}\n"
        );
        let file = dir.path().join("nginx.conf");
        std::fs::write(&file, config).expect("write nginx.conf");
        let child = nginx()
            .command()
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .args(["-e", "stderr"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        wait_for(port, "nginx");
        Nginx {
            child,
            _dir: dir,
            port,
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
