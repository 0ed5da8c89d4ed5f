//! The program's rlimits.

use crate::plan::Limits;

/// Sets `limits` on this process (inherited by the program).
pub(super) fn apply(limits: &Limits) -> Result<(), String> {
    let cpu = limits.cpu_seconds.map(|s| (s, s + 1));
    let pairs = [
        (
            libc::RLIMIT_NOFILE,
            Some((limits.open_files, limits.open_files)),
        ),
        // Counted in the call's user namespace, where the helper and pid 1
        // are two of them.
        (
            libc::RLIMIT_NPROC,
            Some((limits.processes + 2, limits.processes + 2)),
        ),
        (libc::RLIMIT_CORE, Some((0, 0))),
        (libc::RLIMIT_AS, limits.memory_bytes.map(|b| (b, b))),
        (libc::RLIMIT_FSIZE, limits.file_bytes.map(|b| (b, b))),
        (libc::RLIMIT_CPU, cpu),
    ];
    for (resource, limit) in pairs {
        let Some((soft, hard)) = limit else { continue };
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: `limit` is a valid rlimit.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(format!(
                "cannot set a limit: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
