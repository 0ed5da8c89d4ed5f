//! Signals: what stops a command (SIGTERM, SIGHUP, and SIGINT until a
//! command takes it), and Ctrl-C taken by `call` and `run` to cancel their
//! call, which then exit 130.

use airlock_host::tool::CancellationToken;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a command cancels its own call on SIGINT (`call`, `run`):
/// from then on SIGINT is theirs, and [`stop_signal`] lets it pass.
static INTERRUPT_IS_HANDLED: AtomicBool = AtomicBool::new(false);

/// Set once Ctrl-C cancelled the command's own call (`call`, `run`): the
/// command reports the cancelled call, then exits 130, as a shell reports
/// an interrupted command ([`interrupted_or`]).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Records that Ctrl-C cancelled the command's call ([`INTERRUPTED`]).
pub(crate) fn note_interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// 130 (128 + SIGINT) if Ctrl-C cancelled the command's call, else `code`.
pub(crate) fn interrupted_or(code: ExitCode) -> ExitCode {
    if INTERRUPTED.load(Ordering::SeqCst) {
        // 128 + SIGINT's number.
        ExitCode::from(130)
    } else {
        code
    }
}

/// Set by a command that stops on SIGTERM by draining (`mcp --http`):
/// the first SIGTERM cancels it instead of stopping at once; a second one
/// (or SIGINT, SIGHUP) stops at once.
static DRAIN: OnceLock<CancellationToken> = OnceLock::new();

/// What the first SIGTERM cancels from now on (see [`DRAIN`]).
pub(crate) fn drain_on_terminate() -> CancellationToken {
    DRAIN.get_or_init(CancellationToken::new).clone()
}

/// Says that the command now handles SIGINT itself (see
/// [`INTERRUPT_IS_HANDLED`]).
pub(crate) fn handle_interrupt_here() {
    INTERRUPT_IS_HANDLED.store(true, Ordering::SeqCst);
}

/// Waits for a signal to stop on, and names it with its number: SIGTERM
/// (what MCP clients send a stdio server that did not exit when its stdin
/// closed), SIGHUP, and SIGINT until the command handles it. Stopping
/// drops the command's work, and with it the MCP servers started for its
/// tools; the default action of these signals would leave them running.
/// A signal that was ignored when Airlock started (`nohup`, a shell's
/// background job) stays ignored. Where no handler can be installed,
/// never.
pub(crate) async fn stop_signal() -> (&'static str, u8) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |number: libc::c_int| async move {
            if ignored(number) {
                return std::future::pending().await;
            }
            match signal(SignalKind::from_raw(number)) {
                Ok(mut stream) => loop {
                    stream.recv().await;
                    if number == libc::SIGTERM
                        && let Some(drain) = DRAIN.get()
                        && !drain.is_cancelled()
                    {
                        eprintln!("airlock: terminated; finishing the calls in flight");
                        drain.cancel();
                        continue;
                    }
                    if number != libc::SIGINT || !INTERRUPT_IS_HANDLED.load(Ordering::SeqCst) {
                        return;
                    }
                },
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            () = listen(libc::SIGTERM) => ("terminated", 15),
            () = listen(libc::SIGHUP) => ("hung up", 1),
            () = listen(libc::SIGINT) => ("interrupted", 2),
        }
    }
    #[cfg(not(unix))]
    loop {
        match tokio::signal::ctrl_c().await {
            Ok(()) if !INTERRUPT_IS_HANDLED.load(Ordering::SeqCst) => return ("interrupted", 2),
            Ok(()) => {}
            Err(_) => std::future::pending().await,
        }
    }
}

/// Whether `signal` is ignored (so was when Airlock started: nothing in it
/// sets a signal to be ignored).
#[cfg(unix)]
fn ignored(signal: libc::c_int) -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction only writes the current
    // one into `current`, which is valid for writes.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), current.as_mut_ptr()) };
    // SAFETY: zeroed is a valid sigaction, and sigaction filled it on 0.
    read == 0 && unsafe { current.assume_init() }.sa_sigaction == libc::SIG_IGN
}
