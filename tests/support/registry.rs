//! A real OCI registry on loopback for the tests: Debian's `docker-registry`
//! (the CNCF distribution registry), from PATH, or else fetched with `apt-get
//! download` (no root needed) and unpacked under the target directory on
//! first use. Each [`Registry`] is a process of its own on a free port, with
//! its storage in a temp dir; dropping it stops the process.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where the unpacked package goes.
const UNPACKED: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/docker-registry");

/// A registry process serving plain HTTP on 127.0.0.1.
pub struct Registry {
    child: Child,
    storage: tempfile::TempDir,
    /// Its address, `127.0.0.1:PORT`.
    pub addr: String,
}

impl Registry {
    /// Starts a registry, and waits until it answers `GET /v2/`.
    pub fn start() -> Registry {
        let binary = binary().unwrap_or_else(|message| panic!("{message}"));
        let storage = tempfile::tempdir().expect("a temp dir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = storage.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {}}}, delete: {{enabled: true}}}}\nhttp: {{addr: {addr}}}\n",
                storage.path().join("data").display()
            ),
        )
        .expect("write the registry's config");
        let child = binary
            .command()
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = Registry {
            child,
            storage,
            addr,
        };
        let started = Instant::now();
        while !registry.answers() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "docker-registry did not answer on {} within 20 s",
                registry.addr
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    /// Whether `GET /v2/` answers 200.
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(&self.addr) else {
            return false;
        };
        let request = format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr);
        let mut reply = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut reply).is_ok()
            && reply.split_whitespace().nth(1) == Some("200")
    }

    /// The files holding the blob with `digest` (`sha256:HEX`) in storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `docker-registry` executable: on PATH, or unpacked from Debian's
/// package on first use.
fn binary() -> Result<crate::debian::Program, String> {
    static BINARY: OnceLock<Result<crate::debian::Program, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            crate::debian::program("docker-registry", &["docker-registry"], Path::new(UNPACKED))
        })
        .clone()
}
