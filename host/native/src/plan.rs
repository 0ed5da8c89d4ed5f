//! What a confined program may reach ([`Confinement`], [`Limits`]) and the
//! plan a helper is handed ([`Plan`]).

use crate::Refused;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The system's read-only runtime every confined program sees: the
/// programs and libraries under these (or the links to them) are bound
/// read-only into its root.
pub(crate) const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// What of `/etc` programs need (the loader's cache, users and groups for
/// `id` and git, time zone, TLS roots, alternatives' links): not all of
/// it, which would show a root caller `/etc/shadow`.
pub(crate) const ETC: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/gitconfig",
    "/etc/mime.types",
];

/// A directory (or file) a confined program may reach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Where it is on the host (absolute).
    pub host: PathBuf,
    /// Where the program sees it (absolute).
    pub inside: PathBuf,
    /// Whether the program may write it (else read and execute only).
    pub writable: bool,
}

/// What a confined program may reach. Paths are absolute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// What it may reach besides the system's runtime and its `/tmp`.
    pub grants: Vec<Grant>,
    /// Its working directory (as it sees it): inside a grant, or `/tmp`.
    pub cwd: PathBuf,
    /// Its environment, over a clean one of `PATH`, `HOME` and `TMPDIR`
    /// (both the private `/tmp`) and `LANG`; nothing of the host's.
    pub env: BTreeMap<String, String>,
    /// Its limits.
    pub limits: Limits,
    /// A [`crate::Proxy`]'s socket on the host: the program's only way to
    /// the network, as a loopback port named in its proxy variables
    /// (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, and lower case). `None`:
    /// no network at all.
    #[serde(default)]
    pub proxy: Option<PathBuf>,
}

impl Confinement {
    /// Nothing granted, working in `cwd`, with the default limits.
    pub fn new(cwd: impl Into<PathBuf>) -> Confinement {
        Confinement {
            grants: Vec::new(),
            cwd: cwd.into(),
            env: BTreeMap::new(),
            limits: Limits::default(),
            proxy: None,
        }
    }

    /// Grants `path` to read (and execute from), at its own path.
    pub fn read(&mut self, path: impl Into<PathBuf>) -> &mut Confinement {
        let path = path.into();
        self.bind(path.clone(), path, false)
    }

    /// Grants `path` to read and write, at its own path.
    pub fn write(&mut self, path: impl Into<PathBuf>) -> &mut Confinement {
        let path = path.into();
        self.bind(path.clone(), path, true)
    }

    /// Grants the host's `host` as `inside`.
    pub fn bind(&mut self, host: PathBuf, inside: PathBuf, writable: bool) -> &mut Confinement {
        self.grants.push(Grant {
            host,
            inside,
            writable,
        });
        self
    }

    /// Whether `inside` (as the program sees it) lies in a grant or the
    /// private `/tmp`.
    pub fn reaches(&self, inside: &Path) -> bool {
        inside.starts_with("/tmp") || self.grants.iter().any(|g| inside.starts_with(&g.inside))
    }

    /// The same grants, none writable: what a read-only call gets,
    /// whatever the program.
    pub fn read_only(mut self) -> Confinement {
        for grant in &mut self.grants {
            grant.writable = false;
        }
        self
    }

    /// `program` as the helper runs it: an absolute path to a file that
    /// no grant lets the program write (a program that could replace
    /// itself, or be replaced by an earlier call, is not the one granted).
    pub(crate) fn runnable(&self, program: &Path) -> Result<PathBuf, Refused> {
        if !program.is_absolute() {
            return Err(Refused(format!(
                "{} is not an absolute path",
                program.display()
            )));
        }
        let real = program
            .canonicalize()
            .map_err(|e| Refused(format!("{}: {e}", program.display())))?;
        if !real.is_file() {
            return Err(Refused(format!("{} is not a file", program.display())));
        }
        for granted in self.grants.iter().filter(|g| g.writable) {
            let granted = granted
                .host
                .canonicalize()
                .unwrap_or_else(|_| granted.host.clone());
            if real.starts_with(&granted) {
                return Err(Refused(format!(
                    "{} lies inside {}, which the program may write, so it could be replaced; \
                     it is refused",
                    real.display(),
                    granted.display()
                )));
            }
        }
        Ok(program.to_path_buf())
    }
}

/// Bounds on a confined program and everything it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Address space per process, in bytes (`RLIMIT_AS`; default 4 GiB).
    pub memory_bytes: Option<u64>,
    /// CPU time per process, in seconds (`RLIMIT_CPU`).
    pub cpu_seconds: Option<u64>,
    /// Largest file it may write, in bytes (`RLIMIT_FSIZE`).
    pub file_bytes: Option<u64>,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes at once, the program included: the pid namespace's
    /// `RLIMIT_NPROC` inside the call's user namespace, and for root (whom
    /// it exempts) a pids cgroup's `pids.max` where one can be made.
    pub processes: u64,
    /// Size of the private `/tmp` (which is also `HOME`), in bytes.
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: Some(4 << 30),
            cpu_seconds: None,
            file_bytes: None,
            open_files: 1024,
            processes: 256,
            tmp_bytes: 256 << 20,
        }
    }
}

/// What a helper is asked to do: run `program` with `args` confined as
/// `confinement` says, its root mounted on `root` (an empty directory the
/// caller made and removes); with `probe`, every step but the program's
/// start, then report ready.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub(crate) confinement: Confinement,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) probe: bool,
    pub(crate) root: PathBuf,
}

impl Plan {
    pub(crate) fn new(
        confinement: &Confinement,
        program: &Path,
        args: &[String],
        probe: bool,
    ) -> Plan {
        Plan {
            confinement: confinement.clone(),
            program: program.to_path_buf(),
            args: args.to_vec(),
            probe,
            root: PathBuf::new(),
        }
    }
}
