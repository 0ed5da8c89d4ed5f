//! The bound on processes that holds for root too: a pids cgroup the
//! helper joins before it makes its namespaces (root's processes are
//! exempt from `RLIMIT_NPROC`). Made where this process may make one:
//! cgroup v1's pids hierarchy, or a child of its own cgroup in v2.
//!
//! Only the kernel's root needs it. Any other user's `RLIMIT_NPROC`, set
//! inside the call's new user namespace, counts that namespace's processes
//! only (Linux 5.14 and later; before, all the user's processes), so it
//! bounds the one tree. And joining costs: on cgroup v1 moving a
//! process waits for an RCU grace period (7 to 17 ms here when no other
//! move came just before), longer than the rest of the confinement.

use crate::plan::Plan;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

/// Joins a new pids cgroup named after the plan's root, bounded at the
/// plan's processes; `None` when none can be made here.
pub(super) fn enter(plan: &Plan) -> Option<PathBuf> {
    enter_named(plan.root.file_name()?, plan.confinement.limits.processes)
}

/// Joins a new pids cgroup `name` bounded at `processes` (plus the helper
/// and pid 1), when this process runs as the kernel's root; `None` when
/// it does not or none can be made here.
pub(super) fn enter_named(name: &OsStr, processes: u64) -> Option<PathBuf> {
    if !kernel_root() {
        return None;
    }
    let pid = std::process::id().to_string();
    for parent in parents() {
        let group = parent.join(name);
        if fs::create_dir(&group).is_err() {
            continue;
        }
        let joined =
            bound(&group, processes).and_then(|()| fs::write(group.join("cgroup.procs"), &pid));
        if joined.is_ok() {
            return Some(group);
        }
        let _ = fs::remove_dir(&group);
    }
    None
}

/// Bounds the cgroup `group` at `processes` (plus the helper and pid 1).
pub(super) fn bound(group: &Path, processes: u64) -> std::io::Result<()> {
    fs::write(group.join("pids.max"), (processes + 2).to_string())
}

/// Whether this process runs as the kernel's root, which `RLIMIT_NPROC`
/// exempts: uid 0 here, or any uid this user namespace maps to 0 (and not
/// a container's "root" that maps to an ordinary user).
fn kernel_root() -> bool {
    // SAFETY: getuid cannot fail.
    let uid = u64::from(unsafe { libc::getuid() });
    let Ok(map) = fs::read_to_string("/proc/self/uid_map") else {
        return uid == 0;
    };
    map.lines().any(|line| {
        let mut numbers = line.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(inside)), Some(Ok(outside)), Some(Ok(count))) =
            (numbers.next(), numbers.next(), numbers.next())
        else {
            return false;
        };
        (inside..inside.saturating_add(count)).contains(&uid) && outside + (uid - inside) == 0
    })
}

/// Moves the helper back out and removes the cgroup, once the program
/// and its namespace are gone.
pub(super) fn leave(group: Option<PathBuf>) {
    let Some(group) = group else { return };
    if let Some(parent) = group.parent() {
        let _ = fs::write(parent.join("cgroup.procs"), std::process::id().to_string());
    }
    let _ = fs::remove_dir(&group);
}

/// Where a pids cgroup may be made: v1's hierarchy, v2's own cgroup.
/// Both under this process's own cgroup, so a service manager's bound
/// on the service (systemd's `TasksMax`, its kill on stop) still holds.
pub(super) fn parents() -> Vec<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let under = |root: &str, path: &str| PathBuf::from(root).join(path.trim_start_matches('/'));
    let v1 = own.lines().find_map(|l| {
        let (_, rest) = l.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| under("/sys/fs/cgroup/pids", path))
    });
    let v2 = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| under("/sys/fs/cgroup", p));
    v1.into_iter().chain(v2).collect()
}
