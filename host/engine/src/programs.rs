//! `airlock:tool/programs`: the native programs the operator granted to
//! `bash`, each run through `airlock_native` confined by the call's
//! directories (read-only when the call is) and started, waited for and
//! read here. A program starts in a helper started ahead of it
//! ([`Helper::start`]); after each run the next one is started off the
//! call's path ([`Helper::refill`]). The call's deadline and cancellation
//! drop the run ([`crate::run::guard`]), and with it the helper (killed),
//! whose namespace takes everything the program started.

use super::bindings::programs_client::airlock::tool::programs::{
    self as wit, RunOutput, RunRequest,
};
use super::state::HostState;
use airlock_core::guest_path::normalize_guest;
use airlock_native::{CallDir, Confinement, Helper, Proxy};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// What a run keeps of each of stdout and stderr; the rest is read and
/// dropped (so the program is not left blocked on a full pipe).
const OUTPUT_BYTES: usize = 8 << 20;

impl wit::Host for HostState {
    fn granted(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(self
            .programs
            .names()
            .into_iter()
            .map(String::from)
            .collect())
    }

    async fn run(&mut self, request: RunRequest) -> wasmtime::Result<Result<RunOutput, String>> {
        Ok(self.run_program(request).await)
    }
}

impl HostState {
    async fn run_program(&mut self, request: RunRequest) -> Result<RunOutput, String> {
        let name = &request.name;
        let Some(program) = self.programs.granted.iter().find(|p| &p.name == name) else {
            return Err(format!(
                "{name}: not a program the operator granted to this tool"
            ));
        };
        let cwd = normalize_guest(&request.cwd)
            .ok_or_else(|| format!("{name}: {:?} is not an absolute path", request.cwd))?;
        let mut confinement = Confinement::new(&cwd);
        for mount in &self.mounts {
            let (host, inside) = (mount.mount.host.clone(), PathBuf::from(&mount.mount.guest));
            confinement.bind(host, inside, mount.writable);
        }
        if !confinement.reaches(Path::new(&cwd)) {
            return Err(format!(
                "{name}: the working directory {cwd} is outside this call's directories"
            ));
        }
        confinement.env = request.env.into_iter().collect();
        // No file it writes may be larger than what the call may still
        // write (the budget bounds a component's writes in all).
        confinement.limits.file_bytes = Some(self.budget.remaining());
        // Its CPU time, as its wall time, is the command line's.
        confinement.limits.cpu_seconds = Some(request.timeout_ms.div_ceil(1000).max(1));
        // The hosts the call may reach, through a proxy that asks the
        // call's network policy; it stops when the run is over.
        let _proxy = match self.net.policy() {
            Some(policy) => {
                let policy = policy.clone();
                let proxy = Proxy::start(Arc::new(move |method: &str, host: &str, port| {
                    policy.check_proxied(method, host, port)
                }))
                .map_err(|e| format!("{name}: cannot start its network proxy: {e}"))?;
                confinement.proxy = Some(proxy.socket());
                Some(proxy)
            }
            None => None,
        };
        let helper =
            Helper::at(self.programs.helper.as_deref()).map_err(|e| format!("{name}: {e}"))?;
        let (mut child, root) = helper
            .start(&confinement, &program.path, &request.args)
            .map_err(|e| format!("{name}: {e}"))?;
        let streams = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let mut child = Running(Some((child, root)));
        let (Some(stdin), Some(stdout), Some(stderr)) = streams else {
            return Err(format!("{name}: its helper has no pipes"));
        };
        let wrap = |e: std::io::Error| format!("{name}: cannot read or feed it: {e}");
        let stdin = ChildStdin::from_std(stdin).map_err(wrap)?;
        let (stdout, stderr) = (
            ChildStdout::from_std(stdout).map_err(wrap)?,
            ChildStderr::from_std(stderr).map_err(wrap)?,
        );
        let input = request.stdin;
        let feed = async move {
            let mut stdin = stdin;
            // A program that exits without reading its input is no error.
            let _ = stdin.write_all(&input).await;
        };
        let run = async {
            let (_, out, err) = tokio::join!(feed, read_capped(stdout), read_capped(stderr));
            (out, err, child.wait().await)
        };
        // Past its time the run is dropped, and the child with it (killed).
        let limit = Duration::from_millis(request.timeout_ms);
        let finished = tokio::time::timeout(limit, run).await;
        // The next program's helper starts now, off this call's path.
        tokio::task::spawn_blocking(|| helper.refill());
        let Ok(((stdout, cut_out), (stderr, cut_err), status)) = finished else {
            return Ok(RunOutput {
                stdout: Vec::new(),
                stderr: format!(
                    "{name}: stopped at the time limit of {} ms\n",
                    limit.as_millis()
                )
                .into_bytes(),
                exit_code: 124,
                truncated: false,
            });
        };
        let status = status.map_err(|e| format!("{name}: {e}"))?;
        Ok(RunOutput {
            stdout,
            stderr,
            exit_code: exit_code(status),
            truncated: cut_out || cut_err,
        })
    }
}

/// A started helper and its program's directory (removed once the helper
/// is reaped): killed when dropped before it was waited for (a run past
/// its time, or cancelled), and reaped then on a thread of its own.
struct Running(Option<(Child, CallDir)>);

impl Running {
    /// Its status once it has exited.
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let Some(pid) = self.0.as_ref().map(|(child, _)| child.id()) else {
            return Err(std::io::Error::other("waited for twice"));
        };
        // Waited for on a blocking thread without being reaped, so that
        // until it is reaped below its pid stays this process's to kill.
        tokio::task::spawn_blocking(move || exited(pid))
            .await
            .map_err(std::io::Error::other)??;
        let (mut child, _root) = self.0.take().ok_or(std::io::ErrorKind::NotFound)?;
        child.wait()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some((mut child, root)) = self.0.take() {
            let _ = child.kill();
            std::thread::spawn(move || {
                let _ = child.wait();
                drop(root);
            });
        }
    }
}

/// Blocks until the process `pid` has exited, leaving it unreaped.
#[cfg(target_os = "linux")]
fn exited(pid: u32) -> std::io::Result<()> {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other(format!("{pid} is not a process id")))?;
    loop {
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            done => return done.map(drop).map_err(Into::into),
        }
    }
}

/// Native programs run only on Linux ([`Helper::start`] refuses them
/// elsewhere).
#[cfg(not(target_os = "linux"))]
fn exited(_: u32) -> std::io::Result<()> {
    Err(std::io::Error::other("native programs run only on Linux"))
}

/// Everything `stream` gives, keeping the first [`OUTPUT_BYTES`]; and
/// whether more came.
async fn read_capped(mut stream: impl AsyncRead + Unpin) -> (Vec<u8>, bool) {
    let (mut kept, mut cut) = (Vec::new(), false);
    let mut buffer = vec![0; 64 << 10];
    while let Ok(n) = stream.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_BYTES - kept.len();
        kept.extend_from_slice(&buffer[..n.min(room)]);
        cut |= n > room;
    }
    (kept, cut)
}

/// The status as a shell gives it: the code, or 128 + the signal.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return 128 + signal;
    }
    status.code().unwrap_or(1)
}
