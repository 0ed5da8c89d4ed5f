//! `airlock:tool/programs`: the native programs the operator granted to
//! `bash`, each run through `airlock_native` confined by the call's
//! directories (read-only when the call is) and started, waited for and
//! read here. The call's deadline and cancellation drop the run
//! ([`crate::run::guard`]), and with it the helper, whose namespace takes
//! everything the program started.

use super::bindings::programs_client::airlock::tool::programs::{
    self as wit, RunOutput, RunRequest,
};
use super::state::HostState;
use airlock_core::guest_path::normalize_guest;
use airlock_native::{Confinement, Helper, Proxy};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

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
        let (command, _root) = helper
            .command(&confinement, &program.path, &request.args)
            .map_err(|e| format!("{name}: {e}"))?;
        let mut command = tokio::process::Command::from(command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("{name}: cannot start: {e}"))?;
        let stdin = child.stdin.take();
        let input = request.stdin;
        let feed = async move {
            if let Some(mut stdin) = stdin {
                // A program that exits without reading its input is no error.
                let _ = stdin.write_all(&input).await;
            }
        };
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let run = async move {
            let (_, out, err) = tokio::join!(feed, read_capped(stdout), read_capped(stderr));
            (out, err, child.wait().await)
        };
        // Past its time the run is dropped, and the child with it (killed).
        let limit = Duration::from_millis(request.timeout_ms);
        let Ok(((stdout, cut_out), (stderr, cut_err), status)) =
            tokio::time::timeout(limit, run).await
        else {
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

/// Everything `stream` gives, keeping the first [`OUTPUT_BYTES`]; and
/// whether more came.
async fn read_capped(stream: Option<impl AsyncRead + Unpin>) -> (Vec<u8>, bool) {
    let (mut kept, mut cut) = (Vec::new(), false);
    let Some(mut stream) = stream else {
        return (kept, cut);
    };
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
