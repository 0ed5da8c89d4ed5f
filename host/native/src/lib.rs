//! Native programs confined by the grants Airlock computes: the second
//! tier beside components, for the programs an agent runs through `bash`
//! and for external MCP servers.
//!
//! A [`Confinement`] says what a program may reach: directories to read
//! (and execute from), directories to write, its working directory, its
//! environment and its limits. [`Helper::command`] turns it into a
//! [`std::process::Command`] that runs the program through a helper
//! process: a fresh, single-threaded copy of the embedding binary (setting
//! up namespaces after a fork inside a multithreaded host is unsafe).
//! [`Helper::start`] starts the program at once in a helper started ahead
//! of it ([`Helper::refill`]), which has loaded the binary and made the
//! namespaces already: what is left on the program's path is what depends
//! on its grants. On
//! Linux the helper ([`helper`]) gives the program user, mount, pid and
//! network namespaces with a minimal root holding only the system's
//! read-only runtime, the grants and a private `/tmp`; then Landlock, a
//! seccomp deny list, `no_new_privs`, an empty capability bounding set,
//! rlimits and a clean environment. Where the kernel lacks what this
//! needs, and on other systems, programs are refused ([`Refused`]), never
//! run unconfined.
//!
//! The embedding binary's `main` calls [`serve_if_asked`] first, so the
//! binary is its own helper and nothing else is installed:
//!
//! ```no_run
//! // First thing in `main`: a helper confines itself and runs its program
//! // here, never returning; any other start goes on.
//! airlock_native::serve_if_asked();
//! ```
//!
//! It knows nothing about tools, calls, permissions or MCP: the grants it
//! is given are the whole policy.

#[cfg(target_os = "linux")]
mod helper;
mod plan;
mod proxy;

pub use plan::{Confinement, Grant, Limits};
pub use proxy::{Policy, Proxy};

use plan::Plan;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The environment variable that carries a helper its [`Plan`] (as JSON):
/// a binary started with it set is a helper ([`serve_if_asked`]). An
/// environment variable rather than an argument: a program's arguments
/// are readable by every user, its environment only by its own.
const PLAN_VAR: &str = "AIRLOCK_SANDBOX_PLAN";

/// [`PLAN_VAR`]'s value for a spare helper: its plan comes on stdin.
const PLAN_ON_STDIN: &str = "stdin";

/// The environment variable that names a spare's pids cgroup (joined by
/// a root helper only, [`CallDir`] removes it).
const GROUP_VAR: &str = "AIRLOCK_SANDBOX_GROUP";

/// The longest plan a spare reads.
#[cfg(target_os = "linux")]
const PLAN_BYTES: usize = 16 << 20;

/// What a helper prints on stdout when asked only to check that it can
/// confine ([`Helper::check`]): a binary that does not print it is not a
/// helper.
const READY: &str = "airlock-sandbox ready 1";

/// Why a program was not run: the system cannot confine it, or the
/// grants do not allow it. Nothing runs unconfined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// If this process was started as a sandbox helper, confines itself as its
/// plan says and runs the program; it never returns then (the process
/// exits with the program's status). Otherwise it returns at once. Call it
/// first in `main`, before any thread starts.
pub fn serve_if_asked() {
    let Some(plan) = std::env::var_os(PLAN_VAR) else {
        return;
    };
    // SAFETY: called first in `main`, before any other thread exists, so
    // nothing reads the environment concurrently.
    unsafe { std::env::remove_var(PLAN_VAR) };
    #[cfg(target_os = "linux")]
    if plan == PLAN_ON_STDIN {
        let group = std::env::var_os(GROUP_VAR).unwrap_or_default();
        // SAFETY: as above.
        unsafe { std::env::remove_var(GROUP_VAR) };
        helper::spare(&group)
    } else {
        helper::enter(parse_plan(plan.as_encoded_bytes()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = plan;
        fail(UNSUPPORTED)
    }
}

/// The plan in `text`, or the helper ends.
#[cfg(target_os = "linux")]
fn parse_plan(text: &[u8]) -> Plan {
    serde_json::from_slice(text)
        .unwrap_or_else(|e| fail(&format!("the helper's plan is not valid: {e}")))
}

/// Why a helper gives up before the program runs: the message on stderr
/// and exit status 125 (as `env` and `timeout` use for their own failures).
fn fail(message: &str) -> ! {
    eprintln!("airlock sandbox: {message}");
    std::process::exit(125)
}

/// The refusal on systems the native tier does not support yet.
#[cfg(not(target_os = "linux"))]
const UNSUPPORTED: &str = "native programs run only on Linux (Landlock, seccomp and namespaces); \
     on this system they are refused rather than run unconfined";

/// The binary that confines programs: one whose `main` calls
/// [`serve_if_asked`] first (the `airlock` binary does).
#[derive(Debug)]
pub struct Helper {
    exe: PathBuf,
    checked: OnceLock<Result<(), Refused>>,
    /// A helper started ahead of the next program, waiting for its plan.
    spare: Mutex<Option<Spare>>,
}

impl Helper {
    /// The helper at `exe`.
    pub fn new(exe: impl Into<PathBuf>) -> Helper {
        Helper {
            exe: exe.into(),
            checked: OnceLock::new(),
            spare: Mutex::new(None),
        }
    }

    /// The running binary as its own helper.
    pub fn current_exe() -> Result<Helper, Refused> {
        std::env::current_exe().map(Helper::new).map_err(|e| {
            Refused(format!(
                "cannot find the running binary to confine with: {e}"
            ))
        })
    }

    /// The helper at `exe`, or the running binary when `None`: one for
    /// the process per path, so each is checked once.
    pub fn at(exe: Option<&Path>) -> Result<&'static Helper, Refused> {
        static RUNNING: OnceLock<Result<Helper, Refused>> = OnceLock::new();
        static NAMED: Mutex<BTreeMap<PathBuf, &'static Helper>> = Mutex::new(BTreeMap::new());
        let Some(exe) = exe else {
            return RUNNING
                .get_or_init(Helper::current_exe)
                .as_ref()
                .map_err(Clone::clone);
        };
        let mut named = NAMED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(*named
            .entry(exe.to_path_buf())
            .or_insert_with(|| Box::leak(Box::new(Helper::new(exe)))))
    }

    /// The helper's path.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Whether this system can confine programs, checked once by running
    /// the helper through every step but the program's start: a kernel
    /// without user namespaces or Landlock, another system, or a binary
    /// that is not a helper gives the reason.
    pub fn check(&self) -> Result<(), Refused> {
        self.checked.get_or_init(|| self.probe()).clone()
    }

    fn probe(&self) -> Result<(), Refused> {
        // `/tmp` is the one directory a confinement always has (the
        // host's TMPDIR may be elsewhere).
        let confinement = Confinement::new("/tmp");
        let plan = Plan::new(&confinement, Path::new("/"), &[], true);
        let (mut command, _dir) = self.prepared(plan)?;
        let output = probed(command.stdin(Stdio::null()))
            .map_err(|e| Refused(format!("cannot run {}: {e}", self.exe.display())))?;
        let said = String::from_utf8_lossy(&output.stdout);
        if output.status.success() && said.trim_end() == READY {
            return Ok(());
        }
        let reason = String::from_utf8_lossy(&output.stderr);
        let reason = reason.trim();
        Err(Refused(if reason.starts_with("airlock sandbox: ") {
            format!("native programs cannot be confined here, so they are refused: {reason}")
        } else {
            format!(
                "{} is not a sandbox helper (its main must call airlock_native::serve_if_asked \
                 first), so native programs are refused",
                self.exe.display()
            )
        }))
    }

    /// A command that runs `program` with `args`, confined as
    /// `confinement` says; its standard streams are the caller's to set.
    /// The returned [`CallDir`] must live until the program has exited.
    /// Refused when the system cannot confine ([`Helper::check`]), when
    /// `program` is not an absolute path to a file, or when it lies inside
    /// a directory the program may write (it could be replaced).
    pub fn command(
        &self,
        confinement: &Confinement,
        program: &Path,
        args: &[String],
    ) -> Result<(Command, CallDir), Refused> {
        self.prepared(self.program_plan(confinement, program, args)?)
    }

    /// The plan for `program`, or why it is refused.
    fn program_plan(
        &self,
        confinement: &Confinement,
        program: &Path,
        args: &[String],
    ) -> Result<Plan, Refused> {
        self.check()?;
        let program = confinement.runnable(program)?;
        if let Some(socket) = &confinement.proxy
            && !proxy::is_socket(socket)
        {
            return Err(Refused(format!(
                "{} is not a proxy's socket",
                socket.display()
            )));
        }
        Ok(Plan::new(confinement, &program, args, false))
    }

    /// Starts `program` as [`Helper::command`] would run it, with its
    /// standard streams piped: in the helper started ahead of it by
    /// [`Helper::refill`] when one waits (only what depends on the grants
    /// is left to do), else in one started now. The program's input is
    /// what the caller writes on the child's stdin. The returned
    /// [`CallDir`] must live until the child has exited; kill the child
    /// to stop the program and everything it started.
    pub fn start(
        &self,
        confinement: &Confinement,
        program: &Path,
        args: &[String],
    ) -> Result<(Child, CallDir), Refused> {
        let (plan, mut dir) = self.plan(self.program_plan(confinement, program, args)?)?;
        let mut framed = Vec::with_capacity(8 + plan.len());
        framed.extend_from_slice(&(plan.len() as u64).to_le_bytes());
        framed.extend_from_slice(plan.as_bytes());
        let waiting = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        // A spare that died meanwhile (its stdin is closed) is replaced
        // by one started now.
        for spare in [waiting, None] {
            let Spare { mut child, group } = match spare {
                Some(spare) => spare,
                None => self.spawn_spare()?,
            };
            let sent = match child.stdin.as_mut() {
                Some(stdin) => stdin.write_all(&framed),
                None => Err(std::io::ErrorKind::BrokenPipe.into()),
            };
            match sent {
                Ok(()) => {
                    dir.group = Some(group);
                    return Ok((child, dir));
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    forget_group(&group);
                    if e.kind() != std::io::ErrorKind::BrokenPipe {
                        return Err(Refused(format!("cannot hand the helper its plan: {e}")));
                    }
                }
            }
        }
        Err(Refused(
            "the helper exited before it was handed its plan".into(),
        ))
    }

    /// Starts a helper to wait for the next [`Helper::start`], unless one
    /// waits already: call it after a program, off the path of a call, so
    /// that the next one does not wait for the binary to load and the
    /// namespaces to be made. Does nothing where programs cannot be
    /// confined.
    pub fn refill(&self) {
        let waiting = || self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if self.check().is_err() || waiting().is_some() {
            return;
        }
        let Ok(spare) = self.spawn_spare() else {
            return;
        };
        let extra = waiting().replace(spare);
        if let Some(Spare { mut child, group }) = extra {
            let _ = child.kill();
            let _ = child.wait();
            forget_group(&group);
        }
    }

    fn spawn_spare(&self) -> Result<Spare, Refused> {
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let group = format!("airlock-sandbox-{}-{n}", std::process::id());
        let child = Command::new(&self.exe)
            .env_clear()
            .env(PLAN_VAR, PLAN_ON_STDIN)
            .env(GROUP_VAR, &group)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Refused(format!("cannot start {}: {e}", self.exe.display())))?;
        Ok(Spare { child, group })
    }

    fn prepared(&self, plan: Plan) -> Result<(Command, CallDir), Refused> {
        let (plan, dir) = self.plan(plan)?;
        let mut command = Command::new(&self.exe);
        command.env_clear().env(PLAN_VAR, plan);
        Ok((command, dir))
    }

    /// `plan` as JSON, its root a new [`CallDir`].
    fn plan(&self, mut plan: Plan) -> Result<(String, CallDir), Refused> {
        let dir = tempfile::Builder::new()
            .prefix("airlock-sandbox-")
            .tempdir()
            .map_err(|e| Refused(format!("cannot make the sandbox's directory: {e}")))?;
        plan.root = dir.path().to_path_buf();
        let plan = serde_json::to_string(&plan)
            .map_err(|e| Refused(format!("cannot write the sandbox's plan: {e}")))?;
        Ok((plan, CallDir { dir, group: None }))
    }
}

/// How long the check may take: a binary that is not a helper runs its
/// own `main`, which may never end.
const PROBE_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// `command`'s output, killed past [`PROBE_TIME`].
fn probed(command: &mut Command) -> std::io::Result<std::process::Output> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = std::time::Instant::now() + PROBE_TIME;
    while child.try_wait()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "it did not finish within {} s",
                PROBE_TIME.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.wait_with_output()
}

/// A helper started ahead of its program, and the name of the pids
/// cgroup it joins (as root).
#[derive(Debug)]
struct Spare {
    child: Child,
    group: String,
}

/// The directory a confined program's root is mounted on (empty on the
/// host's side), removed when dropped, with the pids cgroup named after
/// it if a killed helper left it, or the one its helper joined ahead of
/// it: keep it until the helper has exited.
#[derive(Debug)]
pub struct CallDir {
    dir: tempfile::TempDir,
    group: Option<String>,
}

impl CallDir {
    /// The directory: owned by this process's user, so a helper started
    /// as another (a service dropping to its own user) needs it handed
    /// over.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for CallDir {
    fn drop(&mut self) {
        if let Some(name) = self.dir.path().file_name() {
            forget_group(name);
        }
        if let Some(group) = &self.group {
            forget_group(group);
        }
    }
}

/// Removes the pids cgroup `name` if a helper left it.
fn forget_group(name: impl AsRef<std::ffi::OsStr>) {
    #[cfg(target_os = "linux")]
    helper::forget_pids(name.as_ref());
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}
