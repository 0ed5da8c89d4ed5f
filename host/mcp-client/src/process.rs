//! A server's child process: its own process group, its stderr drained,
//! and the group killed when the last tool holding it goes.

use airlock_core::sanitize::{self, Sink};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// What a confined server runs with, on the host's side.
pub(crate) struct Sandbox {
    pub(crate) _root: airlock_native::CallDir,
    pub(crate) _proxy: Option<airlock_native::Proxy>,
}

/// How long a server gets to exit after its stdin closed, then after
/// SIGTERM.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// A server's child process. On Unix it leads a process group of its own,
/// and dropping this kills the group (SIGKILL), so what the server started
/// goes with it; elsewhere, only the child. The group's id cannot be taken
/// by another group while its leader is unreaped, and on Linux the leader
/// is not reaped before that kill (its exit is observed with `WNOWAIT`).
pub(crate) struct Process {
    pub(crate) child: tokio::process::Child,
    /// A confined server's root and network proxy, kept until it has
    /// exited.
    _sandbox: Option<Sandbox>,
    #[cfg(unix)]
    pub(crate) leader: Option<nix::unistd::Pid>,
}

impl Process {
    pub(crate) fn new(child: tokio::process::Child, sandbox: Option<Sandbox>) -> Process {
        Process {
            _sandbox: sandbox,
            #[cfg(unix)]
            leader: child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(nix::unistd::Pid::from_raw),
            child,
        }
    }

    /// Waits for the server to exit after its stdin closed, sends its
    /// group SIGTERM if it has not within [`GRACE`] and waits again; then
    /// drops it, which kills whatever is left of the group.
    pub(crate) async fn stop(mut self) {
        if !self.exits_within(GRACE).await {
            #[cfg(unix)]
            self.signal(nix::sys::signal::Signal::SIGTERM);
            self.exits_within(GRACE).await;
        }
    }

    /// Whether the server exits within `time`.
    #[cfg(target_os = "linux")]
    async fn exits_within(&mut self, time: Duration) -> bool {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        let (Some(leader), Some(_)) = (self.leader, self.child.id()) else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + time;
        loop {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            if !matches!(waitid(Id::Pid(leader), flags), Ok(WaitStatus::StillAlive)) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the server exits within `time` (reaping it).
    #[cfg(not(target_os = "linux"))]
    async fn exits_within(&mut self, time: Duration) -> bool {
        tokio::time::timeout(time, self.child.wait()).await.is_ok()
    }

    /// Sends the server's process group `signal`.
    #[cfg(unix)]
    fn signal(&self, signal: nix::sys::signal::Signal) {
        if let Some(leader) = self.leader {
            match nix::sys::signal::killpg(leader, signal) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(e) => tracing::warn!("cannot signal an MCP server's process group: {e}"),
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        #[cfg(unix)]
        self.signal(nix::sys::signal::Signal::SIGKILL);
        // Then the child is dropped: `kill_on_drop` kills it (elsewhere
        // than Unix, the only kill) and tokio reaps it.
    }
}

/// The last lines a server wrote on stderr, kept to say why it did not
/// start (a confined one's helper says there what it could not set up).
#[derive(Clone, Default)]
pub(crate) struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    /// How many lines are kept.
    const LINES: usize = 5;

    fn push(&self, line: String) {
        let mut lines = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.len() == Self::LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The lines kept, joined; `None` when there are none.
    pub(crate) fn shown(&self) -> Option<String> {
        let lines = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let kept: Vec<&str> = (lines.iter())
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        (!kept.is_empty()).then(|| kept.join(" | "))
    }
}

/// Reads a server's stderr to its end (so the server never blocks on a
/// full pipe or dies of a closed one), logging each line, cleaned and cut
/// at 500 characters, and keeping the last ones in `tail`; bytes past
/// 4 KiB of one line are dropped.
pub(crate) async fn drain_stderr(
    server: String,
    mut stderr: tokio::process::ChildStderr,
    tail: Tail,
) {
    const LINE: usize = 4096;
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    let log = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let text = sanitize::clean_capped(&text, Sink::Line, 500);
        tracing::debug!(%server, "stderr: {text}");
        tail.push(text);
    };
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            let room = LINE.saturating_sub(line.len());
            line.extend_from_slice(&piece[..piece.len().min(room)]);
            if piece.ends_with(b"\n") {
                log(&line);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        log(&line);
    }
}
